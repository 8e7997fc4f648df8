"""W7: host overhead of one ``replay`` call on a one-kernel graph (so the GPU
is never the bottleneck): with unchanged device inputs, and with one changed
pointer (alternating between two input arrays). "no sync": M calls issued back
to back, host time / M, the sync after them not counted. "sync": one call +
cuCtxSynchronize per sample. References: one eager Numba launch, and the
launch of a captured graph through cuda.core, PyTorch and CuPy."""
import gc
import time

import numpy as np
from numba import cuda

from benchmarks.common import Skip, error_row, row, stats
from benchmarks.contenders import capture_numba, tg_compile
from benchmarks.w1_chain import axpb, make_chain, x0

ID = "W7"
TITLE = "Host overhead of one replay call"
PRIMARY = "call_us"
BASELINE = "numba_eager"


def sizes(cfg):
    if cfg.smoke:
        return {"size": 4, "block": 4, "calls": 2, "reps": 2}
    if cfg.mode == "quick":
        return {"size": 1024, "block": 256, "calls": 100, "reps": 20}
    return {"size": 1024, "block": 256, "calls": 100, "reps": 100}


def time_calls(env, call, calls, reps, sync_each):
    """call(i) issues call number i. Returns microseconds per call."""
    for i in range(max(env.cfg.warmup, 2)):
        call(i)
    env.sync()
    pc = time.perf_counter
    out = []
    gc.disable()
    try:
        for _ in range(reps):
            if sync_each:
                for i in range(calls // 10 or 1):
                    t0 = pc(); call(i); env.sync(); out.append((pc() - t0) * 1e6)
            else:
                t0 = pc()
                for i in range(calls):
                    call(i)
                out.append((pc() - t0) * 1e6 / calls)
                env.sync()
    finally:
        gc.enable()
    return stats(out)


def contenders(env, size, block):
    grid = (size + block - 1) // block
    one = make_chain(axpb, 1, grid, block)

    def numba_eager():
        xs = [cuda.to_device(x0(size)) for _ in range(2)]
        return (lambda i: one(xs[0])), (lambda i: one(xs[i & 1])), "one kernel[grid, block](...) launch"

    def tracegraph():
        xs = [cuda.to_device(x0(size)) for _ in range(2)]
        f = tg_compile(env, one)
        f(xs[0])
        env.sync()
        replay = f.replay
        return (lambda i: replay(xs[0])), (lambda i: replay(xs[i & 1])), "f.replay(x), 1-kernel graph"

    def tracegraph_stream():
        """The same replay on a non-blocking stream of the caller's, as CuPy's graph below
        launches: the legacy default stream's launch costs more host time."""
        if env.gpu:
            from cuda.core import Device
            s = Device().create_stream()
        else:  # smoke: the simulator's stream
            s = cuda.stream()
        xs = [cuda.to_device(x0(size)) for _ in range(2)]
        f = tg_compile(env, one)
        f(xs[0], stream=s)
        env.sync()
        replay = f.replay
        return ((lambda i: replay(xs[0], stream=s)), (lambda i: replay(xs[i & 1], stream=s)),
                "f.replay(x, stream=s), s a non-blocking cuda.core stream")

    def numba_capture():
        env.need_gpu("stream capture")
        x = cuda.to_device(x0(size))
        one(x)
        env.sync()
        replay, how = capture_numba(env, lambda s: make_chain(axpb, 1, grid, block, s)(x))
        return (lambda i: replay()), None, how

    def torch_graph():
        torch = env.torch
        if torch is None:
            raise Skip(env.notes.get("torch", "torch unavailable"))
        from benchmarks.contenders import torch_graph as capture
        x = torch.from_numpy(x0(size)).cuda()
        g = capture(torch, lambda: x.mul_(0.999))
        return (lambda i, g=g, x=x: g.replay()), None, "CUDAGraph.replay()"

    def cupy_graph():
        cp = env.cupy
        if cp is None:
            raise Skip(env.notes.get("cupy", "cupy unavailable"))
        from benchmarks.contenders import cupy_graph as capture
        x = cp.asarray(x0(size))
        launch = capture(cp, lambda: cp.multiply(x, np.float32(0.999), out=x))
        return (lambda i, x=x: launch()), None, "Graph.launch(stream)"

    return [("numba_eager", numba_eager), ("tracegraph", tracegraph),
            ("tracegraph_stream", tracegraph_stream), ("numba_capture", numba_capture), ("torch_graph", torch_graph),
            ("cupy_graph", cupy_graph)]


def run(env, native=None):
    s = sizes(env.cfg)
    rows = []
    for name, build in contenders(env, s["size"], s["block"]):
        try:
            same, changed, note = build()
        except Skip as e:
            for case in ("unchanged", "changed pointer"):
                rows.append(row(ID, case, name, status="skipped", note=str(e)))
            continue
        except Exception as e:  # noqa: BLE001
            for case in ("unchanged", "changed pointer"):
                rows.append(error_row(ID, case, name, e))
            continue
        for case, call in (("unchanged", same), ("changed pointer", changed)):
            if call is None:
                rows.append(row(ID, case, name, status="skipped",
                                note="a captured graph has fixed pointers"))
                continue
            try:
                m = {"call_us": time_calls(env, call, s["calls"], s["reps"], False),
                     "call_sync_us": time_calls(env, call, s["calls"], s["reps"], True)}
                rows.append(row(ID, case, name, metrics=m, check="n/a", note=note))
            except Exception as e:  # noqa: BLE001
                rows.append(error_row(ID, case, name, e))
        del same, changed
        gc.collect()
    return rows
