"""A twelfth hostile round, on the eleventh's fixes (each case failed before its fix): a
graph traced for what captured arrays' names find now that captures none was armed for
direct replays and skipped the check; an overlap graph's variant collided with the
non-overlap one; selectors that are None, an Enum, a config entry or two attributes
deep; a fresh view over the same memory each call; triple buffering; a warning when
moved captured arrays keep tracing; no false warning for `getattr(e, e.which)`."""
from __future__ import annotations

import enum
import warnings

import numpy as np
import pytest
from numba import cuda
from small_kernels import copy, iadd, mul, scale

import tracegraph as tg
from tracegraph.signature import arguments

N = 8


def _dev(v):
    return cuda.to_device(np.full(N, float(v)))


def _host(a):
    return a.copy_to_host() if hasattr(a, "copy_to_host") else np.asarray(a)


W = None
USE_W = True


def test_a_graph_without_captures_traced_for_a_selector_is_never_replayed_directly(
        backend, monkeypatch):
    global W, USE_W
    # device arrays of fixed metadata take the direct replay path, as Numba's do on a GPU
    monkeypatch.setattr(arguments, "_FIXED", arguments._FIXED | {type(_dev(0))})

    def body(x):
        out = cuda.device_array_like(x)
        if USE_W:
            mul[1, N](x, W, out)
        else:
            scale[1, N](x, 1.0, out)
        return out

    W, USE_W = _dev(3), True
    f = tg.compile(body, backend=backend)
    x = cuda.to_device(np.arange(float(N)))
    for flag in (True, False, False, True, True):
        USE_W = flag
        np.testing.assert_array_equal(_host(f(x)), np.arange(N) * (3.0 if flag else 1.0))


G = None


def test_an_overlap_graph_keeps_its_overlap_when_the_name_moves(backend):
    global G

    def body(x):
        out = cuda.device_array_like(x)
        copy[1, N](G, out)
        iadd[1, N](x, x)  # when x is G: after the read
        return out

    f = tg.compile(body, backend=backend)
    a, b = _dev(2), _dev(2)
    for g, same in ((a, False), (a, True), (b, False), (b, True), (b, True)):
        G = g
        G.copy_to_device(np.full(N, 2.0))
        x = G if same else cuda.to_device(np.arange(float(N)))
        np.testing.assert_array_equal(_host(f(x)), np.full(N, 2.0))


class Mode(enum.Enum):
    FAST = 1
    SLOW = 2


WL: list = []
OVERRIDE = None
MODE = Mode.FAST
CFG: dict = {}


class Cfg:
    pass


@pytest.mark.parametrize("case", ["none", "enum", "config entry", "two attributes"])
def test_selectors(backend, case):
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


class Buffers:
    pass


def test_a_fresh_view_over_the_same_memory_and_triple_buffering(backend):
    traces = []

    def body(s):
        traces.append(1)
        mul[1, N](s.cur, s.bias, s.nxt)

    base = _dev(1)
    s = Buffers()
    s.cur, s.nxt, s.spare = _dev(1), _dev(0), _dev(0)
    f = tg.compile(body, backend=backend)
    for _ in range(12):
        s.bias = base[0:N]  # a new view object each call, the same memory
        f(s)
        s.cur, s.nxt, s.spare = s.nxt, s.spare, s.cur
    assert len(traces) == 3


def test_moved_captured_arrays_that_keep_tracing_are_warned_about(backend):
    def body(s):
        scale[1, N](s.cur, 2.0, s.out)

    s = Buffers()
    s.cur = _dev(1)
    f = tg.compile(body, backend=backend)
    with pytest.warns(UserWarning, match="traced again 8 times"):
        for _ in range(10):
            s.out = cuda.device_array(N)  # a new array every call
            f(s)


class Picker:
    def __init__(self):
        self.w_a, self.w_b, self.which = _dev(2), _dev(3), "w_a"


def test_getattr_by_a_named_selector_is_not_warned_about(backend):
    def body(e, x):
        out = cuda.device_array_like(x)
        mul[1, N](x, getattr(e, e.which), out)
        return out

    e, x = Picker(), cuda.to_device(np.arange(float(N)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tg.compile(body, backend=backend)(e, x)
