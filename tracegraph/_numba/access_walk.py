"""The walk over a function's untyped Numba IR behind `access.py`: which parameters and
captured arrays are stored to, read, or escape into calls."""
from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from .access import KernelAccess, infer_launch
from .callees import (
    INTRINSIC,
    bind_call,
    followed_function,
    is_intrinsic_module,
    param_default,
)
from .captured import (
    GlobalRef,
    device_functions_in,
    holds_arrays,
    is_device_array,
    unknown_globals,
)

_META_ATTRS = frozenset({"shape", "size", "ndim", "dtype", "strides", "itemsize", "nbytes",
                         "layout"})
_UNKNOWN = (None, ())  # what a variable that is not (only) one known global holds


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


class AccessWalk:
    """Walks untyped Numba IR to a fixed point.

    A source is a parameter index or a ("global", key) pair; aliases map a variable to
    the sources it may view, with their remaining rank (-1: unknown, maybe an array;
    0: an element of a record array, through which fields are written). `values` maps a
    variable to the one Python value it holds (a global, an attribute of one, a default)
    and the path it was found by; a variable assigned anything else, or two different
    values, holds `_UNKNOWN`.
    """

    def __init__(self, func: Callable, ndims: tuple[int | None, ...], records: frozenset[int],
                 active: frozenset):
        from numba.core.compiler import run_frontend
        self.func = func
        self.active = active | {func}
        self.fir = run_frontend(func)
        self.nparams = len(self.fir.arg_names)
        self.passed = len(ndims)  # parameters past these take their defaults
        self.ndims = tuple(ndims[:self.nparams]) + (None,) * max(0, self.nparams - len(ndims))
        self.records: set[Any] = set(records)
        self.reads: set[Any] = set()
        self.writes: set[Any] = set()
        self.stored: set[Any] = set()
        self.alias: dict[str, set[tuple[Any, int]]] = {}
        self.slices: set[str] = set()          # vars holding a slice object
        self.index_rank: dict[str, int] = {}   # tuple-index vars: how many dims they consume
        self.methods: dict[str, set[Any]] = {}  # vars holding a bound method of an array
        self.values: dict[str, tuple[Any, tuple[str, ...]]] = {}  # var -> (value, path)
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
                len(self.slices), len(self.index_rank), len(self.values),
                sum(v is _UNKNOWN for v in self.values.values()), int(self.calls_unknown))

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

    def _hand_back(self, target: str, var: Any) -> None:
        """A call may hand back a view of what it was given."""
        self.alias.setdefault(target, set()).update(
            (p, -1) for p, _ in self.alias.get(var.name, ()))

    def _value(self, var: Any) -> Any:
        return self.values.get(var.name, _UNKNOWN)[0]

    def _bind(self, target: str, value: Any, path: tuple[str, ...]) -> None:
        """`target` holds `value`; one that held another value before holds either."""
        now = self.values.get(target)
        if now is None:
            self.values[target] = (value, path)
        elif now is not _UNKNOWN and now[0] is not value:
            self.values[target] = _UNKNOWN

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
        self._bind(target, value, path)
        if not holds_arrays(value):
            return
        if not path:  # an array found where no name leads back to it: nothing to order by
            self._unknown_callee(target)
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
        if isinstance(value, ir.Global):
            self._global(target, value.value, (value.name,))
        elif isinstance(value, ir.FreeVar):
            self._global(target, value.value, ("<closure>", value.name))
        elif isinstance(value, ir.Arg) and value.index >= self.passed:
            found, path = param_default(self.func, value.index)
            self._global(target, found, path)
        elif isinstance(value, ir.Var):
            self.alias.setdefault(target, set()).update(self.alias.get(value.name, ()))
            if self.methods.get(value.name):
                self.methods.setdefault(target, set()).update(self.methods[value.name])
            if value.name in self.slices:
                self.slices.add(target)
            found = self.values.get(value.name, _UNKNOWN)
            if found is _UNKNOWN:
                self.values[target] = _UNKNOWN
            else:
                self._bind(target, *found)
            return
        else:
            if not (isinstance(value, ir.Expr) and value.op == "getattr"):
                self.values[target] = _UNKNOWN  # _getattr binds what it finds
            if isinstance(value, ir.Arg):
                rank = self.ndims[value.index] if value.index < self.nparams else None
                if rank is not None:
                    self.alias.setdefault(target, set()).add((value.index, rank))
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
        elif op == "getattr":
            self._getattr(target, e)
        elif op == "call":
            self._call(target, e)
        elif op == "build_tuple":
            ranks = 0
            for item in e.items:
                self._hand_back(target, item)
                if item.name in self.slices:
                    continue
                used = self.index_rank.get(item.name, 1)
                ranks = -1 if used < 0 or ranks < 0 else ranks + used
            self.index_rank[target] = ranks
        elif op in ("exhaust_iter", "getiter", "iternext", "pair_first"):
            self._read(e.value)
            self._hand_back(target, e.value)
        elif op == "make_function":
            # a function defined in the kernel: what it closes over, it may read or store
            # to when called (calling it is an unknown call)
            for var in e.list_vars():
                self._escape(var)
                self._hand_back(target, var)
        else:
            # arithmetic, casts, tuple concatenation (`f(a, *t)` builds one): what comes
            # out may hold what went in
            for var in e.list_vars():
                self._read(var)
                self._hand_back(target, var)

    def _getattr(self, target: str, e: Any) -> None:
        base, attr = e.value.name, e.attr
        value, path = self.values.get(base, _UNKNOWN)
        if value is not None and not holds_arrays(value):
            # an attribute of a module, class, object or namedtuple the code names
            found = getattr(value, attr, None)
            if found is None and (value is INTRINSIC or is_intrinsic_module(value)):
                found = INTRINSIC
            self._global(target, found, (*path, attr) if path else ())
            return
        self.values[target] = _UNKNOWN
        if isinstance(value, tuple) and not holds_arrays(member := getattr(value, attr, None)):
            # a function or number of a namedtuple of arrays (below: an array of it, which
            # counts as the whole tuple: Numba compiles all of its arrays into the kernel)
            self._bind(target, member, ())
            return
        ranks = {rank for _, rank in self.alias.get(base, ())}
        known_arrays = bool(ranks) and min(ranks) > 0
        if known_arrays and attr in _META_ATTRS:
            return
        if known_arrays and attr in ("T", "real", "imag"):  # views of the same rank
            self.alias.setdefault(target, set()).update(self.alias.get(base, ()))
        elif 0 in ranks:
            # a field of a record element: a value, or an array field stores can go into
            for p, _ in self.alias.get(base, ()):
                self.reads.add(p)
                self.alias.setdefault(target, set()).add((p, -1))
        elif ranks:
            # a method, a view (a.flat, ...) that stores can go through, a field of a
            # namedtuple: all of them
            sources = self._sources(e.value)
            self.methods.setdefault(target, set()).update(sources)
            self.alias.setdefault(target, set()).update((p, -1) for p in sources)

    def _call(self, target: str, e: Any) -> None:
        fn = self._value(e.func)
        if fn is slice:
            self.slices.add(target)
            return
        if fn is len:
            return
        args = list(e.args) + [v for _, v in e.kws]
        if e.vararg is not None:
            args.append(e.vararg)
        if self.methods.get(e.func.name):
            ps = self.methods[e.func.name]
            self.reads.update(ps)
            self.writes.update(ps)
            self.alias.setdefault(target, set()).update((p, -1) for p in ps)
        callee = followed_function(fn)
        if callee is not None and callee not in self.active:
            bound = bind_call(callee, e.args, e.kws, e.vararg)
            if bound is not None:
                self._device_call(target, callee, bound)
                return
        if callee is not None or (fn is None and not self.methods.get(e.func.name)):
            # a callee not followed (a function passed in, FNS[0], f(*t), recursion): it
            # may be any function this code or its callers can reach
            self._unknown_callee(target)
        self._escape_args(target, args)

    def _escape_args(self, target: str, args: list) -> None:
        for a in args:
            # a device function handed to the callee may be called by it
            for device_function in device_functions_in(self._value(a)):
                self._escape_globals_of(device_function, target)
            self._escape(a)
            self._hand_back(target, a)

    def _device_call(self, target: str, callee: Callable, args: list) -> None:
        """See through a device function (or register_jitable helper): map its parameters'
        accesses back to ours, and take over the captured arrays it names. `args` is one
        variable per parameter it is given, None where it takes its default."""
        ranks: list[int | None] = []
        records = set()
        for k, a in enumerate(args):
            known = [r for _, r in self.alias.get(a.name, ())] if a is not None else []
            ranks.append(known[0] if len(set(known)) == 1 else (-1 if known else None))
            if a is not None and any(p in self.records for p, _ in self.alias.get(a.name, ())):
                records.add(k)
        given = [a for a in args if a is not None]
        for a in given:  # a device function it is handed: it may call it
            for device_function in device_functions_in(self._value(a)):
                self._escape_globals_of(device_function, target)
        try:
            inner = infer_launch(callee, tuple(ranks), frozenset(records), self.active)
        except Exception:
            self._unknown_callee(target)
            self._escape_args(target, given)
            return
        if inner.calls_unknown:
            # what it calls may be a device function handed down from here or above: any
            # array this function (and so, going up, the kernel) can reach
            self._unknown_callee(target)
        for k, (a, mode) in enumerate(zip(args, inner.params)):
            if a is None:
                continue
            ps = self._sources(a)
            if "r" in mode:
                self.reads.update(ps)
            if "w" in mode:
                self.writes.update(ps)
            if k in inner.stored:
                self.stored.update(ps)
            self._hand_back(target, a)
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
        """A function we could not follow: every array it (or a function it names)
        captures may be read, written, and handed back."""
        for ref, _ in unknown_globals(fn):
            key = ("global", id(ref.func()), ref.path)
            self.refs.setdefault(key, ref)
            self.reads.add(key)
            self.writes.add(key)
            self.alias.setdefault(target, set()).add((key, -1))
