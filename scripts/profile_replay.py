"""Where a replay's host time goes, on a GPU: the raw cost of launching one
instantiated graph through cuda.core, cuda.bindings and ctypes; tracegraph's replay of a
one-kernel graph with unchanged and with a moved input, with a cProfile of each; and
W3's cuBLASLt MLP graph: its driver nodes and its GPU time per step against the same
cuBLASLt calls captured directly by cuda.core and against torch.cuda.graph.

    python scripts/profile_replay.py [out.json]
"""
from __future__ import annotations

import cProfile
import ctypes
import io
import json
import os
import pstats
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import numpy as np  # noqa: E402
from numba import cuda  # noqa: E402

import tracegraph as tg  # noqa: E402


@cuda.jit
def axpb(x, a, b):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = x[i] * a + b


def per_call_us(fn, calls=2000, reps=15) -> float:
    for _ in range(200):
        fn(0)
    cuda.synchronize()
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for i in range(calls):
            fn(i)
        out.append((time.perf_counter() - t0) / calls * 1e6)
        cuda.synchronize()
    return statistics.median(out)


def profile(fn, calls=20000, top=14) -> str:
    pr = cProfile.Profile()
    pr.enable()
    for i in range(calls):
        fn(i)
    pr.disable()
    cuda.synchronize()
    s = io.StringIO()
    pstats.Stats(pr, stream=s).sort_stats("tottime").print_stats(top)
    return s.getvalue()


def launches(results: dict) -> None:
    from cuda.bindings import driver
    from cuda.core import LEGACY_DEFAULT_STREAM

    @tg.compile
    def one(x):
        axpb[4, 256](x, 1.0001, 0.5)

    xs = [cuda.to_device(np.ones(1024, np.float32)) for _ in range(2)]
    one(xs[0])
    graph = one.compiled[0].executable.built.graph
    handle = int(graph.handle)
    lib = ctypes.CDLL("libcuda.so.1")
    raw = lib.cuGraphLaunch
    raw.argtypes, raw.restype = [ctypes.c_void_p, ctypes.c_void_p], ctypes.c_int
    exec_obj = graph.handle
    results["launch_us"] = {
        "cuda.core Graph.launch": per_call_us(lambda i: graph.launch(LEGACY_DEFAULT_STREAM)),
        "cuda.bindings cuGraphLaunch": per_call_us(lambda i: driver.cuGraphLaunch(exec_obj, 0)),
        "ctypes cuGraphLaunch": per_call_us(lambda i: raw(handle, None)),
    }
    from tracegraph.backends.cuda.platform import _c_launch
    c_launch = _c_launch()
    if c_launch is not None:
        results["launch_us"]["tracegraph C extension cuGraphLaunch"] = per_call_us(
            lambda i: c_launch(handle, 0))

    os.environ["TRACEGRAPH_C_LAUNCH"] = "0"  # read when a graph's launcher is first made
    @tg.compile
    def one_core(x):
        axpb[4, 256](x, 1.0001, 0.5)
    one_core(xs[0])
    one_core.replay(xs[0])
    del os.environ["TRACEGRAPH_C_LAUNCH"]
    results["replay_us_cuda_core_launch"] = per_call_us(lambda i: one_core.replay(xs[0]))
    results["replay_us"] = {
        "unchanged": per_call_us(lambda i: one.replay(xs[0])),
        "moved (ping-pong)": per_call_us(lambda i: one.replay(xs[i & 1])),
        "describe a Numba device array": per_call_us(
            lambda i: tg.signature.describe(xs[i & 1])),
    }
    results["profile_unchanged"] = profile(lambda i: one.replay(xs[0]))
    results["profile_moved"] = profile(lambda i: one.replay(xs[i & 1]))


def w3(results: dict, batch: int = 1, width: int = 256) -> None:
    """The cuBLASLt MLP: nodes, and GPU time per step (CUDA events around 200 launches)."""
    from benchmarks import w3_mlp

    os.environ["TRACEGRAPH_MATMUL"] = "cublas"
    x, ws, bs = w3_mlp.params(width, batch)
    d = [cuda.to_device(x)]
    for w, b in zip(ws, bs):
        d += [cuda.to_device(w), cuda.to_device(b)]
    d += [cuda.device_array((batch, width), np.float32) for _ in range(3)]
    f = tg.compile(w3_mlp.make_mlp_linear())
    f(*d)
    cuda.synchronize()
    exe = f.compiled[0].executable
    dot = exe.driver_dot()
    results["w3_linear_nodes"] = {k: dot.count(k) for k in
                                  ("KERNEL", "MEMSET", "MEMCPY", "CHILD", "EMPTY")}
    results["w3_linear_dot_head"] = dot[:4000]

    def gpu_us(launch, steps=200) -> float:
        start, stop = cuda.event(), cuda.event()
        for _ in range(20):
            launch()
        cuda.synchronize()
        out = []
        for _ in range(7):
            start.record()
            for _ in range(steps):
                launch()
            stop.record()
            stop.synchronize()
            out.append(cuda.event_elapsed_time(start, stop) * 1e3 / steps)
        return statistics.median(out)

    results["w3_gpu_us_per_step"] = {"tracegraph_linear": gpu_us(lambda: f.replay(*d))}
    try:
        import torch
        tx = torch.from_numpy(x).cuda()
        tw = [torch.from_numpy(w).cuda() for w in ws]
        tb = [torch.from_numpy(b).cuda() for b in bs]
        hs = [torch.empty(batch, width, device="cuda") for _ in range(3)]

        def step():
            h = tx
            for w, b, o in zip(tw, tb, hs):
                torch.addmm(b, h, w, out=o)
                o.relu_()
                h = o
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            step()
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            step()
        results["w3_gpu_us_per_step"]["torch_graph"] = gpu_us(g.replay)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as p:
            for _ in range(5):
                g.replay()
            torch.cuda.synchronize()
        results["w3_torch_kernels"] = p.key_averages().table(sort_by="cuda_time_total",
                                                             row_limit=12)
    except Exception as exc:  # noqa: BLE001 - report what broke
        results["w3_torch_error"] = repr(exc)
    try:
        import torch
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as p:
            for _ in range(5):
                f.replay(*d)
            cuda.synchronize()
        results["w3_tracegraph_kernels"] = p.key_averages().table(sort_by="cuda_time_total",
                                                                  row_limit=12)
    except Exception as exc:  # noqa: BLE001
        results["w3_profile_error"] = repr(exc)


def first_replay(results: dict, n: int = 100) -> None:
    """The first replays after a compile against later ones (the executable is uploaded at
    instantiate): a 100-kernel chain, one sync per call."""
    def body(x):
        for _ in range(n):
            axpb[4, 256](x, 1.0001, 0.5)
    f = tg.compile(body)
    x = cuda.to_device(np.ones(1024, np.float32))
    times = []
    for _ in range(60):
        cuda.synchronize()
        t0 = time.perf_counter()
        f(x)
        cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e6)
    results["first_replay_us"] = {"first call (compile + launch)": times[0],
                                  "first replay": times[1], "second replay": times[2],
                                  "median of replays 10-59": statistics.median(times[10:])}


def main() -> None:
    results: dict = {}
    for part in (launches, first_replay, w3):
        try:
            part(results)
        except Exception as exc:  # noqa: BLE001 - one part failing keeps the others
            import traceback
            results[f"{part.__name__}_error"] = traceback.format_exc()
            print(exc)
    for k, v in results.items():
        print(f"== {k}\n{v if isinstance(v, str) else json.dumps(v, indent=1)}")
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as fh:
            json.dump(results, fh, indent=1)


if __name__ == "__main__":
    main()
