"""Moved device inputs on a GPU: what a moved device input costs when the graph re-points the
nodes that use it, and when it copies the input into a static buffer by an in-graph memcpy,
by fan-out and size; plus the constants of moved_inputs.Costs fitted from them.

Each cell is the median synchronized step (replay + synchronize) over many replays, the
input either unchanged or alternating between two arrays on every replay. Prints a table;
writes JSON to argv[1] if given. Run: python3 scripts/measure_moved_inputs.py [out.json]
"""
import json
import os
import statistics
import sys
import time

import numpy as np
from numba import cuda

import tracegraph as tg
from tracegraph import config
from tracegraph.backends.cuda import moved_inputs


@cuda.jit
def scaled(src, dst, a):
    i = cuda.grid(1)
    if i < dst.size:
        dst[i] = src[i] * a


def fanout_program(fan):
    def step(src, outs):
        for k in range(fan):
            scaled[4, 256](src, outs[k], 1.0)
    step.__name__ = step.__qualname__ = f"fanout{fan}"
    return step


def step_us(fn, args_of, reps):
    times = []
    for k in range(reps):
        args = args_of(k)
        t0 = time.perf_counter()
        fn(*args)
        cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e6


def host_us(fn, args_of, reps=500):
    """Host time per call, not synchronized (the GPU runs behind): what the caller waits."""
    samples = []
    for _ in range(5):
        t0 = time.perf_counter()
        for k in range(reps // 5):
            fn(*args_of(k))
        samples.append((time.perf_counter() - t0) / (reps // 5) * 1e6)
        cuda.synchronize()
    return statistics.median(samples)


def compiled_fanout(fan, way, nbytes=4096):
    """The fan-out program compiled under `way`, two inputs to alternate, and its output."""
    os.environ[config.MOVED_INPUTS] = way
    f = tg.compile(fanout_program(fan))
    x = cuda.to_device(np.ones(nbytes // 4, np.float32))
    y = cuda.to_device(np.ones(nbytes // 4, np.float32))
    outs = cuda.device_array((fan, 1024), np.float32)
    f(x, outs)
    cuda.synchronize()
    return f, x, y, outs


def measure_cell(fan, nbytes, way, reps):
    f, x, y, outs = compiled_fanout(fan, way, nbytes)
    warm = []
    for k in range(40):  # warm up; in auto, lets the policy settle on a moving input
        t0 = time.perf_counter()
        f.replay(y if k % 2 else x, outs)
        warm.append(time.perf_counter() - t0)
    cuda.synchronize()
    watch = f.latest.executable.watch
    mode = next(iter(watch.values())).mode if watch else "repoint (not watched)"
    moved = step_us(f.replay, lambda k: (y if k % 2 else x, outs), reps)
    moved_host = host_us(f.replay, lambda k: (y if k % 2 else x, outs))
    for _ in range(100):  # at rest; in auto, lets the policy go back where that pays
        f.replay(x, outs)
    same = step_us(f.replay, lambda k: (x, outs), reps)
    same_host = host_us(f.replay, lambda k: (x, outs))
    f.replay(y, outs)
    cuda.synchronize()
    assert np.allclose(outs.copy_to_host(), 1.0)
    return {"fan": fan, "nbytes": nbytes, "way": way, "same_us": same, "moved_us": moved,
            "same_host_us": same_host, "moved_host_us": moved_host,
            "slowest_warmup_replay_us": max(warm) * 1e6, "mode_after_moves": mode,
            "mode_at_rest": next(iter(watch.values())).mode if watch else "repoint"}


def memcpy_patch_us(reps=2000):
    """Host time to re-point one memcpy node through cuda.core (what the backend uses)."""
    f, x, y, outs = compiled_fanout(4, "copy")
    exe = f.latest.executable
    w = next(w for w in exe.watch.values() if exe.plan.buffers[w.buffer].name == "src")
    addrs = [x.device_ctypes_pointer.value, y.device_ctypes_pointer.value]
    view = exe.graph[w.copy_in]
    t0 = time.perf_counter()
    for k in range(reps):
        view.update(dst=w.address, src=addrs[k % 2], size=w.nbytes)
    core = (time.perf_counter() - t0) / reps * 1e6
    f.replay(x, outs)
    cuda.synchronize()
    return {"memcpy_patch_cuda_core_us": core}


def move_breakdown(reps=2000):
    """Where a move's cost goes, fan-out 1: the full argument analysis, the memo's shortcut
    for other arrays of the same kind (host), the whole replay call (host, not
    synchronized), and the synchronized step; unchanged vs alternating inputs."""
    f, x, y, outs = compiled_fanout(1, "repoint")
    out = {}
    t0 = time.perf_counter()
    for k in range(reps):
        f._calls._prepare((y if k % 2 else x, outs), {})
    out["prepare_us"] = (time.perf_counter() - t0) / reps * 1e6
    t0 = time.perf_counter()
    for k in range(reps):  # what replay does first: the memo, taking the other array
        assert f._calls._reuse((y if k % 2 else x, outs)) is not None
    out["reuse_moved_us"] = (time.perf_counter() - t0) / reps * 1e6
    for name, pick in (("same", lambda k: x), ("moved", lambda k: y if k % 2 else x)):
        out[f"replay_host_us_{name}"] = host_us(f.replay, lambda k: (pick(k), outs), reps)
        out[f"step_us_{name}"] = step_us(f.replay, lambda k: (pick(k), outs), 500)
    print("move breakdown:", json.dumps(out), flush=True)
    return out


def fit(rows):
    """Costs constants from the table (least squares on the relevant differences)."""
    def cell(fan, nbytes, way):
        return next(r for r in rows if (r["fan"], r["nbytes"], r["way"]) == (fan, nbytes, way))
    small, large = sorted({r["nbytes"] for r in rows})
    fans = sorted({r["fan"] for r in rows})
    # re-pointing: moved - same grows by one kernel patch per node
    d = [(f, cell(f, small, "repoint")["moved_us"] - cell(f, small, "repoint")["same_us"])
         for f in fans]
    slope = np.polyfit([f for f, _ in d], [v for _, v in d], 1)
    base = slope[1]  # a move's cost outside the graph (argument checks), both ways
    # copying: same-input step grows by the copy's GPU time
    c_small = statistics.median(cell(f, small, "copy")["same_us"] - cell(f, small, "repoint")["same_us"]
                                for f in fans)
    c_large = statistics.median(cell(f, large, "copy")["same_us"] - cell(f, large, "repoint")["same_us"]
                                for f in fans)
    per_byte = max(c_large - c_small, 1e-9) / (large - small)
    patch = statistics.median((cell(f, small, "copy")["moved_us"] - cell(f, small, "copy")["same_us"])
                              - base for f in fans)
    return {"kernel_patch_us": float(slope[0]), "move_base_us": float(base),
            "copy_fixed_us": float(c_small - small * per_byte),
            "copy_bytes_per_us": float(1 / per_byte), "memcpy_patch_us": float(patch)}


def main():
    reps = int(os.environ.get("REPS", "300"))
    breakdown = move_breakdown()
    rows = []
    for nbytes in (4096, 1 << 20):
        for fan in (1, 2, 4, 8, 16, 64):
            for way in ("repoint", "copy", "auto"):
                rows.append(measure_cell(fan, nbytes, way, reps))
                r = rows[-1]
                print(f"fan {fan:3d} {nbytes:8d} B {way:8s} step same {r['same_us']:6.1f} "
                      f"moved {r['moved_us']:6.1f} | host same {r['same_host_us']:6.1f} "
                      f"moved {r['moved_host_us']:6.1f} | slowest warm-up "
                      f"{r['slowest_warmup_replay_us']:7.1f} us ({r['mode_after_moves']}, "
                      f"at rest {r['mode_at_rest']})", flush=True)
    results = {"rows": rows, "move_breakdown": breakdown, **memcpy_patch_us(), "fitted_costs": fit(rows),
               "costs_in_code": vars(moved_inputs.DEFAULT_COSTS)}
    print(json.dumps({k: v for k, v in results.items() if k != "rows"},
                     indent=2))
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as fh:
            json.dump(results, fh, indent=2)


if __name__ == "__main__":
    main()
