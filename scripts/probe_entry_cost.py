"""Host cost of a direct replay on the CPU, the launch a dry run (no driver): the C Entry
(f(x), f.replay(x)) against the Python frames before the C replay. Run where no CUDA
driver loads (a graph exec of 0 would launch on a GPU machine).

    python scripts/probe_entry_cost.py
"""
from __future__ import annotations

import os
import sys
import timeit

os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
os.environ["TRACEGRAPH_CUDA_PLATFORM"] = "fake"
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import numpy as np
from numba import cuda

import tracegraph as tg
from tracegraph.backends.cuda import _graphlaunch
from tracegraph.signature import arguments

# device arrays of fixed metadata take the direct path, as Numba's do on a GPU
arguments._FIXED = arguments._FIXED | {type(cuda.to_device(np.ones(1)))}


@cuda.jit
def inc(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] += 1


def step(x):
    inc[1, 4](x)


def main() -> None:
    from benchmarks.w1_chain import axpb, make_chain
    for name, fn in (("one kernel by a global name", step),
                     ("W7's chain (kernel, grid, block and scalars by name)",
                      make_chain(axpb, 1, 1, 4))):
        print(name)
        measure(fn)


def measure(fn) -> None:
    f = tg.compile(fn, backend="cuda")
    x = cuda.to_device(np.zeros(4, dtype=np.float32))
    f(x)
    f(x)
    ex = f._hot
    ex._fast_replay = _graphlaunch.replay
    ex.fast = (0, 0, -1, None, ex.fast[4] if ex.fast else ex._checks)  # exec 0: a dry run
    assert f(x) is None and f.replay(x) is None
    before = type(f).replay
    n = 200_000
    for name, fn in (("f(x) through the C Entry", lambda: f(x)),
                     ("f.replay(x) through the C Entry", lambda: f.replay(x)),
                     ("the Python frames, then the C replay (before)", lambda: before(f, x))):
        t = min(timeit.repeat(fn, number=n, repeat=5)) / n * 1e6
        print(f"  {name}: {t:.3f} us")


if __name__ == "__main__":
    main()
