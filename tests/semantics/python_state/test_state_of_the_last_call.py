"""The replay loop's memos of the last call: its checked names' state, kept with the
checks that find it (contract/state.py), and its signature, kept with the ids of its
leaves while they all live (signature/call.py). A call of the very same arguments,
containers among them (a model's parameters as a tuple: never the direct replay), reuses
them; every change the full analysis would see is still seen: a rebound global, an
attribute of an argument object, key()'s value, an array whose memory moves under the
same object, a new array that takes a dead one's id."""
from __future__ import annotations

import types

import numpy as np
import pytest
from numba import cuda
from small_kernels import add, mul, scale

import tracegraph as tg
from tracegraph.contract import Contract

N = 16
KERNEL = add
MODE = 1.0


def _params():
    return (cuda.to_device(np.full(N, 2.0)), cuda.to_device(np.full(N, 3.0)))


def test_a_rebound_kernel_global_is_seen_beside_container_arguments(backend):
    global KERNEL
    KERNEL = add

    @tg.compile(backend=backend)
    def f(x, params):
        out = tg.empty_like(x)
        KERNEL[1, N](params[0], params[1], out)
        return out

    x, params = np.zeros(N), _params()
    for _ in range(3):
        np.testing.assert_array_equal(f(x, params), np.full(N, 5.0))
    KERNEL = mul
    try:
        for _ in range(2):
            np.testing.assert_array_equal(f(x, params), np.full(N, 6.0))
    finally:
        KERNEL = add
    np.testing.assert_array_equal(f(x, params), np.full(N, 5.0))
    assert len(f.compiled) == 2


def test_an_attribute_of_an_argument_object_changed_is_seen(backend):
    @tg.compile(backend=backend)
    def f(x, cfg, params):
        out = tg.empty_like(x)
        scale[1, N](params[0], cfg.scale, out)
        return out

    cfg, x, params = types.SimpleNamespace(scale=2.0), np.zeros(N), _params()
    for _ in range(3):
        np.testing.assert_array_equal(f(x, cfg, params), np.full(N, 4.0))
    cfg.scale = 5.0
    np.testing.assert_array_equal(f(x, cfg, params), np.full(N, 10.0))


def test_key_is_read_on_every_call_beside_container_arguments(backend):
    global MODE
    MODE = 1.0

    @tg.compile(backend=backend, key=lambda: MODE)
    def f(x, params):
        out = tg.empty_like(x)
        scale[1, N](params[0], MODE, out)  # (MODE is checked by name too)
        return out

    x, params = np.zeros(N), _params()
    np.testing.assert_array_equal(f(x, params), np.full(N, 2.0))
    np.testing.assert_array_equal(f(x, params), np.full(N, 2.0))
    MODE = 4.0
    try:
        np.testing.assert_array_equal(f(x, params), np.full(N, 8.0))
    finally:
        MODE = 1.0


def test_a_new_array_taking_a_dead_arrays_id_is_described_anew(backend):
    """Each call's array is made anew and the last one freed, so CPython often gives the
    new one the dead one's id: the shapes alternate, and each call must see its own."""
    @tg.compile(backend=backend)
    def f(params):
        out = tg.empty_like(params[0])
        add[1, N](params[0], params[1], out)
        return out

    last, reused = None, 0
    for k in range(12):
        n = N if k % 2 else N // 2
        b = cuda.to_device(np.ones(n))  # (made in the order the last two are freed)
        a = cuda.to_device(np.full(n, float(k)))
        reused += (id(a), id(b)) == last
        last = (id(a), id(b))
        got = f((a, b))
        assert got.shape == (n,)
        np.testing.assert_array_equal(got.copy_to_host() if hasattr(got, "copy_to_host")
                                      else got, np.full(n, k + 1.0))
        del a, b, got
    if not reused:
        pytest.skip("this interpreter gave no new array the id of the one it replaced")


class _MovingArray:
    """An array whose memory can move under the same object and layout (as a PyTorch
    tensor's does on `t.data = other`)."""

    def __init__(self, host: np.ndarray):
        self.host = host

    @property
    def __cuda_array_interface__(self) -> dict:
        return {"shape": self.host.shape, "typestr": self.host.dtype.str,
                "data": (self.host.ctypes.data, False), "strides": None, "version": 3}


MOVING = _MovingArray(np.zeros(4))


def test_an_array_whose_memory_moves_under_the_same_object_changes_the_state():
    def f(x):
        return MOVING, x

    contract = Contract(f, None, "f")
    signature = ("a signature",)
    before = contract.state((1,), {}, signature)
    assert contract.state((1,), {}, signature) == before
    kept = MOVING.host
    MOVING.host = np.zeros(4)  # same object, shape, strides and dtype; other memory
    try:
        assert contract.state((1,), {}, signature) != before
        assert contract.fast_checks((1,)) is None  # the direct replay cannot check it
    finally:
        MOVING.host = kept
