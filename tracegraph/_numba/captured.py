"""The device arrays a kernel's code names as globals or closure variables: Numba captures
them by address, so they are memory the kernel can touch like its parameters."""
from __future__ import annotations

import types
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..ir import same_binding  # noqa: F401 - re-exported for the _numba package
from .kernels import is_device_function, kernel_py_func, referenced_names

_MAX_ATTRIBUTE_DEPTH = 8  # `a.b.c...`: deeper paths than any package's


@dataclass(frozen=True)
class GlobalRef:
    """A device array a kernel names by a global or closure variable (or a parameter's
    default): found again from the function's namespace at every trace, so a rebound name
    is followed."""
    func: Any                 # a weak reference to the Python function whose namespace holds it
    path: tuple[str, ...]     # ("name", "attr", ...), ("<closure>", name, "attr", ...) or
    #                           ("<default>", parameter, "attr", ...)

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
        elif head == "<default>":
            value, rest = _default(func, rest[0]), rest[1:]
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
        if self.path[0] == "<default>":
            return (id(func), self.path)
        return (id(func.__globals__), self.path)

    def short(self) -> str:
        """The name as the code writes it (W, cfg.w), for naming the buffer."""
        if self.path[0] == "<default>":
            return f"default of {'.'.join(self.path[1:])}"
        return ".".join(self.path[1:] if self.path[0] == "<closure>" else self.path)

    def describe(self) -> str:
        func = self.func()
        where = getattr(func, "__name__", "?")
        if self.path[0] == "<default>":
            return f"the default of parameter {'.'.join(self.path[1:])} (of {where})"
        path = self.path[1:] if self.path[0] == "<closure>" else self.path
        return f"{'.'.join(path)} (named in {where})"


def _default(func: Any, name: str) -> Any:
    code = func.__code__
    return parameter_default(func, code.co_varnames[:code.co_argcount].index(name))[0]


def parameter_default(func: Any, index: int) -> tuple[Any, tuple[str, ...]]:
    """(the default value of parameter `index`, the path GlobalRef finds it by); (None, ())
    where it has none."""
    code = func.__code__
    names = code.co_varnames[:code.co_argcount]
    defaults = func.__defaults__ or ()
    first = len(names) - len(defaults)
    if index >= len(names) or index < first:
        return None, ()
    return defaults[index - first], ("<default>", names[index])


def is_device_array(value: Any) -> bool:
    """Numba device arrays and anything exposing the CUDA Array Interface, also as an
    instance attribute (captured by address); NumPy globals are compile-time constants."""
    from .devicearrays import is_simulated_device_array
    if hasattr(type(value), "__cuda_array_interface__") or is_simulated_device_array(value):
        return True
    if isinstance(value, (types.ModuleType, type, types.FunctionType, int, float, str)):
        return False
    try:
        interface = getattr(value, "__cuda_array_interface__", None)
    except Exception:  # a property that raises: not an array
        return False
    return isinstance(interface, dict) and {"data", "shape", "typestr"} <= interface.keys()


def holds_arrays(value: Any) -> bool:
    if is_device_array(value):
        return True
    return isinstance(value, tuple) and any(holds_arrays(v) for v in value)


def holds_functions(value: Any) -> bool:
    """A device function or register_jitable helper, or a tuple holding one."""
    return bool(_functions_in(value))


def _attributes(value: Any) -> Mapping | None:
    """The attributes of a module, class or plain object (not of a function or array)."""
    if isinstance(value, (types.ModuleType, type)) or not callable(value):
        attrs = getattr(value, "__dict__", None)
        return attrs if isinstance(attrs, Mapping) else None
    return None


def device_functions_in(value: Any) -> list[Any]:
    """The device functions a value is or holds (a tuple of them, at any depth)."""
    if is_device_function(value):
        return [value]
    if isinstance(value, tuple):
        return [f for v in value for f in device_functions_in(v)]
    return []


def _functions_in(value: Any) -> list[Any]:
    """The functions a kernel may call through a value: device functions, and the plain
    Python functions register_jitable makes callable."""
    from .callees import followed_function, overloads_of
    if isinstance(value, tuple):
        return [f for v in value for f in _functions_in(v)]
    func = followed_function(value)
    return [func, *overloads_of(func)] if func is not None else []


def _named_values(func: Any, more_names: frozenset[str] = frozenset()
                  ) -> list[tuple[tuple[str, ...], Any]]:
    """(path, value) of what a function's code can name: its globals, closure variables and
    parameters' defaults, and their attributes the code (or `more_names`) names, to any
    depth."""
    code = func.__code__
    names = referenced_names(code) | more_names
    named: list[tuple[tuple[str, ...], Any]] = [
        ((name,), func.__globals__[name]) for name in names if name in func.__globals__]
    for name, cell in zip(code.co_freevars, func.__closure__ or ()):
        try:
            named.append((("<closure>", name), cell.cell_contents))
        except ValueError:
            continue
    params = code.co_varnames[:code.co_argcount]
    for name, value in zip(params[len(params) - len(func.__defaults__ or ()):],
                           func.__defaults__ or ()):
        named.append((("<default>", name), value))
    level = named
    for _ in range(_MAX_ATTRIBUTE_DEPTH):  # `module.G`, `obj.G`, `pkg.sub.mod.G`
        level = [((*path, attr), attrs[attr]) for path, value in level
                 if isinstance(attrs := _attributes(value), Mapping)
                 for attr in names if attr in attrs]
        if not level:
            break
        named += level
    return named


def unknown_globals(kernel: Any) -> Found:
    """For a kernel (or device function, or its Python function) whose IR could not be
    followed: every array its code names as a global or closure variable, and those of the
    functions it names (also held in tuples, as attributes or as defaults), read and
    written."""
    return reach(kernel)[0]


Found = tuple[tuple[GlobalRef, str], ...]
Bindings = tuple[tuple[GlobalRef, Any], ...]


def reach(kernel: Any) -> tuple[Found, Bindings]:
    """(unknown_globals(kernel), (GlobalRef, value) of each name holding a function on the
    way: rebinding one changes what the kernel reaches)."""
    found: list[tuple[GlobalRef, str]] = []
    bindings: list[tuple[GlobalRef, Any]] = []
    seen: set[int] = set()

    def visit(fn: Any) -> None:
        func = fn if isinstance(fn, types.FunctionType) else kernel_py_func(fn)
        if id(func) in seen:
            return
        seen.add(id(func))
        seen_paths: set[tuple[str, ...]] = set()
        for path, value in _named_values(func):
            if path in seen_paths:
                continue
            seen_paths.add(path)
            if holds_arrays(value):
                found.append((GlobalRef(weakref.ref(func), path), "rw"))
            functions = _functions_in(value)
            if functions:
                bindings.append((GlobalRef(weakref.ref(func), path), value))
            for function in functions:
                visit(function)
    visit(kernel)
    return tuple(found), tuple(bindings)
