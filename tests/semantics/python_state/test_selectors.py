"""Python values that pick which array, kernel or host array runs (an index, a config key,
an enum, None, an attribute chain three steps deep, getattr by a held name, the class of
an attribute), changed between calls: the next call runs what eager runs, with no false
warning."""
from __future__ import annotations

import enum
import warnings
from types import SimpleNamespace

import numpy as np
import pytest
from numba import cuda
from small_kernels import add_to, mul, mul_by

import tracegraph as tg
from small_kernels import negate as _neg
from small_kernels import relu_plus_one as _relu1

N = 8


def _dev(v):
    return cuda.to_device(np.full(N, float(v)))


def _host(a):
    return a.copy_to_host() if hasattr(a, "copy_to_host") else np.asarray(a)


WL: list = []


IDX = 0


def test_an_array_picked_by_a_global_index(backend):
    global IDX

    def body(x):
        out = cuda.device_array_like(x)
        mul[1, N](x, WL[IDX], out)
        return out

    WL[:] = [_dev(2), _dev(3)]
    IDX = 0
    f = tg.compile(body, backend=backend)
    x = cuda.to_device(np.arange(float(N)))
    np.testing.assert_array_equal(_host(f(x)), np.arange(N) * 2.0)
    IDX = 1
    np.testing.assert_array_equal(_host(f(x)), np.arange(N) * 3.0)


class Picker:
    def __init__(self):
        self.w_a, self.w_b, self.which = _dev(2), _dev(3), "w_a"


def test_an_array_picked_by_getattr_of_an_attribute(backend):
    def body(e, x):
        out = cuda.device_array_like(x)
        mul[1, N](x, getattr(e, e.which), out)
        return out

    f = tg.compile(body, backend=backend)
    e, x = Picker(), cuda.to_device(np.arange(float(N)))
    f(e, x)
    e.which = "w_b"
    np.testing.assert_array_equal(_host(f(e, x)), np.arange(N) * 3.0)


class Mode(enum.Enum):
    FAST = 1
    SLOW = 2


OVERRIDE = None


MODE = Mode.FAST


CFG: dict = {}


class Cfg:
    pass


@pytest.mark.parametrize("case", ["none", "enum", "config entry", "two attributes"])
def test_an_array_picked_by_none_an_enum_a_config_entry_or_an_attribute_chain(backend, case):
    global OVERRIDE, MODE
    WL[:] = [_dev(2), _dev(3)]
    CFG["layer"] = 0
    model = Cfg()
    model.cfg = Cfg()
    model.cfg.idx = 0

    def body(x, m):
        out = cuda.device_array_like(x)
        if case == "none":
            w = WL[0] if OVERRIDE is None else OVERRIDE
        elif case == "enum":
            w = WL[0] if MODE is Mode.FAST else WL[1]
        elif case == "config entry":
            w = WL[CFG["layer"]]
        else:
            w = WL[m.cfg.idx]
        mul[1, N](x, w, out)
        return out

    OVERRIDE, MODE = None, Mode.FAST
    f = tg.compile(body, backend=backend)
    x = cuda.to_device(np.arange(float(N)))
    np.testing.assert_array_equal(_host(f(x, model)), np.arange(N) * 2.0)
    OVERRIDE, MODE, CFG["layer"], model.cfg.idx = WL[1], Mode.SLOW, 1, 1
    np.testing.assert_array_equal(_host(f(x, model)), np.arange(N) * 3.0)


def test_getattr_by_a_named_selector_is_not_warned_about(backend):
    def body(e, x):
        out = cuda.device_array_like(x)
        mul[1, N](x, getattr(e, e.which), out)
        return out

    e, x = Picker(), cuda.to_device(np.arange(float(N)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tg.compile(body, backend=backend)(e, x)


@cuda.jit
def _times_two(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = 2 * x[i]


@cuda.jit
def _negate(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = -x[i]


# values that pick a kernel or a held host array in a function that captures no device
# array
KS = [_times_two, _negate]


REG = {"a": _times_two, "b": _negate}


KERNEL_CFG = {"act": "a"}


TABLES = [np.full(4, 2.0), np.full(4, 3.0)]


ACTS = {"relu": _relu1, "neg": _neg}


NESTED_CFG = SimpleNamespace(model=SimpleNamespace(head=SimpleNamespace(act="relu")), act=0)


def _x():
    return cuda.to_device(np.arange(3.0))


def _picks(backend, fn, change, undo):
    x = _x()
    f = tg.compile(fn, backend=backend)
    np.testing.assert_array_equal(f(x).copy_to_host(), np.arange(3.0) + 1)
    change()
    try:
        np.testing.assert_array_equal(f(x).copy_to_host(), -np.arange(3.0))
    finally:
        undo()


def test_a_value_three_steps_deep_picks_a_kernel(backend):
    def fwd(x):
        out = cuda.device_array(3)
        ACTS[NESTED_CFG.model.head.act][1, 8](x, out)
        return out
    _picks(backend, fwd, lambda: setattr(NESTED_CFG.model.head, "act", "neg"),
           lambda: setattr(NESTED_CFG.model.head, "act", "relu"))


class _Dense:
    pass


class _Sparse:
    pass


DISPATCH = {_Dense: add_to, _Sparse: mul_by}

