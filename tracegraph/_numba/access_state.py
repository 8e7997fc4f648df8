"""What the access walk (access_walk.py) knows about a function's IR variables, and the
small updates the walk makes to it: sources read, written, stored to, aliased or escaped;
values held; indexes that may make views."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .callees import (
    is_number,
)
from .captured import (
    GlobalRef,
    reach,
)

META_ATTRS = frozenset({"shape", "size", "ndim", "dtype", "strides", "itemsize", "nbytes",
                         "layout"})
UNKNOWN = (None, ())  # what a variable that is not (only) one known global holds


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


class WalkState:
    """What a walk over untyped Numba IR has found so far (all of it only grows, so the
    walk reaches a fixed point).

    A source is a parameter index or a ("global", key) pair; aliases map a variable to
    the sources it may view, with their remaining rank (-1: unknown, maybe an array;
    0: an element of a record array, through which fields are written). `values` maps a
    variable to the one Python value it holds (a global, an attribute of one, a default)
    and the path it was found by; a variable assigned anything else, or two different
    values, holds `UNKNOWN`.
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
        # vars that may hold what is not a number (a slice, a tuple, a function...), and vars
        # that may hold such things inside (tuples, iterators): an index through them may
        # make a view, not take an element
        self.opaque: set[str] = set()
        self.holds_opaque: set[str] = set()
        # vars proven to hold a number (an index through one takes one dimension), or a
        # tuple (iterable) of numbers; a var also assigned anything else is in `others`
        self.numbers: set[str] = set()
        self.number_tuples: set[str] = set()
        self.others: set[str] = set()
        self.int_constants: dict[str, int] = {}
        self.index_rank: dict[str, int] = {}   # tuple-index vars: how many dims they consume
        self.methods: dict[str, set[Any]] = {}  # vars holding a bound method of an array
        self.values: dict[str, tuple[Any, tuple[str, ...]]] = {}  # var -> (value, path)
        self.refs: dict[Any, GlobalRef] = {}   # ("global", key) -> where to find it
        self.calls_unknown = False
        self.depends: dict[tuple, tuple[GlobalRef, Any]] = {}  # names holding functions
        self._reached: dict[int, tuple] = {}  # reach() per function, once per walk

    def _size(self) -> tuple[int, ...]:
        return (len(self.reads), len(self.writes), len(self.stored),
                sum(map(len, self.alias.values())), sum(map(len, self.methods.values())),
                len(self.slices), len(self.index_rank), len(self.values),
                len(self.opaque), len(self.holds_opaque), len(self.numbers),
                len(self.number_tuples), len(self.others),
                sum(v is UNKNOWN for v in self.values.values()), int(self.calls_unknown))

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
            [(p, -1) for p, _ in self.alias.get(var.name, ())])  # target may be var

    def _value(self, var: Any) -> Any:
        return self.values.get(var.name, UNKNOWN)[0]

    def _bind(self, target: str, value: Any, path: tuple[str, ...]) -> None:
        """`target` holds `value`; one that held another value before holds either."""
        now = self.values.get(target)
        if now is None:
            self.values[target] = (value, path)
        elif now is not UNKNOWN and now[0] is not value:
            self.values[target] = UNKNOWN

    def _consumed(self, index: Any) -> int:
        """How many dimensions an index takes away; -1 when that is not known (an
        Ellipsis, None, a boolean or array index)."""
        from numba.core import ir
        if isinstance(index, ir.Var):
            return self._consumed_by(index.name)
        return _constant_index_rank(index)

    def _consumed_by(self, name: str) -> int:
        if name in self.slices:
            return 0
        if name in self.opaque or (name in self.holds_opaque and name not in self.index_rank):
            return -1
        if name in self.index_rank:
            return self.index_rank[name]
        return 1 if self._number(name) else -1  # not proven a number: maybe a tuple

    def _set_index_rank(self, target: str, rank: int) -> None:
        """A variable assigned tuples of two lengths takes an unknown number of dimensions."""
        held = self.index_rank.get(target)
        self.index_rank[target] = rank if held is None or held == rank else -1

    def _number(self, name: str) -> bool:
        return name in self.numbers and name not in self.others and \
            name not in self.number_tuples and not self._is_opaque_name(name) and \
            not self.alias.get(name)

    def _number_tuple(self, name: str) -> bool:
        return name in self.number_tuples and name not in self.others and \
            name not in self.numbers and not self._is_opaque_name(name) and \
            not self.alias.get(name)

    def _mark(self, target: str, kind: str | None) -> None:
        """What `target` was assigned: "number", "tuple" (of numbers) or None (other)."""
        if kind == "number":
            self.numbers.add(target)
        elif kind == "tuple":
            self.number_tuples.add(target)
        else:
            self.others.add(target)

    def _kind(self, name: str) -> str | None:
        return "number" if self._number(name) else "tuple" if self._number_tuple(name) else None

    def _is_opaque(self, var: Any) -> bool:
        return self._is_opaque_name(var.name)

    def _is_opaque_name(self, name: str) -> bool:
        return name in self.opaque or name in self.holds_opaque or name in self.slices

    def _opaque_if(self, target: str, operands: Any) -> None:
        """What comes out of these operands may hold what they hold."""
        if any(self._is_opaque(v) for v in operands):
            self.opaque.add(target)
            self.holds_opaque.add(target)

    def _subview(self, target: str, base: Any, index: Any) -> None:
        used = self._consumed(index)
        out = self.alias.setdefault(target, set())
        for p, rank in list(self.alias.get(base.name, ())):  # `x = x[1:]`: one set
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
            self._set_index_rank(target, _constant_index_rank(value))
        if isinstance(value, tuple) and not all(map(is_number, value)):
            self.holds_opaque.add(target)
        elif not is_number(value) and not isinstance(value, tuple):
            self.opaque.add(target)
        if isinstance(value, int) and not isinstance(value, bool):
            self.int_constants[target] = value
        self._mark(target, "tuple" if isinstance(value, tuple) and all(map(is_number, value))
                   else "number" if is_number(value) else None)

    def _unknown_callee(self, target: str) -> None:
        self.calls_unknown = True
        self._escape_globals_of(self.func, target)

    def _escape_globals_of(self, fn: Any, target: str) -> None:
        """A function we could not follow: every array it (or a function it names)
        captures may be read, written, and handed back."""
        found, bindings = self._reached.get(id(fn)) or self._reached.setdefault(id(fn), reach(fn))
        for ref, value in bindings:  # names holding functions it reaches: see `depends`
            self.depends.setdefault((id(ref.func()), ref.path), (ref, value))
        for ref, _ in found:
            key = ("global", id(ref.func()), ref.path)
            self.refs.setdefault(key, ref)
            self.reads.add(key)
            self.writes.add(key)
            self.alias.setdefault(target, set()).add((key, -1))
