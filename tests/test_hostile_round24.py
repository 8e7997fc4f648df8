"""A twenty-fourth hostile round, end-to-end programs (each case gave a silent wrong answer
before its fix): a Python function or method the traced code calls, replaced between calls
(a helper redefined, a subclass swapped in, a method rebound on the class or set on the
instance, `__class__` reassigned, a function in a dict); a window of 100 numbers read by
its last item. (A dataclass argument is rebuilt from its init fields: round 25 found that
making its other attributes leaves traced every call for a lock or a timestamp.)"""
from __future__ import annotations

import dataclasses
import threading
from collections import deque

import numpy as np
import pytest
from numba import cuda

import tracegraph as tg
from small_kernels import iscale


def _ones():
    return cuda.to_device(np.ones(4))


def _by2(x):
    iscale[1, 32](x, 2.0)


def _by3(x):
    iscale[1, 32](x, 3.0)


ACT = _by2
ACTS = {"a": _by2}


def test_a_helper_function_rebound(backend, monkeypatch):
    def step(x):
        ACT(x)

    f, x = tg.compile(step, backend=backend), _ones()
    f(x)
    monkeypatch.setitem(globals(), "ACT", _by3)
    f(x)
    np.testing.assert_allclose(x.copy_to_host(), 6.0)
    monkeypatch.setitem(globals(), "ACT", lambda x: iscale[1, 32](x, 5.0))
    with pytest.raises(tg.SignatureError, match="ACT holds another kernel, function or host array"):
        f.replay(x)


def test_a_function_in_a_dict_replaced(backend, monkeypatch):
    def step(x):
        ACTS["a"](x)

    f, x = tg.compile(step, backend=backend), _ones()
    f(x)
    monkeypatch.setitem(ACTS, "a", _by3)
    f(x)
    np.testing.assert_allclose(x.copy_to_host(), 6.0)


class Layer:
    def __init__(self):
        self.gain = 2.0

    def forward(self, x):
        iscale[1, 32](x, self.gain)


class Damped(Layer):
    def forward(self, x):
        iscale[1, 32](x, self.gain * 0.5)


@pytest.mark.parametrize("how", ["subclass", "class attribute", "__class__", "instance"])
def test_a_method_replaced(backend, how, monkeypatch):
    layers = [Layer()]

    def step(x):
        for layer in layers:
            layer.forward(x)

    f, x = tg.compile(step, backend=backend), _ones()
    f(x)  # * 2
    if how == "subclass":
        layers[0] = Damped()
    elif how == "class attribute":
        monkeypatch.setattr(Layer, "forward", Damped.forward)
    elif how == "__class__":
        layers[0].__class__ = Damped
    else:
        layers[0].forward = lambda x: iscale[1, 32](x, 5.0)
    f(x)
    np.testing.assert_allclose(x.copy_to_host(), 10.0 if how == "instance" else 2.0)


@dataclasses.dataclass
class ClipCfg:
    max_norm: float = 1.0

    def __post_init__(self):
        self.eff = self.max_norm * 2.0  # derived from a field: made again on the rebuild
        self.lock = threading.Lock()  # not a field: no part of the signature


def test_a_dataclass_argument_is_rebuilt_from_its_init_fields(backend):
    def step(x, cfg):
        iscale[1, 32](x, cfg.eff)

    f, x = tg.compile(step, backend=backend), _ones()
    for _ in range(3):
        f(x, ClipCfg())  # a new instance each call, a new lock: one graph
    assert len(f.compiled) == 1
    f(x, ClipCfg(max_norm=0.5))  # * 1: another field value, another graph
    np.testing.assert_allclose(x.copy_to_host(), 8.0)


RECENT = deque([1.0] * 100, maxlen=100)


def test_the_last_item_of_a_window_of_100_numbers(backend):
    def step(x):
        iscale[1, 32](x, RECENT[-1])

    f, x = tg.compile(step, backend=backend), _ones()
    f(x)
    RECENT.append(0.5)
    try:
        f(x)
    finally:
        RECENT.append(1.0)
    np.testing.assert_allclose(x.copy_to_host(), 0.5)


class Gen:
    def __init__(self):
        self.temperature, self.top_k = 1.0, 4


def test_a_replay_error_names_what_changed_against_the_closest_graph(backend):
    gen = Gen()

    def step(x):
        iscale[1, 32](x, gen.temperature * gen.top_k)

    f, x = tg.compile(step, backend=backend), _ones()
    f(x)
    gen.temperature = 2.0
    f(x)  # a graph for temperature 2.0 beside the first
    gen.top_k = 8  # only top_k differs from that one
    with pytest.raises(tg.SignatureError, match="top_k holds another value"):
        f.replay(x)
