"""W5 on the CPU: trace (with the passes), lower (with the trace) and a first call
(warmup: all of it and the build) of 1,000 launches of the W1 chain, on the fake
platform, a fresh tg.compile each time; median and min of 7, in ms.

    python scripts/probe_compile_cpu.py
"""
from __future__ import annotations

import os
import statistics
import sys
import time

os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")
os.environ.setdefault("TRACEGRAPH_CUDA_PLATFORM", "fake")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from numba import cuda

import tracegraph as tg
from benchmarks.w1_chain import axpb, make_chain, x0

N = 1000


def ms(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1e3


def main() -> None:
    x = cuda.to_device(x0(1024))
    times: dict[str, list[float]] = {"trace": [], "lower": [], "warmup": []}
    for _ in range(7):
        for what in times:
            f = tg.compile(make_chain(axpb, N, 4, 256), backend="cuda")
            times[what].append(ms(lambda f=f, what=what: getattr(f, what)(x)))
    for what, v in times.items():
        print(f"{what:7s} median {statistics.median(v):6.1f} ms  min {min(v):6.1f}")


if __name__ == "__main__":
    main()
