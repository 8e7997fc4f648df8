"""A fifteenth hostile round, on the guards of round 14 (each case failed before its fix):
a value three steps from its root that picks a kernel; a kernel the function keeps on
`self` each call; an attribute assigned on one object silencing the guard on another's of
the same name; a large config dict; a method name making a same-named dict key a guard."""
from __future__ import annotations

import warnings
from types import SimpleNamespace

import numpy as np
from numba import cuda

import tracegraph as tg


@cuda.jit
def _relu1(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = max(x[i], 0.0) + 1


@cuda.jit
def _neg(x, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = -x[i]


@cuda.jit
def _scale(x, a, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i]


ACTS = {"relu": _relu1, "neg": _neg}
KS = [_relu1, _neg]
CFG = SimpleNamespace(model=SimpleNamespace(head=SimpleNamespace(act="relu")), act=0)
CTX = SimpleNamespace(act=None)
BIG = {f"hp_{i}": float(i) for i in range(300)}
BIG["act"] = "relu"
STATE = {"lr": 0.5, "step": 0}


class Opt:
    def step(self, out):
        pass


OPT = Opt()


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
        ACTS[CFG.model.head.act][1, 8](x, out)
        return out
    _picks(backend, fwd, lambda: setattr(CFG.model.head, "act", "neg"),
           lambda: setattr(CFG.model.head, "act", "relu"))


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


def test_a_kernel_the_function_keeps_on_self_each_call(backend):
    b = Block()
    _picks(backend, b.forward, lambda: BIG.__setitem__("act", "neg"),
           lambda: BIG.__setitem__("act", "relu"))


def test_an_attribute_assigned_elsewhere_does_not_silence_the_guard(backend):
    def step(x):
        CTX.act = CFG.act
        out = cuda.device_array(3)
        KS[CFG.act][1, 8](x, out)
        return out
    _picks(backend, step, lambda: setattr(CFG, "act", 1), lambda: setattr(CFG, "act", 0))


def test_a_key_of_a_large_config_the_code_holds_is_checked(backend):
    def fwd(x):
        out = cuda.device_array(3)
        ACTS[BIG["act"]][1, 8](x, out)
        return out
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        _picks(backend, fwd, lambda: BIG.__setitem__("act", "neg"),
               lambda: BIG.__setitem__("act", "relu"))
    assert any("more than 256 entries" in str(m.message) for m in w)


def test_a_method_name_does_not_make_a_dict_key_a_guard(backend):
    def train(x):
        out = cuda.device_array(3)
        _scale[1, 8](x, STATE["lr"], out)
        OPT.step(out)
        return out
    f = tg.compile(train, backend=backend)
    x = _x()
    for _ in range(5):
        np.testing.assert_array_equal(f(x).copy_to_host(), 0.5 * np.arange(3.0))
        STATE["step"] += 1
    assert len(f.compiled) == 1
    STATE["lr"] = 2.0  # a value the code reads by a key it holds: followed
    try:
        np.testing.assert_array_equal(f(x).copy_to_host(), 2.0 * np.arange(3.0))
    finally:
        STATE["lr"] = 0.5


class Env:
    def __init__(self):
        self.gain = 2.0

    def step(self, x, out):
        _scale[1, 8](x, self.gain, out)


def test_a_method_reading_its_attributes_keeps_the_direct_replay(backend, monkeypatch):
    from tracegraph.signature import arguments
    monkeypatch.setattr(arguments, "_FIXED", arguments._FIXED | {type(_x())})
    env = Env()
    f = tg.compile(env.step, backend=backend)
    x, out = _x(), cuda.device_array(3)
    f(x, out)
    f(x, out)
    if backend == "cuda":
        assert f._hot is not None  # armed: the attribute path is checked on the direct path
    np.testing.assert_array_equal(out.copy_to_host(), 2.0 * np.arange(3.0))
    env.gain = 3.0
    f(x, out)
    np.testing.assert_array_equal(out.copy_to_host(), 3.0 * np.arange(3.0))
    assert len(f.compiled) == 2
