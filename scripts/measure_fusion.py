"""Elementwise fusion off and on (TRACEGRAPH_FUSE), each in a process of its own: one chain
of six elementwise ops on a float32 array, its graph nodes, the first call (trace,
passes, Numba's compile of the kernels, graph build), a replay (median of synchronized
replays), and whether the two results are equal bit for bit.

    python scripts/measure_fusion.py [--rows 4096] [--cols 1024] [--replays 50]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np


def chain(x, b):
    from tracegraph import ops
    t = ops.subtract(x, 0.5)
    t = ops.maximum(t, 0.0)
    t = ops.add(t, b)
    t = ops.tanh(t)
    t = ops.abs(t)
    return ops.sqrt(t)


def one_mode(args) -> None:
    """In this process, with TRACEGRAPH_FUSE as the parent set it: print a JSON line."""
    from numba import cuda

    import tracegraph as tg
    rng = np.random.default_rng(0)
    x = cuda.to_device(rng.standard_normal((args.rows, args.cols)).astype(np.float32))
    b = cuda.to_device(rng.standard_normal(args.cols).astype(np.float32))
    f = tg.compile(chain)
    t0 = time.perf_counter()
    out = f(x, b)
    cuda.synchronize()
    first = (time.perf_counter() - t0) * 1e3
    times = []
    for _ in range(args.replays):
        t0 = time.perf_counter()
        f.replay(x, b)
        cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e6)
    host = out.copy_to_host() if hasattr(out, "copy_to_host") else np.asarray(out)
    np.save(args.save, host)
    print(json.dumps({"nodes": len(f.latest.plan.nodes), "first_call_ms": first,
                      "replay_us": statistics.median(times)}))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--rows", type=int, default=4096)
    p.add_argument("--cols", type=int, default=1024)
    p.add_argument("--replays", type=int, default=50)
    p.add_argument("--save", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.save:
        one_mode(args)
        return
    found = {}
    for fuse in ("0", "1"):
        path = f"/tmp/measure_fusion_{fuse}.npy"
        proc = subprocess.run([sys.executable, __file__, "--rows", str(args.rows), "--cols",
                               str(args.cols), "--replays", str(args.replays), "--save", path],
                              env=dict(os.environ, TRACEGRAPH_FUSE=fuse), check=True,
                              capture_output=True, text=True)
        found[fuse] = json.loads(proc.stdout.strip().splitlines()[-1])
        found[fuse]["result"] = np.load(path)
    off, on = found["0"], found["1"]
    print(f"chain of 6 elementwise ops on {args.rows}x{args.cols} float32 (each in a process "
          f"of its own): unfused {off['nodes']} nodes, first call {off['first_call_ms']:.0f} "
          f"ms, replay {off['replay_us']:.1f} us; fused {on['nodes']} nodes, first call "
          f"{on['first_call_ms']:.0f} ms, replay {on['replay_us']:.1f} us; results equal bit "
          f"for bit: {np.array_equal(off['result'], on['result'])}")


if __name__ == "__main__":
    main()
