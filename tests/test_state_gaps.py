"""Python state the traced function reads that the name search used to miss (each was a
silent wrong answer, listed as "Not seen" in docs/sharp-edges.md): a kernel or value held
by a functools.partial, a dict entry looked up by a key held in a global (`HP[KEY]`),
the items of lists walked through a local name (`for row in LL: for s in row`), and a
stored view of a dict's keys, an element of a named NumPy array."""
from __future__ import annotations

import functools

import numpy as np
import pytest
from numba import cuda

import tracegraph as tg
from small_kernels import increment, iscale


@cuda.jit
def twice(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] *= 2


def _ones():
    return cuda.to_device(np.ones(4))


def _launch(kernel, x):
    kernel[1, 32](x)


def _scale_by(x, s):
    iscale[1, 32](x, s)


STEP = functools.partial(_launch, increment)
SCALE = functools.partial(_scale_by, s=2.0)
HP = {"lr": 2.0, "wd": 3.0}
KEY = "lr"
ROWS = [[2.0], [3.0]]
TABLE = {"a": 2.0}
NAMES = TABLE.keys()


def test_a_kernel_held_by_a_partial(backend):
    global STEP

    def step(x):
        STEP(x)

    f, x = tg.compile(step, backend=backend), _ones()
    saved = STEP
    try:
        f(x)
        STEP = functools.partial(_launch, twice)
        f(x)
    finally:
        STEP = saved
    np.testing.assert_allclose(x.copy_to_host(), 4.0)


def test_a_value_held_by_a_partial(backend):
    global SCALE

    def step(x):
        SCALE(x)

    f, x = tg.compile(step, backend=backend), _ones()
    saved = SCALE
    try:
        f(x)
        SCALE = functools.partial(_scale_by, s=5.0)
        f(x)
    finally:
        SCALE = saved
    np.testing.assert_allclose(x.copy_to_host(), 10.0)


def test_an_entry_looked_up_by_a_global_key(backend):
    def step(x):
        iscale[1, 32](x, HP[KEY])

    f, x = tg.compile(step, backend=backend), _ones()
    f(x)
    HP["lr"] = 5.0
    try:
        f(x)
    finally:
        HP["lr"] = 2.0
    np.testing.assert_allclose(x.copy_to_host(), 10.0)


def test_items_of_rows_walked_through_a_local_name(backend):
    def step(x):
        for row in ROWS:
            for s in row:
                iscale[1, 32](x, s)

    f, x = tg.compile(step, backend=backend), _ones()
    f(x)  # * 2 * 3
    ROWS[1][0] = 0.5
    try:
        f(x)  # * 2 * 0.5
    finally:
        ROWS[1][0] = 3.0
    np.testing.assert_allclose(x.copy_to_host(), 6.0)


def test_a_stored_view_of_a_dicts_keys(backend):
    def step(x):
        for name in NAMES:
            iscale[1, 32](x, TABLE[name])

    f, x = tg.compile(step, backend=backend), _ones()
    f(x)  # * 2
    TABLE["b"] = 3.0
    try:
        f(x)  # * 2 * 3
    finally:
        del TABLE["b"]
    np.testing.assert_allclose(x.copy_to_host(), 12.0)


COEF = np.array([2.0, 3.0])
HOST_TABLE = np.ones(4)
BIG = np.full(1 << 14, 2.0)  # 128 KB: its memory is checked, not its contents


def test_an_element_of_a_named_numpy_array(backend):
    def step(x):
        iscale[1, 32](x, COEF[0])

    f, x = tg.compile(step, backend=backend), _ones()
    f(x)
    f(x)
    COEF[0] = 5.0
    try:
        f(x)  # eagerly: * 5
        assert len(f.compiled) == 2
        COEF[0] = 7.0
        with pytest.raises(tg.SignatureError, match="COEF holds other contents"):
            f.replay(x)
    finally:
        COEF[0] = 2.0
    np.testing.assert_allclose(x.copy_to_host(), 20.0)


def test_a_named_array_the_graph_copies_in_is_followed_without_tracing_again(backend):
    from small_kernels import iadd

    def step(x):
        iadd[1, 32](x, cuda.to_device(HOST_TABLE))

    f, x = tg.compile(step, backend=backend), _ones()
    f(x)
    HOST_TABLE[:] = 3.0
    try:
        f(x)
    finally:
        HOST_TABLE[:] = 1.0
    np.testing.assert_allclose(x.copy_to_host(), 5.0)
    assert len(f.compiled) == 1


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
