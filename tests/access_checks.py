"""Checks the access-analysis tests share: whether a launch is recorded writing an argument,
and which random valid orders of a graph on the simulator differ from eager Numba."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

import tracegraph as tg

SEEDS = range(8)  # the random valid orders each program runs in


def writes(prog: Any, op: int, arg: int = 0) -> bool:
    """Whether op `op` is recorded writing the buffer of the traced function's argument `arg`."""
    bufs = [b for b, buf in enumerate(prog.buffers) if buf.input_index == arg]
    assert bufs, "no buffer for the argument"
    return any(a.writes for a in prog.ops[op].accesses if a.buffer in bufs)


def _host(v: Any) -> Any:
    if hasattr(v, "copy_to_host"):
        return v.copy_to_host()
    return v.copy() if isinstance(v, np.ndarray) else v


def orders_differing_from_eager(step: Callable, make: Callable[[], tuple],
                                monkeypatch: Any) -> list[int]:
    """The seeds (random valid orders) whose graph run on sim leaves the arguments other
    than eager Numba does."""
    want = make()
    step(*want)
    want = [_host(a) for a in want]
    bad = []
    for seed in SEEDS:
        monkeypatch.setenv("TRACEGRAPH_SIM_ORDER", str(seed))
        args = make()
        tg.compile(step, backend="sim")(*args)
        if not all(np.array_equal(_host(g), w) for g, w in zip(args, want)):
            bad.append(seed)
    return bad
