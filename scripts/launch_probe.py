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


def rounds(found: dict[str, tuple[Callable[[], Any], Callable[[], Any]]],
           out: str | None = None, width: int = 30) -> dict[str, list[float]]:
    """host_us of each (launch, sync), two interleaved rounds; printed, and written to
    `out` as JSON when given."""
    import json
    results: dict[str, list[float]] = {}
    for _ in range(2):
        for name, (launch, sync) in found.items():
            results.setdefault(name, []).append(host_us(launch, sync))
    for name, v in results.items():
        print(f"{name:{width}s} {' '.join(f'{u:.2f}' for u in v)} us per launch")
    if out:
        with open(out, "w") as fh:
            json.dump(results, fh, indent=1)
    return results
