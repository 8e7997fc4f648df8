"""The walk over a function's untyped Numba IR behind `access.py`: which parameters and
captured arrays are stored to, read, or escape into calls."""
from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

from .access import OPAQUE, KernelAccess, infer_launch
from .access_state import META_ATTRS, UNKNOWN, WalkState
from .callees import (
    INTRINSIC,
    TUPLE_RESULTS,
    Intrinsic,
    bind_call,
    followed_function,
    is_intrinsic_module,
    is_pure,
    is_stub,
    is_ufunc,
    method_overloads,
    overloads_of,
)
from .captured import (
    GlobalRef,
    device_functions_in,
    holds_arrays,
    holds_functions,
    is_device_array,
    parameter_default,
)


class AccessWalk(WalkState):
    """Walks the IR's statements to a fixed point (see WalkState for what it tracks)."""

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
        returned = [s.value.name for s in stmts if isinstance(s, ir.Return)]
        used = {1 if self._number(v) else self.index_rank.get(v, -1)
                if self._number_tuple(v) else -1 for v in returned}
        returns_index = used.pop() if len(used) == 1 and -1 not in used else None
        return KernelAccess(params, stored, found, self.calls_unknown,
                            tuple(self.depends.values()), returns_index)

    def _global(self, target: str, value: Any, path: tuple[str, ...]) -> None:
        self._constant(target, value)
        self._bind(target, value, path)
        if path and holds_functions(value):
            self.depends.setdefault((id(self.func), path),
                                    (GlobalRef(weakref.ref(self.func), path), value))
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
            found, path = parameter_default(self.func, value.index)
            self._global(target, found, path)
        elif isinstance(value, ir.Var):
            self.alias.setdefault(target, set()).update(self.alias.get(value.name, ()))
            if self.methods.get(value.name):
                self.methods.setdefault(target, set()).update(self.methods[value.name])
            if value.name in self.slices:
                self.slices.add(target)
            if value.name in self.opaque:
                self.opaque.add(target)
            if value.name in self.holds_opaque:
                self.holds_opaque.add(target)
            self._mark(target, self._kind(value.name))
            if value.name in self.index_rank:
                self._set_index_rank(target, self.index_rank[value.name])
            found = self.values.get(value.name, UNKNOWN)
            if found is UNKNOWN:
                self.values[target] = UNKNOWN
            else:
                self._bind(target, *found)
            return
        else:
            if not (isinstance(value, ir.Expr) and value.op == "getattr"):
                self.values[target] = UNKNOWN  # _getattr binds what it finds
            if isinstance(value, ir.Arg):
                rank = self.ndims[value.index] if value.index < self.nparams else None
                if rank == OPAQUE or rank == -1:  # a value (or tuple) that may be a slice
                    self.holds_opaque.add(target)
                if rank == OPAQUE:
                    self.opaque.add(target)
                elif rank is not None:
                    self.alias.setdefault(target, set()).add((value.index, rank))
                self._mark(target, "number" if rank is None else None)
            elif isinstance(value, ir.Const):
                self._constant(target, value.value)
            elif isinstance(value, ir.Expr):
                self._expr(target, value)

    def _expr(self, target: str, e: Any) -> None:
        op = e.op
        if op in ("getitem", "static_getitem"):
            self._getitem(target, e)
        elif op == "getattr":
            self._getattr(target, e)
        elif op == "call":
            self._call(target, e)
        elif op == "build_tuple":
            self._build_tuple(target, e)
        elif op in ("exhaust_iter", "getiter", "iternext", "pair_first"):
            self._iterate(target, e)
        elif op == "make_function":
            # a function defined in the kernel: what it closes over, it may read or store
            # to when called (calling it is an unknown call)
            for var in e.list_vars():
                self._escape(var)
                self._hand_back(target, var)
        else:
            self._compute(target, e)

    def _getitem(self, target: str, e: Any) -> None:
        if e.op == "getitem":
            self._read(e.index)
        self._subview(target, e.value, e.index)
        self._opaque_if(target, [e.value])
        element = bool(self.alias.get(e.value.name)) and not self.alias.get(target)
        index = e.index
        one = isinstance(index, int) or (hasattr(index, "name") and self._number(index.name))
        member = self._number_tuple(e.value.name) and one  # not `t[:0]`, a tuple
        self._mark(target, "number" if element or member else None)

    def _build_tuple(self, target: str, e: Any) -> None:
        ranks = 0
        for item in e.items:
            self._hand_back(target, item)
            used = self._consumed_by(item.name)
            ranks = -1 if used < 0 or ranks < 0 else ranks + used
            if self._is_opaque(item):
                self.holds_opaque.add(target)
        self._set_index_rank(target, ranks)
        self._mark(target, "tuple" if all(self._number(i.name) for i in e.items) else None)

    def _iterate(self, target: str, e: Any) -> None:
        self._read(e.value)
        self._hand_back(target, e.value)
        if self._is_opaque(e.value):  # iterating over slices gives slices
            self.holds_opaque.add(target)
            if e.op == "pair_first":
                self.opaque.add(target)
        of_numbers = self._number_tuple(e.value.name)
        self._mark(target, None if not of_numbers else
                   "number" if e.op == "pair_first" else "tuple")

    def _compute(self, target: str, e: Any) -> None:
        """Arithmetic, casts, tuple concatenation (`f(a, *t)` builds one): what comes out
        may hold what went in."""
        op = e.op
        for var in e.list_vars():
            self._read(var)
            self._hand_back(target, var)
        self._opaque_if(target, e.list_vars())
        if op not in ("binop", "inplace_binop", "unary", "cast"):
            self.opaque.add(target)  # a closure, a list, a map: not a number
        operands = [v.name for v in e.list_vars()]
        if op == "cast":
            self._mark(target, self._kind(operands[0]))
            if operands[0] in self.index_rank:
                self._set_index_rank(target, self.index_rank[operands[0]])
        elif op == "pair_second":
            self._mark(target, "number")
        else:
            self._mark(target, "number" if op != "make_function" and operands and
                       all(self._number(n) for n in operands) else None)

    def _getattr(self, target: str, e: Any) -> None:
        base, attr = e.value.name, e.attr
        value, path = self.values.get(base, UNKNOWN)
        if value is not None and not holds_arrays(value):
            # an attribute of a module, class, object or namedtuple the code names
            found = getattr(value, attr, None)
            if isinstance(value, Intrinsic) or (is_intrinsic_module(value) and is_stub(found)):
                # `cuda.threadIdx.x`, `cuda.grid`, `cuda.atomic.add`: Numba's intrinsics
                # (stubs on a GPU, missing under the simulator)
                base = value if isinstance(value, Intrinsic) else INTRINSIC
                found = base.attribute(attr)
            self._global(target, found, (*path, attr) if path else ())
            return
        self.values[target] = UNKNOWN
        self._opaque_if(target, [e.value])  # a field of a namedtuple of slices
        if isinstance(value, tuple) and not holds_arrays(member := getattr(value, attr, None)):
            # a function, number or slice of a namedtuple of arrays (below: an array of it,
            # which counts as the whole tuple: Numba compiles all its arrays into the kernel)
            self._constant(target, member)
            self._bind(target, member, ())
            return
        ranks = {rank for _, rank in self.alias.get(base, ())}
        known_arrays = bool(ranks) and min(ranks) > 0
        # (of a value of unknown rank, `.size` may be a namedtuple's field: not metadata)
        if known_arrays and attr in META_ATTRS:
            self._mark(target, "tuple" if attr in ("shape", "strides") else
                       "number" if attr in ("size", "ndim", "itemsize", "nbytes") else None)
            return
        self._mark(target, None)
        if known_arrays and attr in ("T", "real", "imag"):  # views of the same rank
            self.alias.setdefault(target, set()).update(list(self.alias.get(base, ())))
        elif 0 in ranks:
            # a field of a record element: a value, or an array field stores can go into;
            # or a method (@overload_method on records): calling it may store to the record
            sources = self._sources(e.value)
            for p in sources:
                self.reads.add(p)
                self.alias.setdefault(target, set()).add((p, -1))
            self.methods.setdefault(target, set()).update(sources)
            for overload in method_overloads(attr):
                self.calls_unknown = True
                self._escape_globals_of(overload, target)
        elif ranks:
            # a method, a view (a.flat, ...) that stores can go through, a field of a
            # namedtuple: all of them
            sources = self._sources(e.value)
            self.opaque.add(target)  # a namedtuple field may be a slice
            self.holds_opaque.add(target)
            for overload in method_overloads(attr):  # @overload_method implementations
                self.calls_unknown = True
                self._escape_globals_of(overload, target)
            self.methods.setdefault(target, set()).update(sources)
            self.alias.setdefault(target, set()).update((p, -1) for p in sources)

    def _call(self, target: str, e: Any) -> None:
        fn = self._value(e.func)
        if fn is slice:
            self.slices.add(target)
            self._mark(target, None)
            return
        if fn is len:
            self._mark(target, "number")
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
        if callee is None and fn is not None and not self.methods.get(e.func.name) and \
                is_pure(fn) and not (is_ufunc(fn) and any(self.alias.get(a.name) for a in args)):
            # (a ufunc given an array could store to it: out=; Numba's CUDA target refuses
            # that today, and it would count as read and written)
            self._pure_call(target, fn, args)
            return
        overloads = overloads_of(callee) if callee is not None else []
        if callee is not None and not overloads and callee not in self.active:
            bound = bind_call(callee, e.args, e.kws, e.vararg)
            if bound is not None:
                self._device_call(target, callee, bound)  # its answer says what it returns
                return
        self._mark(target, "number" if isinstance(fn, Intrinsic) else None)  # an atomic
        if fn is None or callee is not None or self.methods.get(e.func.name):
            self.opaque.add(target)  # what a function returns may be a slice
            self.holds_opaque.add(target)
        else:  # Numba's and NumPy's functions: numbers, unless handed slices (zip, min)
            self._opaque_if(target, args)
        if callee is not None or (fn is None and not self.methods.get(e.func.name)):
            # a callee not followed (a function passed in, FNS[0], f(*t), an @overload,
            # recursion): it may be any function this code or its callers can reach
            self._unknown_callee(target)
        for overload in overloads:  # and what the overload's implementation names
            self._escape_globals_of(overload, target)
        self._escape_args(target, args)

    def _pure_call(self, target: str, fn: Any, args: list) -> None:
        """Numba's intrinsics (not the atomics), math, abs/min/max/range...: they read their
        arguments (`cuda.const.array_like(G)` hands back a view of G) and give numbers."""
        for a in args:
            self._read(a)
            self._hand_back(target, a)
        self._opaque_if(target, args)
        if isinstance(fn, Intrinsic) and fn.path in ("grid", "gridsize"):
            n = self.int_constants.get(args[0].name) if len(args) == 1 else None
            self._mark(target, "number" if n == 1 else "tuple" if n else None)
            if n and n > 1:
                self._set_index_rank(target, n)
        elif fn is range:
            self._mark(target, "tuple")  # of numbers, to iterate over
        elif fn in TUPLE_RESULTS:  # divmod: two numbers
            self._mark(target, "tuple" if all(self._number(a.name) for a in args) else None)
            self._set_index_rank(target, 2)
        else:
            self._mark(target, "number" if all(self._number(a.name) for a in args) else None)

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
            # a value not proven a number (a tuple, a slice...) may make a view as an index
            ranks.append(known[0] if len(set(known)) == 1 else -1 if known else
                         None if a is None or self._number(a.name) else OPAQUE)
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
            self.opaque.add(target)
            self.holds_opaque.add(target)
            self._mark(target, None)
            return
        self._take_over(target, args, inner)

    def _take_over(self, target: str, args: list, inner: Any) -> None:
        """A followed device function's answer (`inner`, its KernelAccess) as ours: what it
        returns, what it does to the arguments `args` it was given, the globals it names."""
        for ref, value in inner.depends:
            self.depends.setdefault((id(ref.func()), ref.path), (ref, value))
        if inner.returns_index is None:  # it may hand back a slice
            self.opaque.add(target)
            self.holds_opaque.add(target)
            self._mark(target, None)
        elif inner.returns_index == 1:
            self._mark(target, "number")
        else:  # a tuple of numbers, as an index it takes that many dimensions
            self._mark(target, "tuple")
            self._set_index_rank(target, inner.returns_index)
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

