"""A launch's configuration is checked where it is written, as a TraceError naming the
launch and the rule: what eager Numba refuses (a float or a fourth dimension, no block)
and what the device cannot run (grid x under 2**31, grid y and z at most 65,535, block x
and y at most 1,024, block z at most 64, 1,024 threads per block, 48 KiB of dynamic shared
memory without an opt-in; every dimension at least 1). CUDA's limits for compute
capability 9.0 on the simulator, the device's own on a GPU."""
from __future__ import annotations

import inspect

import numpy as np
import pytest
from numba import cuda

import tracegraph as tg


@cuda.jit
def fill_one(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = 1.0


def _line_of(marker: str) -> int:
    lines, start = inspect.getsourcelines(_launch)
    return start + next(k for k, text in enumerate(lines) if marker in text)


def _launch(out, grid, block, shared):
    fill_one[grid, block, 0, shared](out)  # the launch
    return out


NUMBA_REFUSES = {
    "float grid": (1.0, 16),
    "float block": (1, 16.0),
    "float in a tuple": ((1, 2.0), 16),
    "numpy float": (np.float32(2), 16),
    "four dimensions": ((1, 1, 1, 1), 16),
    "a string": ("4", 16),
}


@pytest.mark.parametrize("case", sorted(NUMBA_REFUSES))
def test_what_eager_numba_refuses_is_a_trace_error_at_the_launch(backend, case):
    grid, block = NUMBA_REFUSES[case]
    out = cuda.device_array(16, np.float32)
    with pytest.raises((TypeError, ValueError)):  # eager Numba
        _launch(out, grid, block, 0)
    f = tg.compile(_launch, backend=backend)
    with pytest.raises(tg.TraceError, match="eager Numba refuses it") as err:
        f(out, grid, block, 0)
    assert err.value.where == f"{__file__}:{_line_of('# the launch')}"
    assert "fill_one[" in err.value.what and f.compiled == ()


DEVICE_REFUSES = {
    "grid x": ((2**31, 1, 1), 1, 0, "grid x = 2147483648, over the limit of 2,147,483,647"),
    "grid y": ((1, 65536), 1, 0, "grid y = 65536, over the limit of 65,535"),
    "grid z": ((1, 1, 70000), 1, 0, "grid z = 70000, over the limit of 65,535"),
    "block x": (1, 1025, 0, "block x = 1025, over the limit of 1,024"),
    "block y": (1, (1, 2048), 0, "block y = 2048, over the limit of 1,024"),
    "block z": (1, (1, 1, 65), 0, "block z = 65, over the limit of 64"),
    "threads": (1, (32, 32, 2), 0, "2048 threads per block, over the limit of 1,024"),
    "shared memory": (1, 32, 48 * 1024 + 4, "49,156 bytes of dynamic shared memory"),
    "zero grid": (0, 32, 0, "grid x = 0: every dimension is at least 1"),
    "negative block": (1, (32, -1), 0, "block y = -1: every dimension is at least 1"),
    "negative shared": (1, 32, -8, "-8 bytes of dynamic shared memory"),
    "float shared": (1, 32, 16.0, "16.0 bytes of dynamic shared memory"),
}


@pytest.mark.parametrize("case", sorted(DEVICE_REFUSES))
def test_what_the_device_cannot_run_is_a_trace_error_at_the_launch(backend, case):
    grid, block, shared, said = DEVICE_REFUSES[case]
    f = tg.compile(_launch, backend=backend)
    with pytest.raises(tg.TraceError) as err:
        f.trace(cuda.device_array(16, np.float32), grid, block, shared)
    assert said in err.value.what, err.value.what
    assert err.value.where == f"{__file__}:{_line_of('# the launch')}"
    assert err.value.fix


@pytest.mark.parametrize("grid, block, shared", [
    ((2**31 - 1, 65535, 65535), (1024, 1, 1), 0),
    (1, (1, 1024), 0),
    (1, (16, 1, 64), 48 * 1024),
    (np.int64(4), (np.int32(8), 2), np.int64(16)),
])
def test_configurations_at_the_limits_are_recorded(grid, block, shared):
    f = tg.compile(_launch, backend="sim")
    (op,) = f.trace(cuda.device_array(16, np.float32), grid, block, shared).ops
    full = lambda d: tuple(int(x) for x in (d if isinstance(d, tuple) else (d,))) + (1,) * (
        3 - (len(d) if isinstance(d, tuple) else 1))
    assert (op.launch.griddim, op.launch.blockdim, op.launch.sharedmem) == (
        full(grid), full(block), int(shared))


def test_a_good_configuration_runs_as_eagerly(backend):
    f = tg.compile(_launch, backend=backend)
    out = f(cuda.device_array(40, np.float32), (3, 1), (16, 1), 0)
    np.testing.assert_array_equal(out.copy_to_host(), np.ones(40, np.float32))


class _ForeignKernel:
    handle = 0  # what tg.launch takes for a cuda.core Kernel


def test_a_foreign_launch_is_checked_against_the_same_limits():
    @tg.compile(backend="sim")
    def f(out):
        tg.launch(_ForeignKernel(), (1, 65536), 32, out, sim=lambda *_: None)
        return out

    with pytest.raises(tg.TraceError, match="grid y = 65536, over the limit of 65,535"):
        f.trace(cuda.device_array(16, np.float32))
