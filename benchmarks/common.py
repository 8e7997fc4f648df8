"""Shared pieces of the harness: run configuration, contender availability,
timing, statistics and result rows.

Timing method (the same for every Python contender): a step is one full eager
sequence or one graph launch. It is timed on the host with
``time.perf_counter`` around ``step(); sync()``, where ``sync`` is
``cuCtxSynchronize`` on the primary context (which Numba, cuda.core, PyTorch
and CuPy all share), after a warm-up, with the garbage collector off. We
report the median and p10/p90 of many such samples ("step_us"), and a
pipelined figure ("step_pipelined_us"): K steps issued back to back, one sync,
divided by K, which hides the fixed sync latency and shows the steady-state
cost per step.
"""
from __future__ import annotations

import dataclasses
import gc
import os
import shutil
import time
import traceback

import numpy as np


class Skip(Exception):
    """A contender cannot run here; the message is the note recorded."""


@dataclasses.dataclass
class Config:
    mode: str              # "full", "quick" or "smoke"
    warmup: int
    iters_min: int
    iters_max: int
    budget_s: float        # rough time budget per (case, contender) measurement
    pipelined_k: int
    pipelined_reps_min: int
    repeats: int           # one-shot measurements (W5)

    @property
    def smoke(self):
        return self.mode == "smoke"

    @staticmethod
    def for_mode(mode):
        if mode == "smoke":
            return Config(mode, warmup=1, iters_min=2, iters_max=2, budget_s=0.0,
                          pipelined_k=2, pipelined_reps_min=2, repeats=2)
        if mode == "quick":
            return Config(mode, warmup=10, iters_min=10, iters_max=60, budget_s=0.4,
                          pipelined_k=10, pipelined_reps_min=3, repeats=3)
        return Config(mode, warmup=20, iters_min=20, iters_max=200, budget_s=1.5,
                      pipelined_k=10, pipelined_reps_min=5, repeats=5)


@dataclasses.dataclass
class Bench:
    """What a contender builder returns: a step to time, and optional extras."""
    step: object                 # callable, runs one step asynchronously
    check: object = None         # callable -> None or a mismatch message; may rerun step
    nodes: int = 0               # kernels per step (adds per-node metrics)
    bytes_moved: int = 0         # host<->device bytes per step (adds GB/s)
    note: str = ""
    keep: object = None          # objects that must outlive the timing


class Env:
    """What is importable and usable on this machine, probed once."""

    def __init__(self, cfg: Config):
        self.cfg = cfg
        from numba import config as nconfig
        from numba import cuda
        self.cuda = cuda
        self.sim = bool(nconfig.ENABLE_CUDASIM)
        self.notes = {}
        self.versions = {}
        self.gpu_name = None
        self.cc = None
        self._sync = cuda.synchronize
        if self.sim:
            self.gpu = False
            self.notes["gpu"] = "Numba CUDA simulator (NUMBA_ENABLE_CUDASIM=1): no GPU, no timing claims"
        elif cfg.smoke:
            raise SystemExit("--smoke needs NUMBA_ENABLE_CUDASIM=1 (set it before Python starts)")
        else:
            if not cuda.is_available():
                raise SystemExit("no usable CUDA GPU; use --smoke with NUMBA_ENABLE_CUDASIM=1")
            self.gpu = True
            dev = cuda.get_current_device()
            name = dev.name
            self.gpu_name = name.decode() if isinstance(name, bytes) else str(name)
            self.cc = tuple(dev.compute_capability)
            cuda.current_context()          # makes the primary context current
            self._sync = _driver_sync() or cuda.synchronize
        self.torch = self._probe_torch()
        self.cupy = self._probe_cupy()
        self.tg, self.tg_error = _probe_tracegraph()
        self.nvcc = self._probe_nvcc()
        self._versions()

    def sync(self):
        self._sync()

    def need_gpu(self, what):
        if not self.gpu:
            raise Skip(f"{what} needs a GPU (smoke mode runs on the simulator)")

    def _probe_torch(self):
        if not self.gpu:
            self.notes["torch"] = "skipped: needs a GPU"
            return None
        try:
            import torch
        except Exception as e:  # noqa: BLE001
            self.notes["torch"] = f"not importable: {e}"
            return None
        if not torch.cuda.is_available():
            self.notes["torch"] = "torch.cuda.is_available() is False"
            return None
        return torch

    def _probe_cupy(self):
        if not self.gpu:
            self.notes["cupy"] = "skipped: needs a GPU"
            return None
        try:
            import cupy
            cupy.cuda.runtime.getDeviceCount()
        except Exception as e:  # noqa: BLE001
            self.notes["cupy"] = f"not importable/usable: {e}"
            return None
        return cupy

    def _probe_nvcc(self):
        if not self.gpu:
            self.notes["nvcc"] = "skipped: the C++ graph needs a GPU"
            return None
        path = os.environ.get("NVCC") or shutil.which("nvcc")
        if not path:
            self.notes["nvcc"] = "nvcc not found on PATH: C++ contenders skipped"
        return path

    def _versions(self):
        import platform
        import numba
        v = {"python": platform.python_version(), "numpy": np.__version__,
             "numba": numba.__version__}
        for mod, name in (("numba.cuda", "numba-cuda"), ("cuda.core", "cuda-core"),
                          ("cuda.bindings", "cuda-bindings")):
            try:
                m = __import__(mod, fromlist=["_"])
                v[name] = getattr(m, "__version__", "?")
            except Exception:  # noqa: BLE001
                pass
        if self.torch is not None:
            v["torch"] = self.torch.__version__
        if self.cupy is not None:
            v["cupy"] = self.cupy.__version__
        if self.tg is not None:
            v["tracegraph"] = getattr(self.tg, "__version__", "?")
        self.versions = v


def _driver_sync():
    """cuCtxSynchronize through cuda.bindings: cheaper than numba's wrapper."""
    try:
        from cuda.bindings import driver as drv
    except Exception:  # noqa: BLE001
        return None
    fn = drv.cuCtxSynchronize
    ok = drv.CUresult.CUDA_SUCCESS
    if fn()[0] != ok:
        return None

    def sync():
        err = fn()[0]
        if err != ok:
            raise RuntimeError(f"cuCtxSynchronize failed: {err!r}")
    return sync


def _probe_tracegraph():
    try:
        import tracegraph
        return tracegraph, None
    except Exception as e:  # noqa: BLE001
        return None, f"{type(e).__name__}: {e}"


# ---------------------------------------------------------------- statistics

def stats(samples):
    a = np.asarray(samples, dtype=np.float64)
    return {"median": float(np.median(a)), "p10": float(np.percentile(a, 10)),
            "p90": float(np.percentile(a, 90)), "n": int(a.size)}


def _clamp(v, lo, hi):
    return max(lo, min(hi, v))


def measure(step, sync, cfg: Config):
    """Time ``step`` (asynchronous) per step with a sync, and pipelined."""
    for _ in range(cfg.warmup):
        step()
    sync()
    pc = time.perf_counter
    gc_was = gc.isenabled()
    gc.disable()
    try:
        t0 = pc(); step(); sync(); est = max(pc() - t0, 1e-6)
        iters = _clamp(int(cfg.budget_s / 2 / est), cfg.iters_min, cfg.iters_max)
        samples = []
        for _ in range(iters):
            t0 = pc(); step(); sync(); samples.append(pc() - t0)
        k = cfg.pipelined_k
        reps = _clamp(int(cfg.budget_s / 2 / (est * k)), cfg.pipelined_reps_min,
                      max(cfg.pipelined_reps_min, cfg.iters_max // k))
        piped = []
        for _ in range(reps):
            t0 = pc()
            for _ in range(k):
                step()
            sync()
            piped.append((pc() - t0) / k)
    finally:
        if gc_was:
            gc.enable()
    return {"step_us": stats(np.array(samples) * 1e6),
            "step_pipelined_us": stats(np.array(piped) * 1e6)}


def scale_metric(m, factor):
    return {k: (v * factor if k != "n" else v) for k, v in m.items()}


# ---------------------------------------------------------------- result rows

def row(workload, case, contender, status="ok", metrics=None, note="", **extra):
    r = {"workload": workload, "case": case, "contender": contender,
         "status": status, "metrics": metrics or {}, "note": note}
    r.update(extra)
    return r


def error_row(workload, case, contender, exc):
    tb = traceback.format_exception(type(exc), exc, exc.__traceback__)
    return row(workload, case, contender, status="error",
               note=f"{type(exc).__name__}: {exc}"[:500],
               traceback="".join(tb)[-3000:])


def run_bench(env, workload, case, contender, builder):
    """Build a contender, time it, check it; never raises."""
    try:
        bench = builder()
    except Skip as s:
        return row(workload, case, contender, status="skipped", note=str(s))
    except Exception as e:  # noqa: BLE001
        return error_row(workload, case, contender, e)
    try:
        metrics = measure(bench.step, env.sync, env.cfg)
        if bench.nodes:
            metrics["per_node_us"] = scale_metric(metrics["step_pipelined_us"], 1 / bench.nodes)
            metrics["per_node_sync_us"] = scale_metric(metrics["step_us"], 1 / bench.nodes)
        if bench.bytes_moved:
            med = metrics["step_us"]["median"]
            metrics["gbps"] = {"median": bench.bytes_moved / med / 1e3, "n": metrics["step_us"]["n"]}
        check = "n/a"
        if bench.check is not None:
            msg = bench.check()
            env.sync()
            check = "ok" if not msg else f"MISMATCH: {msg}"
        return row(workload, case, contender, metrics=metrics, note=bench.note, check=check)
    except Exception as e:  # noqa: BLE001
        return error_row(workload, case, contender, e)
    finally:
        del bench
        gc.collect()


def compare(got, want, rtol=1e-4, atol=1e-5):
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return f"shape {got.shape} != {want.shape}"
    if not np.allclose(got, want, rtol=rtol, atol=atol):
        err = np.max(np.abs(got.astype(np.float64) - want))
        return f"max abs error {err:.3g}"
    return None


# ---------------------------------------------------------------- contenders

def tracegraph_bench(env, fn, args, nodes=0, check=None, note=""):
    """tg.compile(fn); the first call compiles; the step is ``replay``."""
    tg = env.tg
    if tg is None:
        raise Skip(f"import tracegraph failed: {env.tg_error}")
    f = tg.compile(fn)
    f(*args)
    env.sync()
    return Bench(step=lambda: f.replay(*args), nodes=nodes,
                 check=(lambda: check(f)) if check else None, note=note, keep=f)


def capture_numba(env, launch):
    """Stream-capture the Numba launches issued by ``launch(stream)`` into a
    CUDA graph; return (replay, how).

    First choice: cuda.core's GraphBuilder (numba-cuda >= 0.30 accepts it as
    the stream of ``kernel[grid, block, stream]``; tested upstream in
    numba-cuda's test_cuda_driver.py). Fallback: cuStreamBeginCapture /
    cuStreamEndCapture / cuGraphInstantiate / cuGraphLaunch via cuda.bindings
    on a Numba stream. Kernels must have run once eagerly before (JIT done).
    """
    env.need_gpu("stream capture")
    errors = []
    try:
        from cuda.core import Device
        dev = Device()
        dev.set_current()
        stream = dev.create_stream()
        gb = dev.create_graph_builder()
        gb.begin_building("relaxed")
        try:
            launch(gb)
        finally:
            gb.end_building()
        graph = gb.complete()

        def replay():
            graph.launch(stream)
        replay.keep = (dev, stream, gb, graph)
        return replay, "cuda.core GraphBuilder capture, Graph.launch"
    except Exception as e:  # noqa: BLE001
        errors.append(f"cuda.core: {type(e).__name__}: {e}")
    try:
        from cuda.bindings import driver as drv

        def ck(res):
            err = res[0]
            if err != drv.CUresult.CUDA_SUCCESS:
                raise RuntimeError(repr(err))
            return res[1] if len(res) > 1 else None
        ns = env.cuda.stream()
        h = drv.CUstream(int(ns.handle))
        ck(drv.cuStreamBeginCapture(h, drv.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_RELAXED))
        try:
            launch(ns)
        finally:
            graph = ck(drv.cuStreamEndCapture(h))
        gexec = ck(drv.cuGraphInstantiate(graph, 0))
        launch_fn = drv.cuGraphLaunch

        def replay():
            launch_fn(gexec, h)
        replay.keep = (ns, h, graph, gexec)
        return replay, "cuda.bindings cuStreamBeginCapture, cuGraphLaunch (" + "; ".join(errors) + ")"
    except Exception as e:  # noqa: BLE001
        errors.append(f"cuda.bindings: {type(e).__name__}: {e}")
    raise RuntimeError("stream capture failed: " + " | ".join(errors))


def torch_graph(torch, step, warmup=3):
    """Capture ``step`` with torch.cuda.graph after a side-stream warm-up."""
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(warmup):
            step()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        step()
    torch.cuda.synchronize()
    return g


def cupy_graph(cp, step, warmup=3):
    """Capture ``step`` on a non-blocking CuPy stream; return a launcher."""
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        for _ in range(warmup):     # JIT + memory-pool warm-up on this stream
            step()
        s.synchronize()
        s.begin_capture()
        try:
            step()
        finally:
            g = s.end_capture()
    g.upload(s)
    s.synchronize()

    def launch():
        g.launch(s)
    launch.keep = (s, g)
    return launch
