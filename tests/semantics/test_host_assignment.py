"""Assignment into a device array on the host inside a traced function (`y[:] = x`,
`y[0:n] = math.nan`, `y[...] = host`), into traced and captured device arrays, whole or
sliced, from a scalar, a device array or a host array: recorded as memset, memcpy or
assignment-kernel nodes with their accesses, ordered like any other op, giving eager
Numba's results on every call and replay."""
from __future__ import annotations

import math

import numpy as np
import pytest
from eager import fresh, host, matches_eager, to_device
from numba import cuda
from small_kernels import iscale

import tracegraph as tg

N = 8
CAPTURED = cuda.to_device(np.zeros(N, np.float32))
HOST_VALUES = np.arange(4, dtype=np.float32) + 0.5  # read on every call, as eagerly


def _read(captured):
    """A copy of a captured array, made by assignment (a graph returns no captured array)."""
    out = cuda.device_array(captured.shape, captured.dtype)
    out[:] = captured
    return out


def _x(dtype=np.float32):
    return np.arange(N, dtype=dtype) - 2


def test_rolling_window_pattern(backend, monkeypatch):
    """The pattern of rolling-window code: copy the input, blank the warm-up window."""
    def step(x):
        y = cuda.device_array_like(x)
        y[:] = x
        y[0:3] = math.nan
        iscale[1, N](y, 2.0)
        return y

    matches_eager(step, lambda: to_device((_x(),)), backend, monkeypatch=monkeypatch)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.uint8, np.bool_])
@pytest.mark.parametrize("value", [0, -1, 1.0, 2.5, -0.0, math.nan, True, np.float32(7)])
def test_scalar_fill_converts_as_numba(backend, dtype, value):
    if math.isnan(float(value)) and np.dtype(dtype).kind in "iub":
        pytest.skip("NaN into an integer array: undefined in Numba's kernel")

    def step(x):
        y = cuda.device_array((2, N), dtype)
        y[:, :] = 3  # (numba-cuda's own setitem refuses an Ellipsis key on a GPU)
        y[0] = value
        y[1, 1::3] = value
        return y

    x = cuda.to_device(_x())
    try:
        want = host(step(x))
    except OverflowError:  # NumPy (the simulator) refuses -1 into uint8; a GPU wraps it
        assert tg._numba.SIMULATOR
        pytest.skip("the simulator's eager assignment refuses this value")
    got = host(tg.compile(step, backend=backend)(x))
    assert got.tobytes() == want.tobytes()


def test_memset_where_the_bytes_allow_it(backend):
    def step(x):
        y = cuda.device_array((4, N), np.float32)
        y[:] = 0           # a memset
        y[1] = -1          # not all bytes alike as float32 (-1.0): a kernel
        z = cuda.device_array(N, np.int32)
        z[:] = -1          # 0xFF bytes: a memset
        z[2:] = x[2:]      # a host-side copy of another dtype: a kernel
        return y, z

    prog = tg.compile(step, backend=backend).trace(cuda.to_device(_x(np.float64)))
    kinds = [(op.kind, op.name) for op in prog.ops]
    assert kinds == [("memset", "assign"), ("kernel", "fill_1d"), ("memset", "assign"),
                     ("kernel", "assign_1d")]
    assert all(op.location.startswith(__file__) for op in prog.ops)


def test_device_sources_whole_sliced_broadcast_and_captured(backend, monkeypatch):
    def step(x, m):
        y = cuda.device_array_like(m)
        y[:] = m                  # a memcpy
        y[1] = x                  # a row from another array
        y[:, 2] = x[:3]           # a column, strided
        y[2:, ::2] = x[4:]        # broadcast along the rows
        y[0, ::-1] = x            # reversed
        CAPTURED[2:6] = y[0, 4:]  # into a captured array
        CAPTURED[0:1] = y[2, 1:2]  # one element
        y[:, :] = y[::-1]         # overlapping: NumPy's result
        return y, _read(CAPTURED)

    matches_eager(step, lambda: to_device((_x(), np.arange(3 * N, dtype=np.float32)
                                           .reshape(3, N))), backend, monkeypatch=monkeypatch)


def test_host_sources(backend, monkeypatch):
    def step(x):
        y = cuda.device_array((3, N), np.float32)
        y[:, :] = x                   # a device row broadcast
        y[0, :4] = HOST_VALUES        # a captured host array, copied in on every call
        y[1] = np.arange(N)           # int64 values made here, converted on the device
        y[2, 1:4] = [1.5, 2.5, 3.5]   # a list
        CAPTURED[:] = np.full(N, 9, np.float32)
        return y, _read(CAPTURED)

    f = matches_eager(step, lambda: to_device((_x(),)), backend, monkeypatch=monkeypatch)
    HOST_VALUES[:] += 10  # the graph reads the host array's contents on every replay
    try:
        want = host(step(cuda.to_device(_x()))[0])
        np.testing.assert_array_equal(host(f(cuda.to_device(_x()))[0]), want)
    finally:
        HOST_VALUES[:] -= 10


def test_assignment_is_ordered_by_its_accesses(backend):
    def step(x):
        y = cuda.device_array_like(x)
        y[:] = x              # 0: reads x, writes y
        iscale[1, N](y, 3.0)  # 1: after 0
        x[0:2] = 0            # 2: after 0 (it read x), WAR
        return y

    prog = tg.compile(step, backend=backend).trace(cuda.to_device(_x()))
    assert prog.graph.has_edge(0, 1) and prog.graph.edges[0, 1]["hazard"] == "RAW"
    assert prog.graph.has_edge(0, 2) and prog.graph.edges[0, 2]["hazard"] == "WAR"
    assert not prog.graph.has_edge(1, 2)


def test_assignment_into_numpy_arguments_writes_them_back(backend, monkeypatch):
    def step(x):
        x[1:3] = 5.0
        x[5:] = x[:3]
        return x

    matches_eager(step, fresh(_x()), backend, monkeypatch=monkeypatch)


def test_replays_with_new_arrays(backend):
    def step(x, y):
        y[:] = x
        y[::2] = math.inf
        return y

    f = tg.compile(step, backend=backend)
    for k in range(3):
        x, y = cuda.to_device(_x() * (k + 1)), cuda.device_array(N, np.float32)
        want = host(step(cuda.to_device(_x() * (k + 1)), cuda.device_array(N, np.float32)))
        got = f(x, y) if k < 2 else f.replay(x, y)
        np.testing.assert_array_equal(host(got), want)


@pytest.mark.parametrize("case", ["too_many_axes", "wrong_length", "records", "strings",
                                  "non_contiguous_host", "read_only"])
def test_refused_assignments_name_the_problem(backend, case):
    rec = np.zeros(N, dtype=[("a", np.float32), ("b", np.int32)])

    def step(x, r, ro):
        if case == "too_many_axes":
            x[:] = np.zeros((2, N), np.float32)
        elif case == "wrong_length":
            x[:4] = x
        elif case == "records":
            r[0:2] = 0
        elif case == "strings":
            x[:] = "abc"
        elif case == "non_contiguous_host":
            x[:4] = np.arange(8, dtype=np.float32)[::2]
        else:
            ro[:] = 1.0
        return x

    read_only = _x()
    read_only.flags.writeable = False
    with pytest.raises(tg.TraceError) as e:
        tg.compile(step, backend=backend)(cuda.to_device(_x()), cuda.to_device(rec), read_only)
    assert e.value.where.startswith(__file__) and e.value.fix
