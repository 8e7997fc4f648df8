"""Host NumPy arrays the function copies in or reads in Python: copied in through a name
rebound between calls, the new one; refilled in place, followed without tracing again;
read for their layout (len, shape), traced again only when the layout changes; read by
item in Python, traced again; made by the function itself, no guard; large ones rebound,
followed."""
from __future__ import annotations

import numpy as np
import pytest
from numba import cuda
from small_kernels import iadd, iscale, mul

import tracegraph as tg

TABLE = np.full(4, 2.0)


class Layer:
    def __init__(self, name, w):
        self.name, self.w = name, w

    def __eq__(self, other):
        return isinstance(other, Layer) and other.name == self.name

    def __hash__(self):
        return hash(self.name)

    def forward(self, x):
        out = cuda.device_array_like(x)
        mul[1, 8](x, cuda.to_device(self.w), out)
        return out


def test_a_host_array_copied_in_through_a_rebound_name_is_the_new_one(backend):
    global TABLE
    TABLE = np.full(4, 2.0)

    def step(x):
        out = cuda.device_array_like(x)
        mul[1, 8](x, cuda.to_device(TABLE), out)
        return out

    f = tg.compile(step, backend=backend)
    x = cuda.to_device(np.arange(4.0))
    np.testing.assert_array_equal(f(x).copy_to_host(), 2 * np.arange(4.0))
    TABLE = np.full(4, 5.0)
    np.testing.assert_array_equal(f(x).copy_to_host(), 5 * np.arange(4.0))
    TABLE[:] = 7.0  # in place: followed as before
    np.testing.assert_array_equal(f(x).copy_to_host(), 7 * np.arange(4.0))

    fwd = tg.compile(Layer.forward, backend=backend)
    a, c = Layer("dense", np.full(4, 2.0)), Layer("dense", np.full(4, 3.0))
    np.testing.assert_array_equal(fwd(a, x).copy_to_host(), 2 * np.arange(4.0))
    np.testing.assert_array_equal(fwd(c, x).copy_to_host(), 3 * np.arange(4.0))


def test_a_host_array_the_function_makes_is_no_guard(backend):
    def step(x):
        out = cuda.device_array_like(x)
        mul[1, 8](x, cuda.to_device(np.full(4, 3.0)), out)
        return out

    f = tg.compile(step, backend=backend)
    x = cuda.to_device(np.arange(4.0))
    for _ in range(3):
        np.testing.assert_array_equal(f(x).copy_to_host(), 3 * np.arange(4.0))
    assert len(f.compiled) == 1


def _ones():
    return cuda.to_device(np.ones(4))


T4 = np.array([1.0, 1.0, 1.0, 2.0])


HELD = np.ones(4)


def test_a_host_array_only_copied_in_follows_in_place_changes_without_tracing(backend):
    def step(x):
        iadd[1, 32](x, cuda.to_device(HELD))

    f, x = tg.compile(step, backend=backend), _ones()
    f(x)
    HELD[:] = 5.0
    try:
        f(x)
    finally:
        HELD[:] = 1.0
    np.testing.assert_allclose(x.copy_to_host(), 7.0)
    assert len(f.compiled) == 1


H = np.zeros(4)


@pytest.mark.parametrize("how", ["len", "shape", "copied and shape"])
def test_a_host_array_read_for_its_layout_while_the_caller_refills_it(backend, how):
    def step(x):
        if how == "len":
            out = tg.zeros(len(H), np.float64)
        elif how == "shape":
            out = tg.zeros(H.shape, H.dtype)
        else:
            out = tg.zeros(H.shape, H.dtype)
            iadd[1, 32](out, cuda.to_device(H))
        iadd[1, 32](out, x)
        iscale[1, 32](out, 2.0)
        return out

    f, x = tg.compile(step, backend=backend), cuda.to_device(np.ones(4))
    for k in range(5):
        H[:] = k  # a staging buffer the caller fills each step
        got = f(x)
        want = 2.0 * (1.0 + (k if how == "copied and shape" else 0.0))
        np.testing.assert_allclose(got.copy_to_host() if hasattr(got, "copy_to_host")
                                   else got, want)
    assert len(f.compiled) == 1


N = 8


@cuda.jit
def inc(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] += 1


def test_a_host_array_read_for_its_layout_reshaped_in_place_traces_again(
        backend):
    def step(x):
        for _ in range(len(H)):  # (read only for its layout: checked by identity and layout)
            inc[1, 32](x)

    H.shape = (4,)
    f = tg.compile(step, backend=backend)
    for shape, want in [((4,), 4), ((4,), 4), ((2, 2), 2), ((2, 2), 2), ((4,), 4)]:
        H.shape = shape
        H[...] = want  # refilled in place: nothing to trace again for
        x = cuda.to_device(np.zeros(N))
        f(x)
        np.testing.assert_array_equal(x.copy_to_host(), np.full(N, want))
    assert f.cache_info().graphs == 2
    x = cuda.to_device(np.zeros(N))
    for _ in range(3):
        f(x)
    if backend == "cuda":
        assert [e for e in f.compiled if getattr(e.executable, "armed", None)]
    H.shape = (2, 2)
    f(x)
    np.testing.assert_array_equal(x.copy_to_host(), np.full(N, 14.0))
    H.shape = (4,)


COEF = np.array([2.0, 3.0])




BIG = np.full(1 << 14, 2.0)  # 128 KB: its memory is checked, not its contents


def test_a_large_named_numpy_array_rebound(backend):
    global BIG

    def step(x):
        iscale[1, 32](x, BIG[0])

    f, x = tg.compile(step, backend=backend), _ones()
    f(x)
    saved, BIG = BIG, np.full(1 << 14, 3.0)
    try:
        f(x)
    finally:
        BIG = saved
    np.testing.assert_allclose(x.copy_to_host(), 6.0)
