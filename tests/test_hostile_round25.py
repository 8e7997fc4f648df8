"""A twenty-fifth hostile round, on regressions of the broader checks (each traced on
every call before its fix): a host array read only for its layout (`len(H)`, `H.shape`)
while the caller refills it; a dataclass argument holding a lock made in `__post_init__`
(tests/test_hostile_round24.py)."""
from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import tracegraph as tg
from small_kernels import iadd, iscale

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


def test_a_host_array_read_by_item_still_traces_again(backend):
    def step(x):
        iscale[1, 32](x, float(H[0]) + 1.0)

    f, x = tg.compile(step, backend=backend), cuda.to_device(np.ones(4))
    H[:] = 1.0
    f(x)  # * 2
    H[:] = 2.0
    f(x)  # * 3
    H[:] = 0.0
    np.testing.assert_allclose(x.copy_to_host(), 6.0)
