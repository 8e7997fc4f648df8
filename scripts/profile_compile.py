"""Where W5's first call goes, on a GPU: 1,000 launches of the W1 chain
after Numba's JIT; trace, lower and first call on fresh compiled functions (median of 7),
Numba's stream capture of the same launches, then a cProfile of one first call (top
functions by own time, and by cumulative time).

    python scripts/profile_compile.py [out.txt]
"""
from __future__ import annotations

import cProfile
import io
import os
import pstats
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from numba import cuda
from phase_timer import time_phases

import tracegraph as tg
from benchmarks.w1_chain import axpb, make_chain, x0

N, SIZE, BLOCK = 1000, 1024, 256
GRID = (SIZE + BLOCK - 1) // BLOCK


def ms(fn) -> float:
    t0 = time.perf_counter()
    fn()
    cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3


def capture_first_call(x) -> float:
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return float("nan")  # (no GPU: the phases alone, on the CPU stand-in)
    from cuda.core import Device
    dev = Device()
    dev.set_current()
    stream = dev.create_stream()

    def first():
        gb = dev.create_graph_builder()
        gb.begin_building("relaxed")
        make_chain(axpb, N, GRID, BLOCK, gb)(x)
        gb.end_building()
        gb.complete().launch(stream)
        stream.sync()
    return ms(first)


PHASES: dict[str, list[float]] = {}


def main() -> None:
    time_phases(lambda label, ms: PHASES.setdefault(label, []).append(ms))
    x = cuda.to_device(x0(SIZE))
    make_chain(axpb, 1, GRID, BLOCK)(x)
    cuda.synchronize()
    lines = []
    times: dict[str, list[float]] = {}
    for _ in range(7):
        times.setdefault("trace", []).append(
            ms(lambda: tg.compile(make_chain(axpb, N, GRID, BLOCK), backend="cuda").trace(x)))
        times.setdefault("lower", []).append(
            ms(lambda: tg.compile(make_chain(axpb, N, GRID, BLOCK), backend="cuda").lower(x)))
        times.setdefault("first_call", []).append(
            ms(lambda: tg.compile(make_chain(axpb, N, GRID, BLOCK), backend="cuda")(x)))
        times.setdefault("capture_first_call", []).append(capture_first_call(x))
    for name, v in times.items():
        lines.append(f"{name:20s} median {statistics.median(v):7.2f} ms  min {min(v):7.2f}")
    lines.append("phases of every call above (trace and lower calls included):")
    for name, v in PHASES.items():
        lines.append(f"  {name:20s} median {statistics.median(v):7.2f} ms  n={len(v)}")
    prof = cProfile.Profile()
    f = tg.compile(make_chain(axpb, N, GRID, BLOCK), backend="cuda")
    prof.enable()
    f(x)
    cuda.synchronize()
    prof.disable()
    for key in ("tottime", "cumulative"):
        buf = io.StringIO()
        pstats.Stats(prof, stream=buf).sort_stats(key).print_stats(35)
        lines.append(buf.getvalue())
    text = "\n".join(lines)
    print(text)
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as fh:
            fh.write(text)


if __name__ == "__main__":
    main()
