"""What a graph depends on in the Python state its function reads by name, and how each
is checked on a call (trace/guards.py finds them): a captured or held array (Guard), a
Python value (ValueGuard), a launched kernel (KernelGuard), a container's length, keys or
items (ShapeGuard), a host array's contents (ContentsGuard) or layout (LayoutGuard), an
object's type (TypeGuard) or an attribute's absence (AbsentGuard)."""
from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..pytree import container_shape, same_layout
from ..signature import arguments
from ..signature.call import static_key
from .paths import HostRef, function_of
from .values import GONE, is_value


@dataclass(frozen=True)
class Guard:
    """One captured array and a path that found it; holds it while the graph does."""
    ref: HostRef
    array: Any
    info: arguments.ArrayInfo
    # as KernelGuard's, where the array's metadata can never change (the very object is
    # then the same memory and layout): a direct replay checks it itself
    check: tuple | None = None

    def holds(self, fn: Callable, leaves: list, code_fn: Any = None) -> bool:
        """Does the path still find this array over the same memory? (An object whose
        storage can change in place, a torch Parameter, is described again.)"""
        now = self.ref.resolve(fn, leaves, code_fn)
        if now is self.array and arguments.has_fixed_metadata(now):
            return True
        try:
            info = arguments.describe(now) if now is not GONE else None
        except Exception:  # a path that now finds something odd: not the array
            return False
        return info is not None and (info.ptr, info.shape, info.strides, info.dtype,
                                     info.placement) == \
            (self.info.ptr, self.info.shape, self.info.strides, self.info.dtype,
             self.info.placement)


@dataclass(frozen=True)
class ValueGuard:
    """A Python value the code names (a global `IDX`, `self.mode`) that may pick which
    captured array a kernel gets (`WL[IDX]`): the graph holds while it is the same."""
    ref: HostRef
    key: tuple
    check: tuple | None = None  # as KernelGuard's (trace.paths.fast_check)

    @property
    def array(self) -> Any:
        return GONE

    def holds(self, fn: Callable, leaves: list, code_fn: Any = None) -> bool:
        try:  # (a value whose `==` raises: another value)
            now = self.ref.resolve(fn, leaves, code_fn)
            # (the very value it was traced with: it keys the same, being immutable)
            return (self.check is not None and now is self.check[4]) or \
                bool(value_key(now) == self.key)
        except Exception:
            return False


@dataclass(frozen=True)
class ShapeGuard:
    """A list or dict the code names (`for g in LAYERS`, `if "wd" in OPT`): the launches a
    trace records follow its length or keys, so the graph holds while they are the same."""
    ref: HostRef
    shape: Any
    check: tuple | None = None  # as KernelGuard's (trace.paths.fast_check, shape=True)
    values: bool = False  # the shape holds the items (a few numbers the code walks)

    @property
    def array(self) -> Any:
        return GONE

    def holds(self, fn: Callable, leaves: list, code_fn: Any = None) -> bool:
        try:  # (keys whose `==` gives an array or raises: another shape)
            return bool(shape_key(self.ref.resolve(fn, leaves, code_fn), self.values) == self.shape)
        except Exception:
            return False


def value_key(value: Any) -> Any:
    """A Python value as a signature keys it; a tuple item by item (so (0.0,) and (-0.0,),
    (3.0,) and (float32(3.0),) differ, as the scalars do)."""
    if type(value) is tuple:
        return ("tuple", tuple(static_key(v) for v in value))
    return static_key(value)


def shape_key(value: Any, values: bool) -> Any:
    """What a ShapeGuard compares: a container's shape, its keys and items each keyed by
    type and value as a signature keys a scalar (0.0 and -0.0, 3.0 and float32(3.0) and a
    new NaN are told apart or not as there); None where that raises (a tensor key)."""
    try:
        if values:
            keys = [static_key(v) for v in value]
            return frozenset(keys) if isinstance(value, (set, frozenset)) else tuple(keys)
        shape = container_shape(value)
        return tuple(static_key(k) for k in shape) if isinstance(shape, tuple) else shape
    except Exception:
        return None


@dataclass(frozen=True)
class KernelGuard:
    """A kernel the function launched and a name its code uses that found it (`step`,
    `self.kernel`): rebinding the name (a notebook cell run again) launches the new kernel
    eagerly, so the graph holds while the name finds the same kernel object."""
    ref: HostRef
    kernel: Any
    # what a direct replay checks itself (trace.paths.fast_check)
    check: tuple | None = None

    @property
    def array(self) -> Any:
        return GONE

    def holds(self, fn: Callable, leaves: list, code_fn: Any = None) -> bool:
        return self.ref.resolve(fn, leaves, code_fn) is self.kernel


@dataclass(frozen=True)
class LayoutGuard:
    """A host array the code reads only for its layout (`len(H)`, `H.shape`): the graph
    holds while the path finds that very array, of the same shape, strides and dtype (a
    staging buffer refilled in place keeps it; `H.shape = ...` in place does not)."""
    ref: HostRef
    layout: tuple  # pytree.layout at trace time
    check: tuple | None = None  # as KernelGuard's (trace.paths.fast_check, shape=3)

    @property
    def array(self) -> Any:
        return GONE

    def holds(self, fn: Callable, leaves: list, code_fn: Any = None) -> bool:
        return same_layout(self.ref.resolve(fn, leaves, code_fn), self.layout)


@dataclass(frozen=True)
class TypeGuard:
    """An object the code names that is none of the above (`self.norm`, a hook, a
    config): code may branch on it (`isinstance(self.norm, LayerNorm)`, `self.norm is
    None`, `DISPATCH[type(self.layer)]`), so the graph holds while the path finds an
    object of the very type."""
    ref: HostRef
    cls: type
    check: tuple | None = None  # as KernelGuard's (trace.paths.fast_check, shape=4)

    @property
    def array(self) -> Any:
        return GONE

    def holds(self, fn: Callable, leaves: list, code_fn: Any = None) -> bool:
        now = self.ref.resolve(fn, leaves, code_fn)
        if type(now) in weakref.ProxyTypes:  # (what isinstance sees: the referent's)
            try:
                return now.__class__ is self.cls
            except ReferenceError:
                return False
        return now is not GONE and type(now) is self.cls


@dataclass(frozen=True)
class AbsentGuard:
    """An attribute the code names by a string that the object lacked (`hasattr(self,
    "bias")`, `getattr(opt, "extra", None)`): the graph holds while it is still absent."""
    ref: HostRef
    check: tuple | None = None  # as KernelGuard's (trace.paths.fast_check, shape=5)

    @property
    def array(self) -> Any:
        return GONE

    def holds(self, fn: Callable, leaves: list, code_fn: Any = None) -> bool:
        return self.ref.resolve(fn, leaves, code_fn) is GONE


@dataclass(frozen=True)
class ContentsGuard:
    """A host NumPy array the code names and the graph neither copies nor writes (`COEF`
    in `scale[g, b](x, COEF[0])`): what the trace read of it is baked into the graph, so
    it holds while the path finds an array of the same contents (past _CONTENTS bytes: the
    same memory, in-place changes unseen)."""
    ref: HostRef
    key: tuple

    @property
    def array(self) -> Any:
        return GONE

    def holds(self, fn: Callable, leaves: list, code_fn: Any = None) -> bool:
        try:
            return bool(contents_key(self.ref.resolve(fn, leaves, code_fn)) == self.key)
        except Exception:
            return False


_CONTENTS = 1 << 16


def contents_key(value: Any) -> tuple | None:
    """A host array's dtype, shape and bytes (its memory past _CONTENTS bytes)."""
    if not isinstance(value, np.ndarray):
        return None
    if value.nbytes > _CONTENTS:
        return ("memory", _memory(value))
    return ("contents", value.dtype.str, value.shape, np.ascontiguousarray(value).tobytes())


VARIANTS = 3      # graphs kept per signature for what captured arrays' names find now


def stale_guard(program: Any, fn: Callable, leaves: list) -> Any:
    """The first guard of `program` whose path finds another array now (None: none)."""
    code_fn = function_of(fn)
    return next((g for g in program.guards if not g.holds(fn, leaves, code_fn)), None)


def guarded_now(program: Any, fn: Callable, leaves: list) -> tuple:
    """What each guard's path finds now (a value, or an array's memory and layout, so a
    fresh view over the same memory is the same): the key of the graph for them."""
    return tuple(_value_key(g.ref.resolve(fn, leaves)) if isinstance(g, ValueGuard) else
                 _found(g.ref, fn, leaves) if isinstance(g, KernelGuard) else
                 ("shape", shape_key(g.ref.resolve(fn, leaves), g.values))
                 if isinstance(g, ShapeGuard) else
                 contents_key(g.ref.resolve(fn, leaves)) if isinstance(g, ContentsGuard) else
                 ("type", _Same(_class_of(g.ref.resolve(fn, leaves))))
                 if isinstance(g, TypeGuard) else
                 ("absent", g.ref.resolve(fn, leaves) is GONE)
                 if isinstance(g, AbsentGuard) else
                 _memory(g.ref.resolve(fn, leaves)) for g in program.guards)


def _class_of(value: Any) -> Any:
    """What a TypeGuard compares: the type, or a weakref proxy's referent's class."""
    if type(value) in weakref.ProxyTypes:
        try:
            return value.__class__
        except ReferenceError:
            return None
    return type(value)


class _Same:
    """An object in a key, equal only to itself (held: its id is not reused meanwhile)."""
    __slots__ = ("obj",)

    def __init__(self, obj: Any):
        self.obj = obj

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Same) and other.obj is self.obj

    def __hash__(self) -> int:
        return id(self.obj)


def _found(ref: HostRef, fn: Callable, leaves: list) -> tuple:
    """What a kernel's or function's path finds now, as a key; where it finds nothing, the
    object its longest prefix finds (two different mocks patched in for a method, whose
    `.__func__` finds nothing, are two keys)."""
    for k in range(len(ref.steps), -1, -1):
        now = HostRef(ref.root, ref.steps[:k]).resolve(fn, leaves)
        if now is not GONE:
            return ("kernel", k, _Same(now))
    return ("kernel",)


def _value_key(value: Any) -> Any:
    """A selector's value as a key (it may find an object now: `OVERRIDE = array`)."""
    return value_key(value) if is_value(value) else \
        ("object", _memory(value) or id(value))


def _memory(value: Any) -> tuple | None:
    try:
        info = arguments.describe(value) if value is not GONE else None
    except Exception:
        return None
    return None if info is None else (info.ptr, info.shape, info.strides, str(info.dtype))
