"""Device-side control flow inside a traced function, as CUDA conditional nodes:

    with tg.while_(flag, max_iterations=100) as loop:  # while flag[0] != 0
        step[...](state, flag)                          # the body sets flag
    with tg.if_(flag):
        ...
    with tg.else_():
        ...
    with tg.switch(index, 3) as cases:
        with cases[0]:
            ...

`flag` / `index` is a one-element integer traced array that kernels write. A loop counts
its iterations into `loop.iterations` (a traced int32 array to return or read in kernels)
and stops at max_iterations; `raise_at_limit=True` makes a call that hit the limit raise.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import TraceError
from ..ir import Conditional, OpKind, View
from ..location import user_location
from ..traced import Array, tracer_of, view_of
from .origins import what_it_is

MAX = 2**31 - 1


def _flag_view(flag: Any, what: str, where: str) -> tuple[Any, View]:
    if not isinstance(flag, Array):
        raise TraceError(f"{what} needs a traced array (a one-element integer array kernels "
                         f"write), got {what_it_is(flag)}", where=where,
                         fix="make it with tg.zeros(1, np.int32) or pass it in as an argument")
    v = view_of(flag)
    if v.size != 1 or v.dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
        raise TraceError(f"{what} needs a one-element int32 or int64 array, got "
                         f"{v.dtype}{list(v.shape)}", where=where,
                         fix="use tg.zeros(1, np.int32)")
    return tracer_of(flag), v


class while_:
    """`with tg.while_(flag, max_iterations=n) as loop:` repeats its body on the device
    while flag[0] != 0 (checked before each iteration), at most n times."""

    def __init__(self, flag: Any, max_iterations: int | None = None, *,
                 raise_at_limit: bool = False):
        self._where = user_location(2)
        self._tracer, self._flag = _flag_view(flag, "tg.while_", self._where)
        if max_iterations is not None and (not isinstance(max_iterations, int)
                                           or max_iterations < 0):
            raise TraceError(f"max_iterations={max_iterations!r}", where=self._where,
                             fix="give a number of iterations >= 0, or None for no limit")
        self.max_iterations = MAX if max_iterations is None else max_iterations
        self.raise_at_limit = raise_at_limit
        # how many iterations ran (the graph resets it before the loop)
        self.iterations = self._tracer.new_array((1,), np.dtype(np.int32), zero=False)

    def __enter__(self) -> while_:
        self._tracer.begin_body()
        return self

    def __exit__(self, kind: Any, *_: Any) -> None:
        body = self._tracer.end_body()
        if kind is None:
            self._tracer.add_conditional(
                Conditional("while", self._flag, (body,), self.max_iterations,
                            view_of(self.iterations), self.raise_at_limit), self._where)


class if_:
    """`with tg.if_(flag):` runs its body on the device when flag[0] != 0; a
    `with tg.else_():` right after it runs when flag[0] == 0."""

    def __init__(self, flag: Any):
        self._where = user_location(2)
        self._tracer, self._flag = _flag_view(flag, "tg.if_", self._where)

    def __enter__(self) -> if_:
        self._tracer.begin_body()
        return self

    def __exit__(self, kind: Any, *_: Any) -> None:
        body = self._tracer.end_body()
        if kind is None:
            self._tracer.add_conditional(Conditional("if", self._flag, (body,)), self._where)


class else_:
    """The other branch of the `tg.if_` block just before it."""

    def __init__(self) -> None:
        from .functions import _active
        self._where = user_location(2)
        self._tracer = _active("else_")
        last = self._tracer.ops[-1] if self._tracer.ops else None
        if last is None or last.kind != OpKind.CONDITIONAL or last.conditional.kind != "if" \
                or len(last.conditional.bodies) != 1:
            raise TraceError("tg.else_() must follow a `with tg.if_(...)` block directly",
                             where=self._where, fix="put it right after the if block")
        self._if = last

    def __enter__(self) -> else_:
        self._tracer.ops.pop()
        self._tracer.begin_body()
        return self

    def __exit__(self, kind: Any, *_: Any) -> None:
        body = self._tracer.end_body()
        c = self._if.conditional
        data = Conditional("if", c.flag, (c.bodies[0], body))
        self._tracer.add_conditional(data, self._if.location)


class switch:
    """`with tg.switch(index, n) as cases:` then `with cases[k]:` for the bodies; the
    device runs body index[0] (none if it is outside 0..n-1)."""

    def __init__(self, index: Any, n: int):
        self._where = user_location(2)
        self._tracer, self._flag = _flag_view(index, "tg.switch", self._where)
        if not isinstance(n, int) or n < 1:
            raise TraceError(f"tg.switch with {n!r} cases", where=self._where,
                             fix="give the number of cases, at least 1")
        self.n = n
        self._bodies: dict[int, tuple] = {}
        self._open: int | None = None

    def __enter__(self) -> switch:
        return self

    def __getitem__(self, k: int) -> _Case:
        if not isinstance(k, int) or not 0 <= k < self.n or k in self._bodies:
            raise TraceError(f"case {k!r} of a tg.switch of {self.n}", where=user_location(2),
                             fix=f"use each case 0..{self.n - 1} once")
        return _Case(self, k)

    def __exit__(self, kind: Any, *_: Any) -> None:
        if kind is not None:
            return
        bodies = tuple(self._bodies.get(k, ()) for k in range(self.n))
        self._tracer.add_conditional(Conditional("switch", self._flag, bodies), self._where)


class _Case:
    def __init__(self, owner: switch, k: int):
        self.owner, self.k = owner, k

    def __enter__(self) -> _Case:
        self.owner._tracer.begin_body()
        return self

    def __exit__(self, kind: Any, *_: Any) -> None:
        body = self.owner._tracer.end_body()
        if kind is None:
            self.owner._bodies[self.k] = body
