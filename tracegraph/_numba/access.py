"""Read/write inference from a kernel's untyped Numba IR.

Every array a kernel can reach is accounted for: its parameters (also through `*args`,
tuples, views and record elements) and the device arrays its code names as globals or
closure variables (Numba captures those by address), in the kernel and in the device
functions it calls. Whatever the analysis cannot follow is read and written.
"""
from __future__ import annotations

import inspect
import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .captured import (
    GlobalRef,
    device_functions_in,
    holds_arrays,
    is_device_array,
    unknown_globals,
)
from .kernels import is_device_function, kernel_py_func

_META_ATTRS = frozenset({"shape", "size", "ndim", "dtype", "strides", "itemsize", "nbytes",
                         "layout"})
_NO_ACCESS_GLOBALS = frozenset({len})


class _Intrinsic:
    """What `cuda.grid`, `cuda.atomic.add`... are to the analysis where Numba's simulator
    mode leaves them off the module (the simulator supplies them only while a kernel
    runs): known functions that touch only their arguments, as on a GPU, not unknown
    callees (which would count every captured array and hide gaps the GPU would show)."""


_INTRINSIC = _Intrinsic()
_inference_cache: weakref.WeakKeyDictionary[Callable, dict] = weakref.WeakKeyDictionary()
_inference_lock = threading.Lock()


@dataclass(frozen=True)
class KernelAccess:
    """What one launch of a kernel can touch.

    params:  per launch argument, "" (untouched), "r", "w" or "rw"
    stored:  arguments the kernel certainly stores to (not only through unseen calls)
    globals: (GlobalRef, mode) for each global or closure variable that may hold arrays
    calls_unknown: it calls a function it was handed (a parameter, a tuple member), which
             may be any device function its callers can reach: they count what those
             capture
    """
    params: tuple[str, ...]
    stored: frozenset[int]
    globals: tuple[tuple[GlobalRef, str], ...]
    calls_unknown: bool = False


def infer_param_access(kernel: Any, ndims: tuple[int | None, ...]) -> tuple[str, ...]:
    """For each argument: "" (untouched), "r", "w" or "rw" (see infer_kernel_access)."""
    return infer_kernel_access(kernel, ndims).params


def infer_kernel_access(kernel: Any, ndims: tuple[int | None, ...],
                        records: frozenset[int] = frozenset()) -> KernelAccess:
    """What a launch with arguments of these ranks can touch, from the kernel's Numba IR.

    `ndims[i]` is the array rank of argument i, -1 for a tuple (its members share one
    answer), None for a scalar; `records` the arguments whose dtype is a record. A
    parameter passed to a call the analysis cannot see through counts as read and
    written.
    """
    func = kernel_py_func(kernel)
    key = (ndims, records)
    with _inference_lock:
        per_func = _inference_cache.setdefault(func, {})
        if key not in per_func:
            per_func[key] = _infer_launch(func, ndims, records, frozenset())
        return per_func[key]


def _infer_launch(func: Callable, ndims: tuple[int | None, ...], records: frozenset[int],
                  active: frozenset) -> KernelAccess:
    """Map a launch's arguments onto the function's parameters (`*args` collects the rest
    as one tuple), infer, and map the answer back per argument."""
    code = func.__code__
    nfixed = code.co_argcount
    if not code.co_flags & inspect.CO_VARARGS or len(ndims) <= nfixed:
        return _infer(func, ndims, records, active)
    rest = ndims[nfixed:]
    star = -1 if any(r is not None for r in rest) else None
    inner = _infer(func, (*ndims[:nfixed], star),
                   frozenset(r for r in records if r < nfixed), active)
    star_mode = inner.params[nfixed] if len(inner.params) > nfixed else "rw"
    params = inner.params[:nfixed] + tuple(star_mode if r is not None else "" for r in rest)
    stored = {p for p in inner.stored if p < nfixed}
    if nfixed in inner.stored:
        stored.update(i for i, r in enumerate(ndims) if i >= nfixed and r is not None)
    return KernelAccess(params, frozenset(stored), inner.globals, inner.calls_unknown)


def _infer(func: Callable, ndims: tuple[int | None, ...], records: frozenset[int],
           active: frozenset) -> KernelAccess:
    return _AccessInference(func, ndims, records, active).run()


def _constant_index_rank(index: Any) -> int:
    """Dimensions a constant index takes away: -1 when not known from the index alone."""
    if isinstance(index, slice):
        return 0
    if index is Ellipsis or index is None or isinstance(index, bool):
        return -1
    if isinstance(index, tuple):
        ranks = [_constant_index_rank(i) for i in index]
        return -1 if any(r < 0 for r in ranks) else sum(ranks)
    return 1


def _cuda_module() -> Any:
    from numba import cuda
    return cuda


class _AccessInference:
    """Walks untyped Numba IR: which parameters and captured arrays are stored to, read,
    or escape into calls.

    A source is a parameter index or a ("global", key) pair; aliases map a variable to
    the sources it may view, with their remaining rank (-1: unknown, maybe an array;
    0: an element of a record array, through which fields are written).
    """

    def __init__(self, func: Callable, ndims: tuple[int | None, ...], records: frozenset[int],
                 active: frozenset):
        from numba.core.compiler import run_frontend
        self.func = func
        self.active = active | {func}
        self.fir = run_frontend(func)
        self.nparams = len(self.fir.arg_names)
        self.ndims = tuple(ndims[:self.nparams]) + (None,) * max(0, self.nparams - len(ndims))
        self.records: set[Any] = set(records)
        self.reads: set[Any] = set()
        self.writes: set[Any] = set()
        self.stored: set[Any] = set()
        self.alias: dict[str, set[tuple[Any, int]]] = {}
        self.slices: set[str] = set()          # vars holding a slice object
        self.index_rank: dict[str, int] = {}   # tuple-index vars: how many dims they consume
        self.methods: dict[str, set[Any]] = {}  # vars holding a bound method of an array
        self.globals: dict[str, tuple[Any, tuple[str, ...]]] = {}  # var -> (value, path)
        self.refs: dict[Any, GlobalRef] = {}   # ("global", key) -> where to find it
        self.calls_unknown = False

    def run(self) -> KernelAccess:
        from numba.core import ir
        stmts = [s for block in self.fir.blocks.values() for s in block.body]
        while True:  # fixed point: loops can use a var before its textual definition; the
            before = self._size()  # sets only grow, so this ends
            for stmt in stmts:
                if isinstance(stmt, ir.Assign):
                    self._assign(stmt.target.name, stmt.value)
                elif isinstance(stmt, (ir.SetItem, ir.StaticSetItem, ir.SetAttr)):
                    self._store(stmt.target)
                    self._read(stmt.value)
                    if isinstance(stmt, ir.SetItem):
                        self._read(stmt.index)
                else:
                    for var in stmt.list_vars():
                        self._read(var)
            if self._size() == before:
                break
        params = tuple(("r" if i in self.reads else "") + ("w" if i in self.writes else "")
                       for i in range(self.nparams))
        found = tuple((ref, ("r" if s in self.reads else "") + ("w" if s in self.writes else ""))
                      for s, ref in self.refs.items() if s in self.reads or s in self.writes)
        stored = frozenset(s for s in self.stored if isinstance(s, int))
        return KernelAccess(params, stored, found, self.calls_unknown)

    def _size(self) -> tuple[int, ...]:
        return (len(self.reads), len(self.writes), len(self.stored),
                sum(map(len, self.alias.values())), sum(map(len, self.methods.values())),
                len(self.slices), len(self.index_rank), len(self.globals))

    def _sources(self, var: Any) -> set[Any]:
        return {p for p, _ in self.alias.get(var.name, ())}

    def _store(self, target: Any) -> None:
        sources = self._sources(target)
        self.writes.update(sources)
        self.stored.update(sources)

    def _read(self, var: Any) -> None:
        if var is not None and hasattr(var, "name"):
            self.reads.update(self._sources(var))
            self.reads.update(self.methods.get(var.name, ()))

    def _escape(self, var: Any) -> None:
        """`var` went somewhere we cannot follow: read and written."""
        sources = self._sources(var)
        self.reads.update(sources)
        self.writes.update(sources)

    def _consumed(self, index: Any) -> int:
        """How many dimensions an index takes away; -1 when that is not known (an
        Ellipsis, None, a boolean or array index)."""
        from numba.core import ir
        if isinstance(index, ir.Var):
            if index.name in self.slices:
                return 0
            return self.index_rank.get(index.name, 1)
        return _constant_index_rank(index)

    def _subview(self, target: str, base: Any, index: Any) -> None:
        used = self._consumed(index)
        out = self.alias.setdefault(target, set())
        for p, rank in self.alias.get(base.name, ()):
            if rank <= 0 or used < 0:
                out.add((p, -1))  # a tuple member, a field of a record element: unknown
                self.reads.add(p)
            elif rank - used > 0:
                out.add((p, rank - used))  # a view: reading it is not reading data
            elif p in self.records:
                out.add((p, 0))  # a record element: read through its fields, stored to too
            else:
                self.reads.add(p)  # an element

    def _constant(self, target: str, value: Any) -> None:
        """A constant used as an index: a slice takes no dimension, others as counted."""
        if isinstance(value, slice):
            self.slices.add(target)
        elif value is Ellipsis or value is None or isinstance(value, (tuple, bool)):
            self.index_rank[target] = _constant_index_rank(value)

    def _global(self, target: str, value: Any, path: tuple[str, ...]) -> None:
        self._constant(target, value)
        self.globals[target] = (value, path)
        if not holds_arrays(value):
            return
        key = ("global", id(self.func), path)
        if key not in self.refs:
            self.refs[key] = GlobalRef(weakref.ref(self.func), path)
        rank = len(getattr(value, "shape", ())) if is_device_array(value) else -1
        if rank > 0 and getattr(getattr(value, "dtype", None), "names", None):
            self.records.add(key)
        self.alias.setdefault(target, set()).add((key, rank if rank > 0 else -1))

    def _assign(self, target: str, value: Any) -> None:
        from numba.core import ir
        if isinstance(value, ir.Arg):
            rank = self.ndims[value.index] if value.index < self.nparams else None
            if rank is not None:
                self.alias.setdefault(target, set()).add((value.index, rank))
        elif isinstance(value, ir.Var):
            self.alias.setdefault(target, set()).update(self.alias.get(value.name, ()))
            self.methods.setdefault(target, set()).update(self.methods.get(value.name, ()))
            if value.name in self.slices:
                self.slices.add(target)
            if value.name in self.globals:
                self.globals[target] = self.globals[value.name]
        elif isinstance(value, ir.Global):
            self._global(target, value.value, (value.name,))
        elif isinstance(value, ir.FreeVar):
            self._global(target, value.value, ("<closure>", value.name))
        elif isinstance(value, ir.Const):
            self._constant(target, value.value)
        elif isinstance(value, ir.Expr):
            self._expr(target, value)

    def _expr(self, target: str, e: Any) -> None:
        op = e.op
        if op in ("getitem", "static_getitem"):
            if op == "getitem":
                self._read(e.index)
            self._subview(target, e.value, e.index)
            if e.value.name in self.globals and type(self.globals[e.value.name][0]) is tuple:
                self.globals[target] = (None, ())  # a member of a global tuple: unknown
        elif op == "getattr":
            self._getattr(target, e)
        elif op == "call":
            self._call(target, e)
        elif op == "build_tuple":
            ranks = 0
            for item in e.items:
                self.alias.setdefault(target, set()).update(
                    (p, -1) for p, _ in self.alias.get(item.name, ()))
                if item.name in self.slices:
                    continue
                used = self.index_rank.get(item.name, 1)
                ranks = -1 if used < 0 or ranks < 0 else ranks + used
            self.index_rank[target] = ranks
        elif op in ("exhaust_iter", "getiter", "iternext", "pair_first"):
            self._read(e.value)
            self.alias.setdefault(target, set()).update(
                (p, -1) for p, _ in self.alias.get(e.value.name, ()))
        else:
            for var in e.list_vars():
                self._read(var)

    def _getattr(self, target: str, e: Any) -> None:
        base = e.value.name
        if e.attr in _META_ATTRS and not any(rank == 0 for _, rank in self.alias.get(base, ())):
            return
        if e.attr in ("T", "real", "imag"):  # views of the same rank
            self.alias.setdefault(target, set()).update(self.alias.get(base, ()))
        elif base in self.globals:
            value, path = self.globals[base]
            found = getattr(value, e.attr, None)
            if found is None and (value is _INTRINSIC or value is _cuda_module()):
                found = _INTRINSIC
            self._global(target, found, (*path, e.attr) if path else ())
        elif any(rank == 0 for _, rank in self.alias.get(base, ())):
            # a field of a record element: a value, or an array field stores can go into
            for p, _ in self.alias.get(base, ()):
                self.reads.add(p)
                self.alias.setdefault(target, set()).add((p, -1))
        elif self._sources(e.value):
            # a method, or a view (a.flat, ...) that stores can go through: both
            self.methods.setdefault(target, set()).update(self._sources(e.value))
            self.alias.setdefault(target, set()).update((p, -1) for p in self._sources(e.value))

    def _call(self, target: str, e: Any) -> None:
        fn = self.globals.get(e.func.name, (None, ()))[0]
        if fn is slice:
            self.slices.add(target)
            return
        if fn in _NO_ACCESS_GLOBALS:
            return
        args = list(e.args) + [v for _, v in e.kws]
        if e.vararg is not None:
            args.append(e.vararg)
        if e.func.name in self.methods:
            ps = self.methods[e.func.name]
            self.reads.update(ps)
            self.writes.update(ps)
            self.alias.setdefault(target, set()).update((p, -1) for p in ps)
        if is_device_function(fn) and not e.kws and e.vararg is None and \
                kernel_py_func(fn) not in self.active:
            self._device_call(target, fn, args)
            return
        if is_device_function(fn):  # f(*args), f(x=...), recursion: not followed
            self._escape_globals_of(fn, target)
        elif fn is None and e.func.name not in self.methods:
            # a callee not known here (a function passed in, FNS[0]): it may be any device
            # function this code or its callers can reach, so anything they capture
            self._unknown_callee(target)
        for a in args:
            # a device function handed to the callee may be called by it
            for device_function in device_functions_in(self.globals.get(a.name, (None,))[0]):
                self._escape_globals_of(device_function, target)
            self._escape(a)
            # a call may hand back a view of what it was given
            self.alias.setdefault(target, set()).update(
                (p, -1) for p, _ in self.alias.get(a.name, ()))

    def _device_call(self, target: str, fn: Any, args: list) -> None:
        """See through a device function: map its parameters' accesses back to ours, and
        take over the captured arrays it names."""
        ranks, records = [], set()
        for k, a in enumerate(args):
            known = [r for _, r in self.alias.get(a.name, ())]
            ranks.append(known[0] if len(set(known)) == 1 else (-1 if known else None))
            if any(p in self.records for p, _ in self.alias.get(a.name, ())):
                records.add(k)
        try:
            inner = _infer_launch(kernel_py_func(fn), tuple(ranks), frozenset(records),
                                  self.active)
        except Exception:
            for a in args:
                self._escape(a)
                self.alias.setdefault(target, set()).update(
                    (p, -1) for p, _ in self.alias.get(a.name, ()))
            self._unknown_callee(target)  # it may call what it was handed, too
            return
        if inner.calls_unknown:
            # what it calls may be a device function handed down from here or above: any
            # array this function (and so, going up, the kernel) can reach
            self._unknown_callee(target)
        for k, (a, mode) in enumerate(zip(args, inner.params)):
            ps = self._sources(a)
            if "r" in mode:
                self.reads.update(ps)
            if "w" in mode:
                self.writes.update(ps)
            if k in inner.stored:
                self.stored.update(ps)
            self.alias.setdefault(target, set()).update(
                (p, -1) for p, _ in self.alias.get(a.name, ()))
        for ref, mode in inner.globals:
            key = ("global", id(ref.func()), ref.path)
            self.refs.setdefault(key, ref)
            if "r" in mode:
                self.reads.add(key)
            if "w" in mode:
                self.writes.add(key)
            # it may hand back a captured array it names (`return G`): stores through
            # the result are stores to it
            self.alias.setdefault(target, set()).add((key, -1))

    def _unknown_callee(self, target: str) -> None:
        self.calls_unknown = True
        self._escape_globals_of(self.func, target)

    def _escape_globals_of(self, fn: Any, target: str) -> None:
        """A device function we could not follow: every array it (or a device function
        it names) captures may be read, written, and handed back."""
        for ref, _ in unknown_globals(fn):
            key = ("global", id(ref.func()), ref.path)
            self.refs.setdefault(key, ref)
            self.reads.add(key)
            self.writes.add(key)
            self.alias.setdefault(target, set()).add((key, -1))

