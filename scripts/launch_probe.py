"""What the graph-launch probes share (probe_launch_cost.py, probe_launch_matrix.py,
probe_instantiate.py, probe_kernel_node.py): one tiny Numba kernel, its parameters as Numba
passes them, the host-time measurement of back-to-back launches, and a driver-call check."""
from __future__ import annotations

import ctypes
import statistics
import time
from collections.abc import Callable
from typing import Any

from numba import cuda

SIZE, BLOCK = 1024, 256
GRID = (SIZE + BLOCK - 1) // BLOCK


@cuda.jit
def axpb(x, a, b):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = x[i] * a + b


def numba_params(address: int) -> list:
    """axpb's parameters for a float32 array of SIZE at `address`, as Numba flattens them:
    meminfo, parent, nitems, itemsize, data, shape, strides, then a and b."""
    return [ctypes.c_uint64(0), ctypes.c_uint64(0), ctypes.c_uint64(SIZE), ctypes.c_uint64(4),
            ctypes.c_uint64(address), ctypes.c_uint64(SIZE), ctypes.c_uint64(4),
            ctypes.c_float(0.999), ctypes.c_float(0.001)]


def host_us(launch: Callable[[], Any], sync: Callable[[], Any], calls: int = 100,
            reps: int = 30) -> float:
    """Host time per launch: `calls` launches back to back, median of `reps` (warmed up)."""
    for _ in range(200):
        launch()
    sync()
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(calls):
            launch()
        out.append((time.perf_counter() - t0) * 1e6 / calls)
        sync()
    return statistics.median(out)


def ok(result: tuple) -> Any:
    """The value(s) of a cuda.bindings call, raising on an error code."""
    err, *rest = result
    if int(err) != 0:
        raise RuntimeError(f"driver error {err}")
    return rest[0] if len(rest) == 1 else (rest or None)


def compiled_axpb() -> tuple[Any, Any, Any, list]:
    """The current device (made current), a float32 array of SIZE that axpb ran on once,
    axpb compiled for it (a cuda.core Kernel) and its parameters as Numba passes them."""
    import numpy as np
    from cuda.core import Device
    from numba import types

    from tracegraph import _numba
    dev = Device()
    dev.set_current()
    x = cuda.to_device(np.linspace(0, 2, SIZE, dtype=np.float32))
    axpb[GRID, BLOCK](x, np.float32(0.999), np.float32(0.001))
    cuda.synchronize()
    f32 = types.float32
    kernel, _ = _numba.compiled_kernel(axpb, (f32[::1], f32, f32))
    return dev, x, kernel, numba_params(x.device_ctypes_pointer.value)


def per_stream(execs: dict[str, int], streams: dict[str, int]) -> dict[str, tuple]:
    """(launch through tracegraph's C helper, synchronize) of each executable on each
    stream (raw handles), named `exec/stream`."""
    from cuda.bindings import driver
    from tracegraph.backends.cuda._graphlaunch import launch as c_launch
    return {f"{name}/{sname}": (lambda e=e, sp=sp: c_launch(e, sp),
                                lambda sp=sp: driver.cuStreamSynchronize(driver.CUstream(sp)))
            for name, e in execs.items() for sname, sp in streams.items()}


def rounds(found: dict[str, tuple[Callable[[], Any], Callable[[], Any]]],
           out: str | None = None, width: int = 30, sort: bool = False,
           extra: dict | None = None) -> dict[str, list[float]]:
    """host_us of each (launch, sync), two interleaved rounds; printed (sorted by name if
    asked), and written to `out` as JSON when given (with `extra` beside, if any)."""
    import json
    results: dict[str, list[float]] = {}
    for _ in range(2):
        for name, (launch, sync) in found.items():
            results.setdefault(name, []).append(host_us(launch, sync))
    for name, v in (sorted(results.items()) if sort else results.items()):
        print(f"{name:{width}s} {' '.join(f'{u:.2f}' for u in v)} us per launch")
    if out:
        with open(out, "w") as fh:
            json.dump({**extra, "host_us": results} if extra else results, fh, indent=1)
    return results
