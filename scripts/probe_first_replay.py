"""Issue 15, item 4: is a compiled function's first replay slower than the later ones, and
is that tracegraph's or the driver's? For fresh compiles of a 100-kernel chain, each call
timed on the host (the call alone, then to the end of a synchronize); Numba's stream
capture of the same launches (uploaded before its first launch, as tracegraph's executable
is at instantiate) timed the same way. Medians over the fresh compiles, in µs.

    python scripts/probe_first_replay.py [out.json]
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from numba import cuda

import tracegraph as tg
from benchmarks.w1_chain import axpb, make_chain, x0

N, GRID, BLOCK, CALLS, FRESH = 100, 4, 256, 40, 15


def timed_calls(call) -> list[tuple[float, float]]:
    """(host time of the call, time to the end of a synchronize after it) of each call."""
    out = []
    for _ in range(CALLS):
        cuda.synchronize()
        t0 = time.perf_counter()
        call()
        t1 = time.perf_counter()
        cuda.synchronize()
        out.append(((t1 - t0) * 1e6, (time.perf_counter() - t0) * 1e6))
    return out


def tracegraph_calls(x) -> list[tuple[float, float]]:
    f = tg.compile(make_chain(axpb, N, GRID, BLOCK))
    return timed_calls(lambda: f(x))


def capture_calls(x) -> list[tuple[float, float]]:
    from cuda.core import Device
    dev = Device()
    dev.set_current()
    stream = dev.create_stream()
    gb = dev.create_graph_builder()
    gb.begin_building("relaxed")
    make_chain(axpb, N, GRID, BLOCK, gb)(x)
    gb.end_building()
    graph = gb.complete()
    graph.upload(stream)
    stream.sync()
    return timed_calls(lambda: graph.launch(stream))


def summary(runs: list[list[tuple[float, float]]], first: int) -> dict:
    def at(i: int, k: int) -> float:
        return round(statistics.median(r[i][k] for r in runs), 2)
    steady = lambda k: round(statistics.median(  # noqa: E731
        statistics.median(t[k] for t in r[10:]) for r in runs), 2)
    return {"first launch: host, to sync": (at(first, 0), at(first, 1)),
            "second: host, to sync": (at(first + 1, 0), at(first + 1, 1)),
            "third: host, to sync": (at(first + 2, 0), at(first + 2, 1)),
            "calls 10-39: host, to sync": (steady(0), steady(1))}


def main() -> None:
    x = cuda.to_device(x0(1024))
    make_chain(axpb, 1, GRID, BLOCK)(x)
    cuda.synchronize()
    tracegraph_calls(x), capture_calls(x)  # warm: imports, module loads
    tg_runs = [tracegraph_calls(x) for _ in range(FRESH)]
    cap_runs = [capture_calls(x) for _ in range(FRESH)]
    # tracegraph's call 0 compiles: its first replay is call 1
    results = {"tracegraph (call 1 = first replay)": summary(tg_runs, 1),
               "capture (uploaded, call 0 = first launch)": summary(cap_runs, 0),
               "fresh compiles": FRESH, "chain": N}
    print(json.dumps(results, indent=1))
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as fh:
            json.dump({"summary": results, "tracegraph": tg_runs, "capture": cap_runs}, fh)


if __name__ == "__main__":
    main()
