"""W5's phases on the CPU as a GPU machine runs them: Numba's real dispatcher (not the
simulator's) launching 1,000 kernels into the trace, a stand-in device array, and the fake
platform for the build (no driver calls, so the node build's driver part and instantiate
are not in it). Run it with the Python the GPU machines have (3.12) to compare phases.

    python scripts/probe_compile_phases.py [rounds]
"""
from __future__ import annotations

import functools
import gc
import importlib
import os
import statistics
import sys
import time

os.environ["NUMBA_ENABLE_CUDASIM"] = "0"  # the real dispatcher path; nothing is launched
os.environ.setdefault("TRACEGRAPH_CUDA_PLATFORM", "fake")
os.environ.setdefault("NUMBA_CUDA_LOW_OCCUPANCY_WARNINGS", "0")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import tracegraph as tg  # noqa: E402
import tracegraph._numba as tg_numba  # noqa: E402
from benchmarks.w1_chain import axpb, make_chain  # noqa: E402
from tracegraph.backends.cuda import fake  # noqa: E402

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


def _time_phases() -> None:
    api = importlib.import_module("tracegraph.api")
    build = importlib.import_module("tracegraph.backends.cuda.build")
    for owner, name, label in ((api, "trace_function", "trace"), (api, "run_passes", "passes"),
                               (api, "lower", "lower"), (build.GraphBuilder, "build", "build"),
                               (build.GraphBuilder, "instantiate", "instantiate")):
        def wrap(orig, label=label):
            @functools.wraps(orig)
            def timed(*a, **k):
                t0 = time.perf_counter()
                try:
                    return orig(*a, **k)
                finally:
                    PHASES.setdefault(label, []).append((time.perf_counter() - t0) * 1e3)
            return timed
        setattr(owner, name, wrap(getattr(owner, name)))


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    _fake_platform_beside_real_numba()
    _time_phases()
    x = StandIn()
    tg.compile(make_chain(axpb, 1000, 4, 256), backend="cuda").warmup(x)
    PHASES.clear()
    gc.disable()
    total = []
    for _ in range(rounds):
        f = tg.compile(make_chain(axpb, 1000, 4, 256), backend="cuda")
        t0 = time.perf_counter()
        f.warmup(x)
        total.append((time.perf_counter() - t0) * 1e3)
    gc.enable()
    PHASES["build"] = [b - i for b, i in zip(PHASES["build"], PHASES["instantiate"])]
    print(f"python {sys.version.split()[0]}: first call without the launch, 1,000 launches, "
          f"median of {rounds}: {statistics.median(total):.2f} ms")
    for name, values in PHASES.items():
        print(f"  {name:12s} {statistics.median(values):6.2f} ms")


if __name__ == "__main__":
    main()
