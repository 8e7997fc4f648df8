"""Zero-size arrays: inputs of size zero replay, and launches over zero elements (ops,
forall) launch nothing and work."""
from __future__ import annotations

import numpy as np
import pytest
from eager import host
from numba import cuda
from small_kernels import iscale

import tracegraph as tg

N = 8


GRID, BLOCK = 1, N


@pytest.mark.parametrize("place", ["host", "device"])
def test_zero_size_inputs_replay(backend, place):
    @tg.compile(backend=backend)
    def step(x, y):
        iscale[GRID, BLOCK](y, 2.0)
        return x, y

    for _ in range(3):
        x, y = np.zeros(0), np.arange(N, dtype=np.float64)
        if place == "device":
            x, y = cuda.to_device(x), cuda.to_device(y)
        a, b = step(x, y)
        assert host(a).shape == (0,)
        np.testing.assert_array_equal(host(b), 2.0 * np.arange(N))


def test_size_zero_batches_launch_nothing_and_work(backend):
    @tg.compile(backend=backend)
    def with_ops(x):
        return 2.0 * x + 1.0

    @tg.compile(backend=backend)
    def with_forall(x):
        iscale.forall(x.size)(x, 2.0)
        return x

    for f in (with_ops, with_forall):
        assert host(f(np.ones(4))).tolist() in ([3.0] * 4, [2.0] * 4)
        assert host(f(np.zeros(0))).shape == (0,)
