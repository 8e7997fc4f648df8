"""What tracegraph refuses, at the user's line with the fix: input dtypes a kernel cannot
take, shapes that overflow, object-dtype graph arrays, Numba's host-side calls that
cannot be graphed, launches a graph cannot replay (launch extensions, device functions,
boolean indexes), a parameter named `stream`; and callbacks that raise or call CUDA are
tracegraph errors on every backend."""
from __future__ import annotations

import numpy as np
import pytest
from numba import cuda
from small_kernels import iscale

import tracegraph as tg

N = 8


GRID, BLOCK = 1, N


@pytest.mark.parametrize("dtype", [object, np.longdouble, "V8"])
def test_unsupported_input_dtypes_name_the_argument(backend, dtype):
    x = np.zeros(N, dtype=dtype)

    def step(x):
        iscale[GRID, BLOCK](x, 2.0)
        return x

    with pytest.raises(tg.TraceError, match="argument x is an array of dtype") as e:
        tg.compile(step, backend=backend)(x)
    assert e.value.fix


@pytest.mark.parametrize("shape, match", [((2**62, 4), "bytes"), ((2**40, 2**40), "bytes"),
                                          (2.5, "integers"), ((4, "a"), "integers")])
def test_impossible_shapes_are_errors_at_the_call(backend, shape, match):
    def step(x):
        tg.empty(shape)
        iscale[GRID, BLOCK](x, 2.0)
        return x

    with pytest.raises(tg.TraceError, match=match) as e:
        tg.compile(step, backend=backend)(np.zeros(N))
    assert e.value.where.startswith(__file__)


def test_an_object_dtype_graph_array_is_refused(backend):
    def step(x):
        tg.empty(4, dtype=object)
        return x

    with pytest.raises(tg.TraceError, match="object"):
        tg.compile(step, backend=backend)(np.zeros(N))


@pytest.mark.parametrize("call", ["copy_to_host", "reduce", "pinned", "element"])
def test_host_side_numba_calls_that_cannot_be_graphed_are_trace_errors(backend, call):
    captured = cuda.to_device(np.ones(N))
    total = cuda.reduce(lambda a, b: a + b)

    def step(x):
        if call == "copy_to_host":
            captured.copy_to_host()
        elif call == "reduce":
            total(x)
        elif call == "pinned":
            cuda.pinned_array(N)
        elif call == "element":
            float(captured[0])
        else:
            captured[0] = 1.0
        iscale[GRID, BLOCK](x, 2.0)
        return x

    with pytest.raises(tg.TraceError) as e:
        tg.compile(step, backend=backend)(cuda.to_device(np.zeros(N)))
    assert e.value.where.startswith(__file__) and e.value.fix


def test_a_raising_callback_is_a_tracegraph_error(backend):
    def boom():
        raise ValueError("from the callback")

    @tg.compile(backend=backend)
    def step(x):
        iscale[GRID, BLOCK](x, 2.0)
        tg.callback(boom, x)
        return x

    with pytest.raises(tg.TracegraphError, match="from the callback"):
        step(np.zeros(N))
        step(np.zeros(N))  # cuda reports a callback's error by the next call at the latest


@cuda.jit(device=True)
def _store_second(*arrays):
    arrays[1][0] = 42.0


def test_a_callback_calling_cuda_is_refused_on_every_backend(backend):
    side = np.zeros(N)

    def calls_cuda():
        iscale[GRID, BLOCK](side, 2.0)

    @tg.compile(backend=backend)
    def step(x):
        iscale[GRID, BLOCK](x, 2.0)
        tg.callback(calls_cuda, x)
        return x

    with pytest.raises(tg.TracegraphError, match="CUDA"):
        step(np.zeros(N))
        step(np.zeros(N))


@pytest.mark.parametrize("case", ["extensions", "device_function", "bool_index"])
def test_launches_a_graph_cannot_replay_are_refused(backend, case):
    @cuda.jit
    def with_extension(a):
        a[0] = 3

    class KeepOnDevice:
        def prepare_args(self, ty, val, **kwargs):
            return ty, val

    with_extension.extensions.append(KeepOnDevice())

    def step(x):
        if case == "extensions":
            with_extension[1, 1](x)
        elif case == "device_function":
            _store_second[1, 1](x, x)
        else:
            iscale[GRID, BLOCK](x[True], 2.0)
        return x

    with pytest.raises(tg.TraceError) as e:
        tg.compile(step, backend=backend)(np.zeros(N))
    assert e.value.where.startswith(__file__) and e.value.fix
