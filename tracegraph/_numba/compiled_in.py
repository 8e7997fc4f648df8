"""What Numba compiles into a kernel when it compiles it: the Python constants, host NumPy
arrays, classes and Numba types its code (and its device functions') reads through a
global, a closure variable, a parameter default or an attribute of one. A trace records
them at each kernel specialization's first launch, and refuses a graph whose kernels would
be compiled, after the trace, with other values (trace/tracer.py, check_bindings)."""
from __future__ import annotations

import dis
import enum
import functools
import types
import weakref
from typing import Any

import numpy as np
from numba.core import types as numba_types

from .captured import GlobalRef, _functions_in, _named_values, is_device_array
from .kernels import kernel_py_func

_CONSTANT_TYPES = (bool, int, float, complex, str, bytes, type(None), np.generic, enum.Enum)
_ARRAY_CONTENTS_KEPT = 16 << 20  # a host array's contents kept to compare, at most


class HostArrayConstant:
    """A host NumPy array: up to 16 MiB, its bytes (record and string dtypes too, without
    their padding; -0.0 compiles in as itself; an object array by its items' identity) and
    a copy to show; a bigger one by identity."""

    def __init__(self, array: np.ndarray):
        self.array = array
        small = array.nbytes <= _ARRAY_CONTENTS_KEPT
        self.copy = array.copy() if small else None
        self.bytes = _value_bytes(array) if small else None

    def same(self, now: Any) -> bool:
        if self.copy is None:
            return now is self.array
        return (isinstance(now, np.ndarray) and now.dtype == self.copy.dtype
                and now.shape == self.copy.shape and _value_bytes(now) == self.bytes)

    def __repr__(self) -> str:
        shown = self.array if self.copy is None else self.copy
        return f"an array {np.array2string(shown, threshold=8)}"


def _value_bytes(array: np.ndarray) -> bytes:
    """An array's values as bytes; a record dtype's fields packed (a copy of a record
    array leaves its padding bytes as they happen to be)."""
    if array.dtype.names is not None:
        from numpy.lib import recfunctions
        array = recfunctions.repack_fields(array, align=False, recurse=True)
    return array.tobytes()


class SameObject:
    """A class, ufunc or builtin a kernel names (`DT = np.float32`): by identity."""

    def __init__(self, value: Any):
        self.value = value

    def same(self, now: Any) -> bool:
        return now is self.value

    def __repr__(self) -> str:
        return repr(self.value)


class EqualValue(SameObject):
    """A Numba type or NumPy dtype a kernel names (`REAL = numba.float32`): by equality."""

    def same(self, now: Any) -> bool:
        return type(now) is type(self.value) and bool(now == self.value)


class TupleConstant:
    """A tuple of what compiles in, item by item."""

    def __init__(self, value: tuple, items: tuple):
        self.value, self.items = value, items

    def same(self, now: Any) -> bool:
        return (type(now) is type(self.value) and len(now) == len(self.items)
                and all(same_constant(n, i) for n, i in zip(now, self.items)))

    def __repr__(self) -> str:
        return repr(tuple(self.items))


_SNAPSHOTS = (HostArrayConstant, SameObject, TupleConstant)
_NOT_COMPILED_IN = object()


def compiled_in(value: Any) -> Any:
    """A snapshot of what Numba compiles in of a value, to compare later (the value itself
    for a number, string, None, enum member or NumPy scalar); _NOT_COMPILED_IN for what
    it does not compile in (device arrays, functions, modules, other objects)."""
    if isinstance(value, _CONSTANT_TYPES):
        return value
    if isinstance(value, tuple):
        items = tuple(compiled_in(v) for v in value)
        return _NOT_COMPILED_IN if any(i is _NOT_COMPILED_IN for i in items) \
            else TupleConstant(value, items)
    if isinstance(value, np.ndarray) and not is_device_array(value):
        return HostArrayConstant(value)
    if isinstance(value, (numba_types.Type, np.dtype)):
        return EqualValue(value)
    if isinstance(value, (type, np.ufunc, types.BuiltinFunctionType)):
        return SameObject(value)
    return _NOT_COMPILED_IN


def compiled_in_values(kernel: Any) -> tuple[tuple[GlobalRef, Any], ...]:
    """(GlobalRef, compiled_in snapshot) of each value Numba compiles into a kernel that
    it, and the device functions it names, read by a name path the code loads: a global
    (`S`, `cfg.SCALE`: not a name the code reads only as an attribute of something else), a
    closure variable or a parameter's default, and the attributes read on it."""
    out: list[tuple[GlobalRef, Any]] = []
    seen: set[int] = set()

    def visit(fn: Any) -> None:
        func = fn if isinstance(fn, types.FunctionType) else kernel_py_func(fn)
        if id(func) in seen or not isinstance(func, types.FunctionType):
            return
        seen.add(id(func))
        read = loaded_paths(func.__code__)
        for path, value in _named_values(func):
            if path not in read:
                continue
            snapshot = compiled_in(value)
            if snapshot is not _NOT_COMPILED_IN:
                out.append((GlobalRef(weakref.ref(func), path), snapshot))
            for function in _functions_in(value):
                visit(function)
    visit(kernel)
    return tuple(out)


@functools.lru_cache(maxsize=1024)
def loaded_paths(code: types.CodeType) -> frozenset[tuple[str, ...]]:
    """The name paths a function's code (and the code nested in it) reads, in GlobalRef's
    form: a global and the attributes read on it in a row (`cfg.sub.X`: ("cfg",),
    ("cfg", "sub"), ("cfg", "sub", "X")), the same from a closure variable
    ("<closure>", name, ...) and from a parameter ("<default>", name, ...)."""
    paths: set[tuple[str, ...]] = set()
    chain: tuple[str, ...] | None = None
    for ins in dis.get_instructions(code):
        if ins.opname in ("LOAD_GLOBAL", "LOAD_NAME"):
            chain = (ins.argval,)
        elif ins.opname in ("LOAD_DEREF", "LOAD_CLOSURE"):
            chain = ("<closure>", ins.argval)
        elif ins.opname in ("LOAD_FAST", "LOAD_FAST_CHECK"):
            chain = ("<default>", ins.argval)
        elif ins.opname in ("LOAD_ATTR", "LOAD_METHOD") and chain is not None:
            chain = (*chain, ins.argval)
        elif ins.opname not in ("CACHE", "EXTENDED_ARG", "PRECALL", "NOP"):
            chain = None
            continue
        else:
            continue
        paths.add(chain)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            paths |= loaded_paths(const)
    return frozenset(paths)


def same_constant(now: Any, then: Any) -> bool:
    """Does `now` compile in as `then` (a compiled_in snapshot) did? 0.0 and -0.0, 1 and
    True differ; NaN is NaN."""
    if isinstance(then, _SNAPSHOTS):
        return then.same(now)
    return now is then or (type(now) is type(then) and repr(now) == repr(then))


def shown_constant(value: Any) -> str:
    if isinstance(value, np.ndarray):
        return f"an array {np.array2string(value, threshold=8)}"
    return repr(value)


def host_arrays(snapshot: Any) -> list[np.ndarray]:
    """The host arrays a compiled_in snapshot holds (in a tuple too)."""
    if isinstance(snapshot, HostArrayConstant):
        return [snapshot.array]
    if isinstance(snapshot, TupleConstant):
        return [a for item in snapshot.items for a in host_arrays(item)]
    return []
