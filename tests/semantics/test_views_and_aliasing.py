"""Views of one array written and read in one step, stores through views the analysis must
see (real/imag, flat, ellipsis, *args device functions, global slices, long alias chains),
and results that are views: a returned view of an argument is a view of the caller's
array, one array returned twice is one object, views of a result share its memory."""
from __future__ import annotations

import numpy as np
import pytest
from eager import fresh, host, matches_eager
from numba import cuda
from small_kernels import copy, increment, iscale, scale

import tracegraph as tg

N = 8


@pytest.mark.parametrize("place", ["host", "device"])
def test_several_views_of_one_array_written_and_read_in_one_step(backend, monkeypatch, place):
    def step(a):
        lo, hi, mid = a[:4], a[4:], a[2:6]
        iscale[1, 4](lo, 2.0)
        iscale[1, 4](hi, 3.0)
        out = cuda.device_array(4, np.float64)
        scale[1, 4](mid, 1.0, out)
        # eager Numba takes strided views of device arrays only
        copy[1, 4](out, a[::-2] if place == "device" else a[1:5])
        return out, a[1:7]

    def make():
        a = np.arange(N, dtype=np.float64)
        return (a,) if place == "host" else (cuda.to_device(a),)

    matches_eager(step, make, backend, monkeypatch=monkeypatch)


@cuda.jit
def set_parts(a):
    i = cuda.grid(1)
    if i < a.size:
        a.real[i] = 100 + i
        a.imag[i] = -i


@cuda.jit
def bump_real(values):
    i = cuda.grid(1)
    if i < values.size:
        cuda.atomic.add(values.real, i, 1)


@cuda.jit
def set_flat(a):
    i = cuda.grid(1)
    if i < a.size:
        a.flat[i] = i


@cuda.jit
def set_last_column(a):
    i = cuda.grid(1)
    if i < a.shape[0]:
        a[..., 1][i] = 7.0


@cuda.jit(device=True)
def _store_second(*arrays):
    arrays[1][0] = 42.0


@cuda.jit
def store_through_star_device_function(a, b):
    _store_second(a, b)


ROWS = slice(0, 2)


@cuda.jit
def set_rows(a):
    a[ROWS][0] = 5.0


@cuda.jit
def long_alias_chain(a, out, n):
    v0 = a; v1 = a; v2 = a; v3 = a; v4 = a; v5 = a  # noqa: E702
    v6 = a; v7 = a; v8 = a; v9 = a; v10 = a; v11 = a  # noqa: E702
    for _ in range(n):
        v0[0] = 1.0
        v0 = v1; v1 = v2; v2 = v3; v3 = v4; v4 = v5; v5 = v6  # noqa: E702
        v6 = v7; v7 = v8; v8 = v9; v9 = v10; v10 = v11; v11 = out  # noqa: E702


@pytest.mark.parametrize("case", ["real_imag", "atomic_real", "flat", "ellipsis",
                                  "star_device_function", "global_slice", "alias_chain"])
def test_stores_through_views_the_analysis_must_see(backend, monkeypatch, case):
    def step(a, b):
        if case == "real_imag":
            set_parts[1, 8](a)
        elif case == "atomic_real":
            bump_real[1, 8](a)
        elif case == "flat":
            set_flat[1, 8](b)
        elif case == "ellipsis":
            set_last_column[1, 4](b.reshape(4, 2))
        elif case == "star_device_function":
            store_through_star_device_function[1, 1](b, b[4:])
        elif case == "global_slice":
            set_rows[1, 1](b.reshape(4, 2))
        else:
            long_alias_chain[1, 1](b, b[4:], 14)
        return a, b

    matches_eager(step, fresh(np.arange(8) + 1j * np.arange(8), np.zeros(8)), backend,
                  monkeypatch=monkeypatch)


@pytest.mark.parametrize("place", ["host", "device"])
def test_a_returned_view_of_an_argument_is_a_view_of_the_callers_array(backend, place):
    def step(x):
        increment[1, 16](x)
        return x[2:], x.reshape(2, 4)[:, ::2]

    for _ in range(2):
        x = np.arange(8.0)
        x = cuda.to_device(x) if place == "device" else x
        f = tg.compile(step, backend=backend)
        v, w = f(x)
        f(x)  # eager: the views see the second call's update
        if place == "device":
            v[0:1].copy_to_device(np.array([-7.0]))
        else:
            v[0] = -7.0
        np.testing.assert_array_equal(host(v), [-7.0, 5, 6, 7, 8, 9])
        np.testing.assert_array_equal(host(x)[:4], [2.0, 3, -7, 5])
        np.testing.assert_array_equal(host(w), [[2.0, -7], [6, 8]])
        if place == "host":
            assert np.shares_memory(v, x) and np.shares_memory(w, x)


@pytest.mark.parametrize("place", ["device", "host"])
def test_an_array_returned_twice_is_one_object_twice_and_views_of_a_result_share_it(
        backend, place):
    """As eagerly (`return o, o` hands back one array twice): on both backends; views of
    one result share its memory on both backends, NumPy results too (sim made a copy each,
    and NumPy results were a copy each on both)."""
    @cuda.jit
    def plus_one(x, out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = x[i] + 1

    @tg.compile(backend=backend)
    def f(x):
        o = tg.empty_like(x)
        plus_one[1, 32](x, o)
        return o, o, o[1:]

    x = np.arange(4.0)
    for call in range(2):
        a, b, tail = f(x if place == "host" else cuda.to_device(x))
        assert a is b, call
        np.testing.assert_array_equal(host(tail), x[1:] + 1)
        if place == "device":
            a.copy_to_device(np.zeros(4))
        else:  # NumPy results over one buffer are views of one array, as in NumPy
            a[:] = 0
        np.testing.assert_array_equal(host(tail), [0.0] * 3)
