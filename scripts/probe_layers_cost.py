"""Host cost of a call of a step over N layer objects that hold their weights (device
arrays captured through `self.W`) on the CPU, the launch a dry run or stubbed: the direct
path (C Entry, the checks of what the names find, exec 0: no driver call) and the full
path (the Python checks of every guard). Run where no CUDA driver loads.

    python scripts/probe_layers_cost.py
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
from tracegraph.signature import arguments

# device arrays of fixed metadata take the direct path, as Numba's do on a GPU
arguments._FIXED = arguments._FIXED | {type(cuda.to_device(np.ones(1)))}


@cuda.jit
def axpy(x, w, a):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = x[i] * w[i] + a


class Layer:
    def __init__(self, k: int):
        self.W = cuda.to_device(np.ones(4, np.float32))
        self.a = 0.5 * k

    def forward(self, x):
        axpy[1, 4](x, self.W, self.a)


def make(n: int):
    layers = [Layer(k) for k in range(n)]

    def step(x):
        for layer in layers:
            layer.forward(x)
    return step


def direct(n: int) -> str:
    from tracegraph.backends.cuda import _graphlaunch
    f = tg.compile(make(n), backend="cuda")
    x = cuda.to_device(np.zeros(4, np.float32))
    f(x)
    f(x)
    ex = f._hot
    if ex is None or ex.armed is None:
        return "not armed (every call takes the full path)"
    ex._fast_replay = _graphlaunch.replay
    ex.fast = (0, 0, -1, None, ex.fast[4] if ex.fast else ex._checks)  # exec 0: a dry run
    assert f(x) is None
    k = 20_000
    return f"{min(timeit.repeat(lambda: f(x), number=k, repeat=3)) / k * 1e6:.2f} us"


def full(n: int, backend: str) -> str:
    f = tg.compile(make(n), backend=backend)
    x = cuda.to_device(np.zeros(4, np.float32))
    f(x)
    type(f.latest.executable).run = lambda *_, **__: None  # the launch stubbed
    k = 300
    return f"{min(timeit.repeat(lambda: f(x), number=k, repeat=3)) / k * 1e6:.1f} us"


def main() -> None:
    for n in (1, 10, 100):
        print(f"{n} layers: direct {direct(n)}; full path (sim) {full(n, 'sim')}")


if __name__ == "__main__":
    main()
