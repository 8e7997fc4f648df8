"""W5's phases on the CPU as a GPU machine runs them: Numba's real dispatcher (not the
simulator's) launching 1,000 kernels into the trace, a stand-in device array, and the fake
platform for the build (no driver calls, so the node build's driver part and instantiate
are not in it). Run it with the Python the GPU machines have (3.12) to compare phases.

    python scripts/probe_compile_phases.py [repeats]
"""
from __future__ import annotations

import gc
import os
import statistics
import sys
import time

os.environ["NUMBA_ENABLE_CUDASIM"] = "0"  # the real dispatcher path; nothing is launched
os.environ.setdefault("TRACEGRAPH_CUDA_PLATFORM", "fake")
os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from phase_timer import time_phases

import tracegraph as tg
import tracegraph._numba as tg_numba
from benchmarks.w1_chain import axpb, make_chain
from tracegraph.backends.cuda import fake

PHASES: dict[str, list[float]] = {}


class StandIn:
    """A device array by the CUDA array interface, at an address nothing reads."""

    __cuda_array_interface__ = {"shape": (1024,), "typestr": "<f4", "strides": None,
                                "data": (0x7F0000000000, False), "version": 3, "stream": None}


def _fake_platform_beside_real_numba() -> None:
    original = fake.FakePlatform.__init__

    def init(self, *args, **kwargs):  # (the fake refuses to run outside the simulator)
        tg_numba.SIMULATOR = True
        try:
            original(self, *args, **kwargs)
        finally:
            tg_numba.SIMULATOR = False
    fake.FakePlatform.__init__ = init


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    _fake_platform_beside_real_numba()
    time_phases(lambda label, ms: PHASES.setdefault(label, []).append(ms))
    x = StandIn()
    tg.compile(make_chain(axpb, 1000, 4, 256), backend="cuda").warmup(x)
    PHASES.clear()
    gc.disable()
    total = []
    for _ in range(repeats):
        f = tg.compile(make_chain(axpb, 1000, 4, 256), backend="cuda")
        t0 = time.perf_counter()
        f.warmup(x)
        total.append((time.perf_counter() - t0) * 1e3)
    gc.enable()
    PHASES.pop("executable", None)
    PHASES["build"] = [b - i for b, i in zip(PHASES["build"], PHASES["instantiate"])]
    print(f"python {sys.version.split()[0]}: first call without the launch, 1,000 launches, "
          f"median of {repeats}: {statistics.median(total):.2f} ms")
    for name, values in PHASES.items():
        print(f"  {name:12s} {statistics.median(values):6.2f} ms")


if __name__ == "__main__":
    main()
