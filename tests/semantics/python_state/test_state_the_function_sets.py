"""State the traced function itself sets (a counter, a log, a kernel kept on self each
call, an attribute of another object, a profiler's dict of lists) is no guard: no trace
on every call, and the guard on what it reads still holds; state it reads and sets is
said in a warning."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
from numba import cuda
from small_kernels import iscale

import tracegraph as tg
from small_kernels import negate as _neg
from small_kernels import relu_plus_one as _relu1


@cuda.jit
def _times_two(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = 2 * x[i]


STEPS = 0


class Counter:
    def __init__(self):
        self.calls = 0

    def __eq__(self, other):
        return isinstance(other, Counter)

    def __hash__(self):
        return 2

    def step(self, x, out):
        self.calls += 1
        _times_two[1, 32](x, out)


def test_state_the_function_keeps_is_no_guard(backend):
    """Values the function assigns (a counter) pick nothing: no trace on every call."""
    def counted(x, out):
        global STEPS
        STEPS += 1
        _times_two[1, 32](x, out)

    x, out = cuda.to_device(np.arange(4.0)), cuda.device_array(4)
    f = tg.compile(counted, backend=backend)
    m = tg.compile(Counter.step, backend=backend)
    c = Counter()
    for _ in range(4):
        f(x, out)
        m(c, x, out)
    assert len(f.compiled) == 1 and len(m.compiled) == 1


ACTS = {"relu": _relu1, "neg": _neg}


KS = [_relu1, _neg]


CFG = SimpleNamespace(model=SimpleNamespace(head=SimpleNamespace(act="relu")), act=0)


CTX = SimpleNamespace(act=None)


BIG = {f"hp_{i}": float(i) for i in range(300)}


BIG["act"] = "relu"


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


class Block:
    def __eq__(self, other):
        return isinstance(other, Block)

    def __hash__(self):
        return 3

    def forward(self, x):
        self.act = ACTS[BIG["act"]]
        out = cuda.device_array(3)
        self.act[1, 8](x, out)
        return out


def test_an_attribute_assigned_elsewhere_does_not_silence_the_guard(backend):
    def step(x):
        CTX.act = CFG.act
        out = cuda.device_array(3)
        KS[CFG.act][1, 8](x, out)
        return out
    _picks(backend, step, lambda: setattr(CFG, "act", 1), lambda: setattr(CFG, "act", 0))


@cuda.jit
def _scale_real(x, a, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a.real * x[i]


LOG: list = []


def test_a_container_the_function_changes_itself_is_no_guard(backend):
    def step(x, out):
        LOG.append(1)
        _scale_real[1, 8](x, 2.0, out)
    f = tg.compile(step, backend=backend)
    x, out = cuda.to_device(np.arange(3.0)), cuda.device_array(3)
    for _ in range(3):
        f(x, out)
    assert len(f.compiled) == 1


def _ones():
    return cuda.to_device(np.ones(4))


TIMES: dict = {}


class _Timer:
    def __init__(self, name):
        self.name = name

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        TIMES.setdefault(self.name, []).append(float(len(TIMES.get(self.name, ()))))


def test_a_profiling_helper_appending_to_a_dict_of_lists_traces_once(backend):
    def step(x):
        with _Timer("fwd"):
            iscale[1, 32](x, 2.0)

    f, x = tg.compile(step, backend=backend), _ones()
    for _ in range(6):
        with _Timer("fwd"):  # the caller times the call under the same name
            f(x)
    assert len(f.compiled) == 1
    np.testing.assert_allclose(x.copy_to_host(), 64.0)


class Lazy:
    def __init__(self):
        self.ready = False

    def step(self, x):
        if not self.ready:
            iscale[1, 32](x, 0.0)
            self.ready = True
        iscale[1, 32](x, 2.0)

