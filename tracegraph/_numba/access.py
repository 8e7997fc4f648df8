"""Read/write inference from a kernel's untyped Numba IR."""
from __future__ import annotations

import threading
import weakref
from typing import Any, Callable

from .kernels import is_device_function, kernel_py_func

_META_ATTRS = frozenset({"shape", "size", "ndim", "dtype", "strides", "itemsize", "nbytes",
                         "layout"})
_NO_ACCESS_GLOBALS = frozenset({len})
_inference_cache: "weakref.WeakKeyDictionary[Callable, dict]" = weakref.WeakKeyDictionary()
_inference_lock = threading.Lock()


def infer_param_access(kernel: Any, ndims: tuple[int | None, ...]) -> tuple[str, ...]:
    """For each parameter: "" (untouched), "r", "w" or "rw", from the kernel's Numba IR.

    `ndims[i]` is the array rank of argument i, -1 for a tuple (its members share one
    answer), None for a scalar. A parameter passed to a call the analysis cannot see
    through counts as read and written.
    """
    func = kernel_py_func(kernel)
    with _inference_lock:
        per_func = _inference_cache.setdefault(func, {})
        if ndims not in per_func:
            per_func[ndims] = _infer(func, ndims, frozenset())
        return per_func[ndims]


def _infer(func: Callable, ndims: tuple[int | None, ...], active: frozenset) -> tuple[str, ...]:
    return _AccessInference(func, ndims, active).run()


class _AccessInference:
    """Walks untyped Numba IR: which parameters are stored to, read, or escape into calls."""

    def __init__(self, func: Callable, ndims: tuple[int | None, ...], active: frozenset):
        from numba.core.compiler import run_frontend
        self.func = func
        self.active = active | {func}
        self.fir = run_frontend(func)
        self.nparams = len(self.fir.arg_names)
        self.ndims = tuple(ndims[:self.nparams]) + (None,) * max(0, self.nparams - len(ndims))
        self.reads: set[int] = set()
        self.writes: set[int] = set()
        # var name -> {(param, rank)}; rank -1 means "unknown: maybe an array"
        self.alias: dict[str, set[tuple[int, int]]] = {}
        self.slices: set[str] = set()          # vars holding a slice object
        self.index_rank: dict[str, int] = {}   # tuple-index vars: how many dims they consume
        self.methods: dict[str, set[int]] = {}  # vars holding a bound method of an array
        self.globals: dict[str, Any] = {}

    def run(self) -> tuple[str, ...]:
        from numba.core import ir
        stmts = [s for block in self.fir.blocks.values() for s in block.body]
        for _ in range(10):  # fixed point: loops can use a var before its textual definition
            before = self._size()
            for stmt in stmts:
                if isinstance(stmt, ir.Assign):
                    self._assign(stmt.target.name, stmt.value)
                elif isinstance(stmt, (ir.SetItem, ir.StaticSetItem)):
                    self.writes.update(self._params(stmt.target))
                    self._read(stmt.value)
                    if isinstance(stmt, ir.SetItem):
                        self._read(stmt.index)
                else:
                    for var in stmt.list_vars():
                        self._read(var)
            if self._size() == before:
                break
        return tuple(("r" if i in self.reads else "") + ("w" if i in self.writes else "")
                     for i in range(self.nparams))

    def _size(self) -> tuple[int, ...]:
        return (len(self.reads), len(self.writes), sum(map(len, self.alias.values())),
                sum(map(len, self.methods.values())), len(self.slices), len(self.index_rank))

    def _params(self, var: Any) -> set[int]:
        return {p for p, _ in self.alias.get(var.name, ())}

    def _read(self, var: Any) -> None:
        if var is not None and hasattr(var, "name"):
            self.reads.update(self._params(var))
            self.reads.update(self.methods.get(var.name, ()))

    def _escape(self, var: Any) -> None:
        """`var` went somewhere we cannot follow: read and written."""
        ps = self._params(var)
        self.reads.update(ps)
        self.writes.update(ps)

    def _consumed(self, index: Any) -> int:
        from numba.core import ir
        if isinstance(index, ir.Var):
            if index.name in self.slices:
                return 0
            return self.index_rank.get(index.name, 1)
        if isinstance(index, slice):
            return 0
        if isinstance(index, tuple):
            return sum(0 if isinstance(i, slice) else 1 for i in index)
        return 1

    def _subview(self, target: str, base: Any, index: Any) -> None:
        used = self._consumed(index)
        out = self.alias.setdefault(target, set())
        for p, rank in self.alias.get(base.name, ()):
            if rank < 0:
                out.add((p, -1))
                self.reads.add(p)
            elif rank - used > 0:
                out.add((p, rank - used))  # a view: reading it is not reading data
            else:
                self.reads.add(p)  # an element

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
        elif isinstance(value, (ir.Global, ir.FreeVar)):
            self.globals[target] = value.value
        elif isinstance(value, ir.Const):
            if isinstance(value.value, slice):
                self.slices.add(target)
        elif isinstance(value, ir.Expr):
            self._expr(target, value)

    def _expr(self, target: str, e: Any) -> None:
        op = e.op
        if op in ("getitem", "static_getitem"):
            if op == "getitem":
                self._read(e.index)
            self._subview(target, e.value, e.index)
        elif op == "getattr":
            if e.attr in _META_ATTRS:
                return
            if e.attr == "T":
                self.alias.setdefault(target, set()).update(self.alias.get(e.value.name, ()))
            elif e.value.name in self.globals:
                self.globals[target] = getattr(self.globals[e.value.name], e.attr, None)
            elif self._params(e.value):
                self.methods.setdefault(target, set()).update(self._params(e.value))
        elif op == "call":
            self._call(target, e)
        elif op == "build_tuple":
            ranks = 0
            for item in e.items:
                self.alias.setdefault(target, set()).update(
                    (p, -1) for p, _ in self.alias.get(item.name, ()))
                ranks += 0 if item.name in self.slices else 1
            self.index_rank[target] = ranks
        elif op in ("exhaust_iter", "getiter", "iternext", "pair_first"):
            self._read(e.value)
            self.alias.setdefault(target, set()).update(
                (p, -1) for p, _ in self.alias.get(e.value.name, ()))
        else:
            for var in e.list_vars():
                self._read(var)

    def _call(self, target: str, e: Any) -> None:
        fn = self.globals.get(e.func.name)
        if fn is slice:
            self.slices.add(target)
            return
        if fn in _NO_ACCESS_GLOBALS:
            return
        args = list(e.args) + [v for _, v in e.kws]
        if e.func.name in self.methods:
            ps = self.methods[e.func.name]
            self.reads.update(ps)
            self.writes.update(ps)
            self.alias.setdefault(target, set()).update((p, -1) for p in ps)
        if is_device_function(fn) and not e.kws and e.vararg is None and \
                kernel_py_func(fn) not in self.active:
            self._device_call(target, fn, args)
            return
        for a in args:
            self._escape(a)
            # a call may hand back a view of what it was given
            self.alias.setdefault(target, set()).update(
                (p, -1) for p, _ in self.alias.get(a.name, ()))

    def _device_call(self, target: str, fn: Any, args: list) -> None:
        """See through a device function: map its parameters' accesses back to ours."""
        ranks = []
        for a in args:
            known = [r for _, r in self.alias.get(a.name, ())]
            ranks.append(known[0] if len(set(known)) == 1 else (-1 if known else None))
        try:
            inner = _infer(kernel_py_func(fn), tuple(ranks), self.active)
        except Exception:  # noqa: BLE001 - unreadable callee: be conservative
            inner = ("rw",) * len(args)
        for a, mode in zip(args, inner):
            ps = self._params(a)
            if "r" in mode:
                self.reads.update(ps)
            if "w" in mode:
                self.writes.update(ps)
            self.alias.setdefault(target, set()).update(
                (p, -1) for p, _ in self.alias.get(a.name, ()))
