"""The device arrays a kernel's code names as globals or closure variables: Numba captures
them by address, so they are memory the kernel can touch like its parameters."""
from __future__ import annotations

import types
import weakref
from dataclasses import dataclass
from typing import Any

from .kernels import is_device_function, kernel_py_func, referenced_names


@dataclass(frozen=True)
class GlobalRef:
    """A device array a kernel names by a global or closure variable: found again from the
    function's namespace at every trace, so a rebound name is followed."""
    func: Any                 # a weak reference to the Python function whose namespace holds it
    path: tuple[str, ...]     # ("name", "attr", ...) or ("<closure>", name, "attr", ...)

    def resolve(self) -> Any:
        func = self.func()
        if func is None:
            return None
        head, rest = self.path[0], self.path[1:]
        if head == "<closure>":
            names = func.__code__.co_freevars
            cell = (func.__closure__ or ())[names.index(rest[0])]
            try:
                value = cell.cell_contents
            except ValueError:
                return None
            rest = rest[1:]
        else:
            value = func.__globals__.get(head)
        for attr in rest:
            value = getattr(value, attr, None)
        return value

    def site(self) -> tuple:
        """Where the name lives (its module's globals, or its closure cell) and the path in
        it: two kernels naming one global share a site."""
        func = self.func()
        if func is None:
            return (None, self.path)
        if self.path[0] == "<closure>":
            names = func.__code__.co_freevars
            return (id((func.__closure__ or ())[names.index(self.path[1])]), self.path[2:])
        return (id(func.__globals__), self.path)

    def describe(self) -> str:
        func = self.func()
        where = getattr(func, "__name__", "?")
        path = self.path[1:] if self.path[0] == "<closure>" else self.path
        return f"{'.'.join(path)} (named in {where})"


def is_device_array(value: Any) -> bool:
    """Numba device arrays and anything exposing the CUDA Array Interface (captured by
    address); NumPy globals are compile-time constants."""
    from .devicearrays import is_simulated_device_array
    return hasattr(type(value), "__cuda_array_interface__") or is_simulated_device_array(value)


def holds_arrays(value: Any) -> bool:
    if is_device_array(value):
        return True
    return type(value) is tuple and any(holds_arrays(v) for v in value)


def _attributes(value: Any) -> dict | None:
    """The attributes of a module, class or plain object (not of a function or array)."""
    if isinstance(value, (types.ModuleType, type)) or not callable(value):
        attrs = getattr(value, "__dict__", None)
        return attrs if isinstance(attrs, dict) else None
    return None


def device_functions_in(value: Any) -> list[Any]:
    """The device functions a value is or holds (a tuple of them, at any depth)."""
    if is_device_function(value):
        return [value]
    if type(value) is tuple:
        return [f for v in value for f in device_functions_in(v)]
    return []


def unknown_globals(kernel: Any) -> tuple[tuple[GlobalRef, str], ...]:
    """For a kernel (or device function, or its Python function) whose IR could not be
    followed: every array its code names as a global or closure variable, and those of the
    device functions it names (also held in tuples), read and written."""
    found: list[tuple[GlobalRef, str]] = []
    seen: set[int] = set()

    def visit(fn: Any) -> None:
        func = fn if isinstance(fn, types.FunctionType) else kernel_py_func(fn)
        if id(func) in seen:
            return
        seen.add(id(func))
        code = func.__code__
        names = referenced_names(code)
        named: list[tuple[tuple[str, ...], Any]] = [
            ((name,), func.__globals__.get(name)) for name in names]
        for name, cell in zip(code.co_freevars, func.__closure__ or ()):
            try:
                named.append((("<closure>", name), cell.cell_contents))
            except ValueError:
                continue
        # `module.G` or `obj.G`: the attributes the code names, of what it names (two
        # levels: `pkg.mod.G`)
        for _ in range(2):
            named += [((*path, attr), attrs[attr]) for path, value in named
                      if isinstance(attrs := _attributes(value), dict)
                      for attr in names if attr in attrs]
        seen_paths: set[tuple[str, ...]] = set()
        for path, value in named:
            if path in seen_paths:
                continue
            seen_paths.add(path)
            if holds_arrays(value):
                found.append((GlobalRef(weakref.ref(func), path), "rw"))
            for device_function in device_functions_in(value):
                visit(device_function)
    visit(kernel)
    return tuple(found)
