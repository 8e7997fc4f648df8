"""What Numba compiles into a kernel when it compiles it: the Python constants, host NumPy
arrays, classes and Numba types its code (and its device functions') reads through a
global, a closure variable, a parameter default or an attribute of one. A trace records
them at each kernel specialization's first launch, and refuses a graph whose kernels would
be compiled, after the trace, with other values (trace/compiled_in.py)."""
from __future__ import annotations

import enum
import functools
import types
import weakref
from typing import Any

import numpy as np
from numba.core import types as numba_types

from .captured import GlobalRef, _functions_in, _named_values, is_device_array
from .kernels import kernel_py_func, referenced_names

_CONSTANT_TYPES = (bool, int, float, complex, str, bytes, type(None), slice, np.generic,
                   enum.Enum)
# a host array's contents kept to compare, at most: each kernel specialization reading it
# compares it again (200 kernels over one 8 MiB table took 1.5 s with 16 MiB; a GPU
# compile of a kernel holding such a table costs more than that anyway)
_ARRAY_CONTENTS_KEPT = 1 << 20


class HostArrayConstant:
    """A host NumPy array: up to 1 MiB, its bytes (record and string dtypes too, without
    their padding; -0.0 compiles in as itself; an object array by its items' identity) and
    a copy to show; a bigger one by identity."""

    def __init__(self, array: np.ndarray):
        self.array = array
        small = array.nbytes <= _ARRAY_CONTENTS_KEPT
        self.copy = array.copy() if small else None
        self.bytes = _value_bytes(array) if small and array.dtype.names is not None else None

    def same(self, now: Any) -> bool:
        if self.copy is None:
            return now is self.array
        if not (isinstance(now, np.ndarray) and now.dtype == self.copy.dtype
                and now.shape == self.copy.shape):
            return False
        if self.bytes is not None:  # a record dtype: its fields packed
            return _value_bytes(now) == self.bytes
        try:  # (as bytes, vectorized)
            return bool(np.array_equal(np.ascontiguousarray(now).view(np.uint8),
                                       self.copy.view(np.uint8)))
        except (TypeError, ValueError):  # object arrays: their items' identity
            return now.tobytes() == self.copy.tobytes()

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


def compiled_in(value: Any, arrays: dict[int, HostArrayConstant] | None = None) -> Any:
    """A snapshot of what Numba compiles in of a value, to compare later (the value itself
    for a number, string, None, enum member, slice or NumPy scalar); _NOT_COMPILED_IN for
    what it does not compile in (device arrays, functions, modules, other objects).
    `arrays`: the snapshots of host arrays taken before, by id, reused while the array
    still holds what they hold (many kernels reading one table keep one copy)."""
    if isinstance(value, _CONSTANT_TYPES):
        return value
    if isinstance(value, tuple):
        items = tuple(compiled_in(v, arrays) for v in value)
        return _NOT_COMPILED_IN if any(i is _NOT_COMPILED_IN for i in items) \
            else TupleConstant(value, items)
    if isinstance(value, np.ndarray) and not is_device_array(value):
        if arrays is None:
            return HostArrayConstant(value)
        taken = arrays.get(id(value))
        if taken is None or taken.array is not value or not taken.same(value):
            taken = arrays[id(value)] = HostArrayConstant(value)
        return taken
    if isinstance(value, (numba_types.Type, np.dtype)):
        return EqualValue(value)
    if isinstance(value, (type, np.ufunc, types.BuiltinFunctionType)):
        return SameObject(value)
    return _NOT_COMPILED_IN


def compiled_in_values(kernel: Any, arrays: dict[int, HostArrayConstant] | None = None
                       ) -> tuple[tuple[GlobalRef, Any], ...]:
    """(GlobalRef, compiled_in snapshot) of each value Numba compiles into a kernel that
    it, and the device functions it names, read by a name path the code loads: a global
    (`S`, `cfg.SCALE`: not a name the code reads only as an attribute of something else), a
    closure variable or a parameter's default, and the attributes read on it; where such a
    path is stored, passed or indexed (`c = cfg.sub`, `dev(cfg)`), any attribute named in
    the kernel's or its device functions' code (nested functions' too) below it."""
    functions: list[types.FunctionType] = []
    seen: set[int] = set()

    def reach(fn: Any) -> None:
        func = fn if isinstance(fn, types.FunctionType) else kernel_py_func(fn)
        if id(func) in seen or not isinstance(func, types.FunctionType):
            return
        seen.add(id(func))
        functions.append(func)
        for _, value in _named_values(func):
            for function in _functions_in(value):
                reach(function)
    reach(kernel)
    names = frozenset().union(*(referenced_names(f.__code__) for f in functions))
    out: list[tuple[GlobalRef, Any]] = []
    for func in functions:
        read, escaped = loaded_paths(func.__code__)
        for path, value in _named_values(func, names):
            if path in read or any(path[:k] in escaped and all(a in names for a in path[k:])
                                   for k in range(1, len(path) + 1)):
                snapshot = compiled_in(value, arrays)
                if snapshot is not _NOT_COMPILED_IN:
                    out.append((GlobalRef(weakref.ref(func), path), snapshot))
    return tuple(out)


@functools.lru_cache(maxsize=1024)
def loaded_paths(code: types.CodeType) -> tuple[frozenset[tuple[str, ...]],
                                                frozenset[tuple[str, ...]]]:
    """(the name paths a function's code, and the code nested in it, reads, the paths it
    uses otherwise), in GlobalRef's form. Read: a global and the attributes read on it in a
    row (`cfg.sub.X`: ("cfg",), ("cfg", "sub"), ("cfg", "sub", "X")), the same from a
    closure variable ("<closure>", name, ...) and from a parameter ("<default>", name,
    ...). Used otherwise: each whole chain (stored to a local, passed, indexed or returned:
    `c = cfg.sub; c.X`, `dev(cfg)`): any attribute named may be read below it. The chains
    come from contract/chains.py, which reads every supported Python's bytecode."""
    from ..contract.chains import CLOSURE, GLOBAL, names_of  # (contract imports _numba)
    paths: set[tuple[str, ...]] = set()
    escaped: set[tuple[str, ...]] = set()
    for chain in names_of(code, code.co_varnames, bare_parameters=True).loaded:
        head = (chain.name,) if chain.root == GLOBAL else \
            ("<closure>", chain.name) if chain.root == CLOSURE else ("<default>", chain.name)
        full = (*head, *chain.attributes)
        escaped.add(full)
        paths.update(full[:k] for k in range(len(head), len(full) + 1))
    return frozenset(paths), frozenset(escaped)


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
