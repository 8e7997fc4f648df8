"""tg.Array, the traced stand-in for a device array, behaves as Numba's device arrays do:
views (a row, an empty slice of a reversed view, a same-itemsize view of a strided
array), a transpose that is a copy, contiguity flags, the device-array methods and the
arguments Numba accepts; augmented assignment is in place; NumPy scalars and ufuncs work.
What it cannot be (an element read on the host, a branch on its values, an attribute
Numba's arrays lack) is a TraceError."""
from __future__ import annotations

import os

import numpy as np
import pytest
from eager import host
from numba import cuda
from small_kernels import fill, increment, iscale, scale

import tracegraph as tg

N = 8


def test_an_element_of_a_traced_array_is_refused(backend):
    def as_scalar(x):
        a = x[0]  # eagerly a NumPy scalar read now
        increment[1, N](x)
        out = cuda.device_array_like(x)
        scale[1, N](x, a, out)
        return out

    def returned(x):
        increment[1, N](x)
        return x[0]

    for body in (as_scalar, returned):
        with pytest.raises(tg.TraceError, match=r"an element of a traced array \(x\[i\]\)"):
            tg.compile(body, backend=backend)(cuda.to_device(np.arange(float(N))))


def test_a_row_of_a_traced_array_is_still_a_view(backend):
    def body(x):
        increment[1, N](x[1])
        return x

    out = tg.compile(body, backend=backend)(np.zeros((2, N)))
    np.testing.assert_array_equal(out, [[0.0] * N, [1.0] * N])


@pytest.mark.parametrize("method", ["view", "ravel", "squeeze", "transpose",
                                    "is_c_contiguous"])
def test_device_array_methods_inside_a_traced_function(backend, method):
    """x.view(np.int64) / x.ravel() / x.squeeze() / x.transpose() / x.is_c_contiguous() in step."""
    calls = {"view": lambda x: x.view(np.float64), "ravel": lambda x: x.ravel(),
             "squeeze": lambda x: x.squeeze(), "transpose": lambda x: x.transpose((0,)),
             "is_c_contiguous": lambda x: x if x.is_c_contiguous() else x[::-1]}

    def step(x):
        fill[1, N](calls[method](x), 5.0)
        return x

    want = step(cuda.to_device(np.zeros(N))).copy_to_host()   # eager Numba: fine
    got = tg.compile(step, backend=backend)(cuda.to_device(np.zeros(N))).copy_to_host()
    np.testing.assert_array_equal(got, want)


def test_a_device_array_attribute_a_traced_array_lacks_is_a_trace_error(backend):
    def step(x):
        return x.gpu_data

    with pytest.raises(tg.TraceError, match="no attribute 'gpu_data'") as e:
        tg.compile(step, backend=backend)(cuda.to_device(np.zeros(N)))
    assert isinstance(e.value, AttributeError)  # hasattr() answers False


@cuda.jit
def fill2d(x, v):
    i, j = cuda.grid(2)
    if i < x.shape[0] and j < x.shape[1]:
        x[i, j] = v


def test_transpose_of_a_device_array_is_a_copy_as_in_numba():
    """fill2d(x.T, 5) in a traced function: Numba on a GPU leaves x alone (x.T is a copy)."""
    def step(x):
        fill2d[(1, 1), (8, 8)](x.transpose(), 5.0)

    x = cuda.to_device(np.zeros((2, 4)))
    tg.compile(step, backend="sim")(x)
    np.testing.assert_array_equal(x.copy_to_host(), np.zeros((2, 4)))


@pytest.mark.parametrize("index", [np.s_[::2], np.s_[::-1]], ids=["strided", "reversed"])
def test_same_itemsize_view_of_a_strided_array(index):
    """x[::2].view(np.int64) of a float64 array (eager Numba: a strided int64 view)."""
    @cuda.jit
    def set_bits(v):
        i = cuda.grid(1)
        if i < v.size:
            v[i] = 1

    def step(x):
        set_bits[1, N](x[index].view(np.int64))

    want = cuda.to_device(np.zeros(N))
    step(want)
    got = cuda.to_device(np.zeros(N))
    tg.compile(step, backend="sim")(got)
    np.testing.assert_array_equal(got.copy_to_host(), want.copy_to_host())


@pytest.mark.parametrize("index,method", [
    (np.s_[1:2], "is_f_contiguous"),
    (np.s_[0:0, ::2], "is_c_contiguous"),
], ids=["row-f", "empty-strided-c"])
def test_contiguity_flags_match_numba(index, method):
    """x[1:2].is_f_contiguous() / x[0:0, ::2].is_c_contiguous() on a traced (4, 6) array."""
    seen = {}

    def step(x):
        seen["got"] = getattr(x[index], method)()
        fill2d[(1, 1), (8, 8)](x, 1.0)

    x = cuda.to_device(np.zeros((4, 6)))
    want = getattr(x[index], method)()       # eager (simulator: NumPy's flags)
    assert want is True                      # also what DeviceNDArray's dummyarray says
    tg.compile(step, backend="sim").trace(x)
    assert seen["got"] == want


@pytest.mark.parametrize("call", [
    lambda x: x.ravel(order="C"),
    lambda x: x.reshape(2, 12, order="C"),
    lambda x: x[1, 2].squeeze(axis=0),
], ids=["ravel-order", "reshape-order", "squeeze-0d-axis"])
def test_array_method_arguments_numba_accepts(call):
    """x.ravel(order='C'), x.reshape(2, 12, order='C'), x[1, 2].squeeze(axis=0) in a trace."""
    @cuda.jit
    def touch(a):
        pass

    def step(x):
        touch[1, 1](call(x))

    try:
        tg.compile(step, backend="sim").trace(cuda.to_device(np.zeros((4, 6))))
    except tg.TraceError as e:  # a clear refusal, at the user's line
        assert os.path.basename(__file__) in (e.where or "")


GRID, BLOCK = 1, N


def test_comparing_a_traced_array_refuses_to_branch(backend):
    def step(x):
        if x == 0:
            iscale[GRID, BLOCK](x, 2.0)
        return x

    with pytest.raises(tg.TraceError, match="Python control flow"):
        tg.compile(step, backend=backend)(np.zeros(N))


def test_augmented_assignment_on_a_traced_array_is_in_place(backend, monkeypatch):
    def step(x):
        x += 1.0
        iscale[GRID, BLOCK](x, 2.0)
        x *= 3.0
        return None

    @tg.compile(backend=backend)
    def traced(x):
        return step(x)

    x = np.arange(N, dtype=np.float64)
    traced(x)
    np.testing.assert_array_equal(x, (np.arange(N) + 1.0) * 6.0)


def test_numpy_scalars_and_ufuncs_on_traced_arrays(backend):
    @tg.compile(backend=backend)
    def step(x):
        return np.float64(2.0) * x, np.float32(1.0) + x, np.float64(3.5) < x, np.exp(x)

    x = np.arange(N, dtype=np.float64)
    got = [host(r) for r in step(x)]
    want = [2.0 * x, 1.0 + x, 3.5 < x, np.exp(x)]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w)


def test_an_empty_slice_of_a_reversed_view(backend):
    @tg.compile(backend=backend)
    def step(x):
        iscale[GRID, BLOCK](x, 2.0)
        iscale[GRID, BLOCK](x[::-1][x.shape[0]:], 3.0)
        return x

    np.testing.assert_array_equal(host(step(np.ones(N))), np.full(N, 2.0))
