"""What the examples share: GPU or simulator, result checks, eager-vs-replay timing.

Import it before anything imports Numba: without a usable GPU it switches Numba to
its CUDA simulator (NUMBA_ENABLE_CUDASIM=1), like tests/conftest.py does.
"""
from __future__ import annotations

import os
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _driver_has_gpu() -> bool:
    try:
        from cuda.bindings import driver
        err, = driver.cuInit(0)
        if err != driver.CUresult.CUDA_SUCCESS:
            return False
        err, count = driver.cuDeviceGetCount()
        return err == driver.CUresult.CUDA_SUCCESS and count > 0
    except Exception:  # noqa: BLE001 - no driver library at all
        return False


# Must happen before anything imports numba.
if "NUMBA_ENABLE_CUDASIM" not in os.environ and not _driver_has_gpu():
    os.environ["NUMBA_ENABLE_CUDASIM"] = "1"

try:
    import tracegraph
except ImportError:  # running from a checkout: python examples/NAME.py
    sys.path.insert(0, ROOT)
    import tracegraph  # noqa: F401

import numpy as np
from numba import cuda

from tracegraph import backends

GPU = backends.gpu_usable()
# the eager baseline launches small grids on purpose (the same ones the graph holds)
warnings.filterwarnings("ignore",
                        message=".*Grid size .* will likely result in GPU under-utilization")
if not GPU:
    # the eager baselines launch on Numba's simulator itself: one shared array per block
    from tracegraph import _numba
    _numba.fix_eager_shared_arrays()
    # The simulator runs a Python thread per CUDA thread and polls them at
    # cuda.syncthreads(); a short GIL switch interval makes that ~20x faster.
    sys.setswitchinterval(min(sys.getswitchinterval(), 1e-4))


def where() -> str:
    return "GPU" if GPU else "CUDA simulator (no GPU: small sizes)"


def host(x: Any) -> np.ndarray:
    """A result as a NumPy array (device arrays are copied back)."""
    return np.asarray(x.copy_to_host() if hasattr(x, "copy_to_host") else x)


def check(name: str, got: Any, want: Any, rtol: float = 1e-5, atol: float = 1e-6,
          quiet: bool = False) -> None:
    """Assert `got` matches the NumPy reference `want`; print a PASS line (unless quiet)."""
    got = host(got)
    want = np.asarray(want)
    assert got.shape == want.shape, f"{name}: shape {got.shape}, NumPy gives {want.shape}"
    err = float(np.max(np.abs(got.astype(np.float64) - want))) if got.size else 0.0
    assert np.allclose(got, want, rtol=rtol, atol=atol), \
        f"{name}: differs from NumPy (max abs error {err:.3g})"
    if not quiet:
        print(f"PASS {name}: matches NumPy (max abs error {err:.2g})")


def device(*arrays: np.ndarray) -> list[Any]:
    return [cuda.to_device(np.ascontiguousarray(a)) for a in arrays]


def median_time(step: Callable[[], Any], repeats: int = 200, warmup: int = 10) -> float:
    """Median seconds of step() followed by a device synchronize."""
    for _ in range(warmup):
        step()
    cuda.synchronize()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        step()
        cuda.synchronize()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def report_timing(label: str, fn: Any, args: tuple, repeats: int = 200) -> None:
    """GPU only: median time of the same launches run eagerly by Numba vs one replay."""
    if not GPU:
        return
    eager = EagerPlan(fn, *args)
    t_eager = median_time(eager.run, repeats)
    t_replay = median_time(lambda: fn.replay(*args), repeats)
    print(f"  {label}: eager Numba {t_eager * 1e6:9.1f} us ({eager.launches} launches, one "
          f"at a time)   graph replay {t_replay * 1e6:9.1f} us   "
          f"speedup {t_eager / t_replay:5.1f}x")


# ---------------------------------------------------------------------------
# the eager baseline: the graph's own nodes, launched one at a time by Numba

@cuda.jit
def _memset_bytes(buf, value):
    for i in range(cuda.grid(1), buf.size, cuda.gridsize(1)):
        buf[i] = value


class EagerPlan:
    """Runs a compiled function's Plan node by node with ordinary Numba launches.

    The same kernels, launch configurations and memory as the graph, but each launch
    pays Numba's host overhead: the "eager Numba" baseline. Takes flat positional
    arguments with device arrays (no NumPy arrays, which would add host copies).
    """

    def __init__(self, fn: Any, *args: Any):
        from tracegraph.signature import arguments
        from tracegraph.ir import DEVICE_INPUT, EXTERNAL, View
        from tracegraph.plan import input_bases, replay_table

        plan = fn.lower(*args)
        infos = [arguments.describe(a) for a in args]
        if len(plan.inputs) != len(args) or any(i is not None and i.placement != arguments.DEVICE
                                                for i in infos):
            raise ValueError("EagerPlan takes flat positional arguments and device arrays")
        device_bases, _ = input_bases(replay_table(plan), infos)
        self._keep: list[Any] = []
        base: dict[int, int] = {}
        for b in plan.buffers:
            if b.kind == DEVICE_INPUT:
                base[b.id] = device_bases[b.id]
            elif b.kind == EXTERNAL:
                base[b.id] = arguments.describe(b.external).extent[0]
            else:
                mem = cuda.device_array(max(b.nbytes, 1), np.uint8)
                self._keep.append(mem)
                base[b.id] = mem.__cuda_array_interface__["data"][0]

        def arr(v: View) -> Any:
            desc = {"shape": tuple(v.shape), "strides": tuple(v.strides),
                    "typestr": v.dtype.str, "data": (base[v.buffer] + v.offset, False),
                    "version": 3}
            return cuda.from_cuda_array_interface(desc, owner=None, sync=False)

        def arg(a: Any) -> Any:
            if isinstance(a, View):
                return arr(a)
            if isinstance(a, tuple):
                return tuple(arg(x) for x in a)
            return a

        def as_bytes(v: View, nbytes: int) -> Any:
            return arr(View(v.buffer, v.offset, (nbytes,), (1,), np.dtype(np.uint8)))

        self._steps: list[Callable[[], Any]] = []
        for node in plan.nodes:
            op = node.op
            if node.kind == "kernel":
                launcher = op.data.kernel[op.data.griddim, op.data.blockdim, 0, op.data.sharedmem]
                self._steps.append(_bind(launcher, tuple(arg(a) for a in op.data.args)))
            elif node.kind == "memcpy":
                dst, src = op.data.dst, op.data.src
                self._steps.append(_bind(as_bytes(dst, node.nbytes).copy_to_device,
                                         (as_bytes(src, node.nbytes),)))
            elif node.kind == "memset":
                grid = max(1, min(1024, -(-node.nbytes // 256)))
                self._steps.append(_bind(_memset_bytes[grid, 256],
                                         (as_bytes(op.data.dst, node.nbytes), op.data.value)))
            elif node.kind == "library":  # the library call itself, on the default stream
                self._steps.append(_bind(op.data.fn, (_DEFAULT_STREAM,) +
                                         tuple(arg(a) for a in op.data.args)))
            else:
                raise ValueError(f"EagerPlan does not run {node.kind} nodes")
        self.launches = len(self._steps)
        self._outputs = [arr(o.view) if o.kind == "device" else None for o in plan.outputs]

    def run(self) -> None:
        for step in self._steps:
            step()

    def outputs(self) -> list[Any]:
        """Device arrays of the results (for outputs held in graph memory)."""
        return self._outputs


class _DefaultStream:
    handle = 0  # CUstream 0: the legacy default stream Numba launches on


_DEFAULT_STREAM = _DefaultStream()


def _bind(fn: Callable, args: tuple) -> Callable[[], Any]:
    return lambda: fn(*args)
