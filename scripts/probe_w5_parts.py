"""Where W5's first call goes on a GPU, against Numba's stream capture in the same process:
rounds of (capture first call, tracegraph first call, the same with TRACEGRAPH_BATCH_NODES=1)
interleaved, GC off as in benchmarks/run.py; each tracegraph call split into its phases
(trace, passes, lower, node build, instantiate, the rest of the executable). Medians in ms.

    python scripts/probe_w5_parts.py [out.json]
"""
from __future__ import annotations

import gc
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from numba import cuda
from phase_timer import time_phases

import tracegraph as tg
from benchmarks.w1_chain import axpb, make_chain, x0

N, SIZE, BLOCK, ROUNDS = 1000, 1024, 256, int(os.environ.get("ROUNDS", "15"))
GRID = (SIZE + BLOCK - 1) // BLOCK
PHASES: dict[str, float] = {}


def capture(x) -> float:
    from cuda.core import Device
    dev = Device()
    dev.set_current()
    stream = dev.create_stream()
    t0 = time.perf_counter()
    gb = dev.create_graph_builder()
    gb.begin_building("relaxed")
    make_chain(axpb, N, GRID, BLOCK, gb)(x)
    gb.end_building()
    gb.complete().launch(stream)
    stream.sync()
    return (time.perf_counter() - t0) * 1e3


def traced(x, batch: bool) -> dict[str, float]:
    os.environ["TRACEGRAPH_BATCH_NODES"] = "1" if batch else "0"
    PHASES.clear()
    f = tg.compile(make_chain(axpb, N, GRID, BLOCK), backend="cuda")
    t0 = time.perf_counter()
    f(x)
    cuda.synchronize()
    out = dict(PHASES, first_call=(time.perf_counter() - t0) * 1e3)
    out["build"] -= out.get("instantiate", 0.0)  # build's own time, instantiate apart
    return out


def main() -> None:
    time_phases(lambda label, ms: PHASES.__setitem__(label, PHASES.get(label, 0.0) + ms))
    x = cuda.to_device(x0(SIZE))
    make_chain(axpb, 1, GRID, BLOCK)(x)
    cuda.synchronize()
    traced(x, False), traced(x, True), capture(x)  # warm: imports, module loads
    samples: dict[str, list] = {"capture": [], "default": [], "batch": []}
    gc.disable()
    for _ in range(ROUNDS):
        gc.collect()
        samples["capture"].append({"first_call": capture(x)})
        gc.collect()
        samples["default"].append(traced(x, False))
        gc.collect()
        samples["batch"].append(traced(x, True))
    gc.enable()
    summary = {how: {k: round(statistics.median(s[k] for s in runs), 3) for k in runs[0]}
               for how, runs in samples.items()}
    for how, phases in summary.items():
        print(f"{how:8s} " + "  ".join(f"{k} {v:.2f}" for k, v in phases.items()))
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as fh:
            json.dump({"rounds": ROUNDS, "median_ms": summary, "samples": samples}, fh, indent=1)


if __name__ == "__main__":
    main()
