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

    def __init__(self, cfg: Config, libraries: tuple[str, ...] = ("torch", "cupy")):
        """`libraries`: the peers to load (a contender timed in a process of its own loads
        only what it needs)."""
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
            if not cfg.smoke:
                raise SystemExit("the simulator is only for --smoke: unset NUMBA_ENABLE_CUDASIM")
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
        self.torch = self._probe_torch() if "torch" in libraries else None
        self.cupy = self._probe_cupy() if "cupy" in libraries else None
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
            self.notes["torch"] = "needs a GPU"
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
            self.notes["cupy"] = "needs a GPU"
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
            self.notes["nvcc"] = "the C++ graph needs a GPU"
            return None
        path = os.environ.get("NVCC") or shutil.which("nvcc")
        if not path:
            self.notes["nvcc"] = "nvcc not found on PATH: C++ contenders skipped"
        return path

    def _versions(self):
        import platform
        from importlib import metadata
        v = {"python": platform.python_version()}
        for dist in ("numpy", "numba", "numba-cuda", "cuda-core", "cuda-bindings", "torch",
                     "cupy-cuda13x", "cupy-cuda12x", "cupy", "tracegraph"):
            try:
                v[dist] = metadata.version(dist)
            except metadata.PackageNotFoundError:
                pass
        if self.tg is not None:
            v["tracegraph"] = getattr(self.tg, "__version__", v.get("tracegraph", "?"))
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
