"""A kernel or host array a class holds, read through the instance's class (`type(self).k`,
`self.__class__.W`), rebound on the class: the next call runs what eager runs. On a GPU a
kernel a class holds binds to an instance (CUDADispatcher.__get__), so `self.k` is a bound
method, not the kernel (found on the H100, 2026-12-06: the replay kept the old kernel); an
instance attribute of the same name hides the class's from `self.k` altogether."""
from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import tracegraph as tg

N = 4


@cuda.jit
def _times_two(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = 2 * x[i]


@cuda.jit
def _negate(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = -x[i]


@cuda.jit
def _mul(x, w, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = x[i] * w[i]


def _blocks():
    class Plain:
        act = _times_two
        W = np.full(N, 3.0)

        def step(self, x, out):
            type(self).act[1, 32](x, out)

        def scale(self, x, out):
            _mul[1, 32](x, cuda.to_device(self.__class__.W), out)

    class Hiding(Plain):
        def __init__(self):  # instance attributes of the same names hide the class's
            self.act = _negate
            self.W = np.ones(N)
    return Plain, Hiding


@pytest.mark.parametrize("kind", ["plain", "hidden by the instance"])
def test_class_attributes_read_through_the_instance_s_class_follow_rebinding(backend, kind):
    Plain, Hiding = _blocks()
    blk = Plain() if kind == "plain" else Hiding()
    x, out = cuda.to_device(np.arange(float(N))), cuda.device_array(N)
    ar = np.arange(float(N))
    f = tg.compile(blk.step, backend=backend)
    g = tg.compile(blk.scale, backend=backend)
    for _ in range(2):
        f(x, out)
        np.testing.assert_array_equal(out.copy_to_host(), 2 * ar)
        g(x, out)
        np.testing.assert_array_equal(out.copy_to_host(), 3 * ar)
    Plain.act, Plain.W = _negate, np.full(N, 5.0)
    for _ in range(2):
        f(x, out)
        np.testing.assert_array_equal(out.copy_to_host(), -ar)
        g(x, out)
        np.testing.assert_array_equal(out.copy_to_host(), 5 * ar)
    assert f.cache_info().graphs == 2 and g.cache_info().graphs == 2
