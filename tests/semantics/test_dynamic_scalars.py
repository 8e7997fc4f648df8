"""Dynamic scalars (`dynamic={"name": "value"}`): patched into the graph, never baked (-0.0
after 0.0 reaches the kernel; a returned one is the call's value); any Python use of
one (==, a dict key, str(), an op's operand) is a TraceError naming it; a replay with
another type names it; a float given to an int64 parameter is a LoweringError."""
from __future__ import annotations

import math

import numpy as np
import pytest
from numba import cuda
from small_kernels import fill, scale

import tracegraph as tg

N = 8


@cuda.jit
def sign_of(a, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = math.copysign(1.0, a)


def _host(a):
    return a.copy_to_host() if hasattr(a, "copy_to_host") else np.asarray(a)


def test_a_dynamic_scalar_compared_with_eq_is_a_trace_error(backend):
    def body(x, step):
        if step == 0:
            fill[1, N](x, 100.0)
        return x

    f = tg.compile(body, backend=backend, dynamic={"step": "value"})
    with pytest.raises(tg.TraceError, match="dynamic scalar step"):
        f(np.zeros(N), 0)
    for op in (lambda s: s != 1, lambda s: s in (0, 1), lambda s: 2 ** s, lambda s: 7 % s,
               lambda s: round(s)):
        def uses(x, step, op=op):
            op(step)
            fill[1, N](x, 1.0)
            return x
        with pytest.raises(tg.TraceError, match="dynamic scalar step"):
            tg.compile(uses, backend=backend, dynamic={"step": "value"})(np.zeros(N), 0)


def test_negative_zero_after_zero_reaches_the_kernel(backend):
    def body(x, a):
        out = cuda.device_array_like(x)
        sign_of[1, N](a, out)
        return out

    f = tg.compile(body, backend=backend, dynamic={"a": "value"})
    x = cuda.to_device(np.zeros(N))
    np.testing.assert_array_equal(_host(f(x, 0.0)), np.ones(N))
    np.testing.assert_array_equal(_host(f(x, -0.0)), -np.ones(N))
    np.testing.assert_array_equal(_host(f(x, 0.0)), np.ones(N))


def _x():
    return cuda.to_device(np.arange(float(N)))


def test_a_dynamic_scalar_as_a_key_is_refused(backend):
    factors = {0: 2.0, 1: 5.0}

    def body(x, mode):
        out = cuda.device_array_like(x)
        scale[1, N](x, factors.get(mode, 1.0), out)
        return out

    with pytest.raises(tg.TraceError, match="dynamic scalar mode"):
        tg.compile(body, backend=backend, dynamic={"mode": "value"})(_x(), 1)

    def length_key(x):
        out = cuda.device_array_like(x)
        scale[1, 16](x, {4: 0.25}.get(tg.length(), 1.0), out)
        return out
    with pytest.raises(tg.TraceError, match="dynamic scalar"):
        tg.compile(length_key, backend=backend, dynamic={"x": 0}, buckets=(8,))(
            np.arange(4.0))


def test_an_op_given_a_dynamic_scalar_says_so(backend):
    def body(x, dt):
        return tg.ops.multiply(x, dt)

    with pytest.raises(tg.TraceError, match="dynamic scalar dt"):
        tg.compile(body, backend=backend, dynamic={"dt": "value"})(np.arange(4.0), 2.0)


def test_a_returned_dynamic_scalar_is_the_call_s_value(backend):
    from small_kernels import fill

    def body(x, step):
        fill[1, 4](x, step)
        return x, step

    f = tg.compile(body, backend=backend, dynamic={"step": "value"})
    assert f(np.zeros(4), 3)[1] == 3
    out, step = f(np.zeros(4), 5)
    assert step == 5 and type(step) is int
    np.testing.assert_array_equal(out, np.full(4, 5.0))

    def length(x):
        fill[1, 16](x, 1.0)
        return x, tg.length()
    g = tg.compile(length, backend=backend, dynamic={"x": 0}, buckets=(8,))
    for n in (5, 8, 3):
        out, got = g(np.zeros(n))
        assert got == n and out.shape == (n,)


def test_str_of_a_dynamic_scalar_is_refused(backend):
    def body(x, v):
        scale[1, N](x, v, x)
        return x, f"{v}"

    with pytest.raises(tg.TraceError, match="dynamic scalar v"):
        tg.compile(body, backend=backend, dynamic={"v": "value"})(np.ones(N), 2.0)


def test_a_dynamic_scalar_of_another_type_is_named_on_replay(backend):
    def body(x, v):
        scale[1, N](x, v, x)
        return x

    f = tg.compile(body, backend=backend, dynamic={"v": "value"})
    f(np.ones(N), 2.0)
    with pytest.raises(tg.SignatureError, match="expected a float .a dynamic scalar"):
        f.replay(np.ones(N), np.float64(5.0))


@cuda.jit("void(float64[:], int64, float64[:])")
def _axpy_int(x, a, y):
    i = cuda.grid(1)
    if i < y.size:
        y[i] = y[i] + a * x[i]


def _int_param(x, y, a):
    _axpy_int[1, N](x, a, y)
    return y


def test_dynamic_float_to_an_int64_parameter_is_a_lowering_error(backend):
    f = tg.compile(_int_param, backend=backend, dynamic={"a": "value"})
    # sim: no error, a truncated to 2 (y == 2); cuda: CudaError "add kernel node
    # returned TypeError" from the graph build
    with pytest.raises(tg.LoweringError):
        f(np.ones(N), np.zeros(N), 2.7)
