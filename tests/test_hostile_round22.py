"""A twenty-second hostile round, on following the state called functions read (each
case gave a silent wrong answer, or traced on every call, before its fix): an attribute a
called method sets on its own object sharing a name with the traced one's; a container a
called method changes on its own object likewise; state a called method keeps on a
checked path after one change; bound methods and closures of functions kept as values;
a user module named like a standard one; walks the bytecode does not recognise; a
debugger that replaces the trace function mid-trace. Each compares with eager Numba on
a copy of the state."""
from __future__ import annotations

import importlib.util
import sys
import types
import warnings

import numpy as np
import pytest
from eager import with_state_change
from numba import cuda
from small_kernels import iscale

import tracegraph as tg


def _ones():
    return cuda.to_device(np.ones(4))


class Warmup:
    def __init__(self):
        self.t, self.lr = 0, 0.0

    def update(self):  # its own state, named like the trainer's
        self.t += 1
        self.lr = min(1.0, self.t / 10)


class Trainer:
    def __init__(self):
        self.lr, self.warm = 2.0, Warmup()

    def step(self, x):
        self.warm.update()
        iscale[1, 32](x, self.lr)


def test_an_attribute_a_called_method_sets_on_its_own_object(backend):
    with_state_change(backend, Trainer, lambda t: t.step, lambda t: setattr(t, "lr", 3.0))


class Profiler:
    def __init__(self):
        self.stages = []

    def mark(self, name):
        self.stages.append(name)  # its own log


class Pipeline:
    def __init__(self):
        self.stages, self.prof = [2.0], Profiler()

    def run(self, x):
        for s in self.stages:
            iscale[1, 32](x, s)
        self.prof.mark("run")


def test_a_container_a_called_method_changes_on_its_own_object(backend):
    with_state_change(backend, Pipeline, lambda p: p.run, lambda p: p.stages.append(3.0))


class Stats:
    def __init__(self):
        self.calls = 0

    def hit(self):
        self.calls += 1


STATS = Stats()
GAIN = 2.0


def test_state_a_called_method_keeps_does_not_trace_every_call_after_a_change(backend):
    global GAIN

    def step(x):
        STATS.hit()
        iscale[1, 32](x, GAIN)

    f, x = tg.compile(step, backend=backend), _ones()
    before = STATS.calls
    try:
        for k in range(8):
            if k == 2:
                GAIN = 1.0
            f(x)
    finally:
        GAIN = 2.0
    assert STATS.calls - before == 2  # one trace per value of GAIN
    np.testing.assert_allclose(x.copy_to_host(), 4.0)


class Env:
    def __init__(self):
        self.gain = 2.0

    def apply(self, x):
        iscale[1, 32](x, self.gain)


def test_a_bound_method_kept_as_a_value(backend):
    env = Env()
    act = env.apply  # kept as a value: the compiled function never names `env`
    f, x = tg.compile(lambda x: act(x), backend=backend), _ones()
    f(x)
    env.gain = 3.0
    f(x)
    np.testing.assert_allclose(x.copy_to_host(), 6.0)


def _make_act(cfg):
    def act(x):
        iscale[1, 32](x, cfg.gain)
    return act


def _make_getter():
    lr = 2.0

    def get():
        return lr

    def set_(v):
        nonlocal lr
        lr = v
    return get, set_


def test_state_held_in_the_closure_of_a_called_function(backend):
    cfg = types.SimpleNamespace(gain=2.0)
    act = _make_act(cfg)
    get, set_ = _make_getter()

    def step(x):
        act(x)
        iscale[1, 32](x, get())

    f, x = tg.compile(step, backend=backend), _ones()
    f(x)  # * 2 * 2
    cfg.gain = 3.0
    set_(5.0)
    f(x)  # * 3 * 5
    np.testing.assert_allclose(x.copy_to_host(), 60.0)


def test_a_user_module_named_like_a_standard_one(backend, tmp_path):
    (tmp_path / "sched.py").write_text(
        "LR = 2.0\n\ndef lr():\n    return LR\n")
    spec = importlib.util.spec_from_file_location("sched", tmp_path / "sched.py")
    sched = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sched)

    def step(x):
        iscale[1, 32](x, sched.lr())

    f, x = tg.compile(step, backend=backend), _ones()
    f(x)
    sched.LR = 0.5
    f(x)
    np.testing.assert_allclose(x.copy_to_host(), 1.0)


def _run_all(seq, x):
    for s in seq:
        iscale[1, 32](x, s)


A = [2.0, 3.0]
C = [2.0, 3.0]
E = [[2.0], [3.0]]
D = {"a": [2.0], "b": [3.0]}


@pytest.mark.parametrize("case", ["helper", "np.prod", "alias", "dict of lists"])
def test_items_of_a_short_list_however_it_is_walked(backend, case):
    def helper(x):
        _run_all(A, x)

    def prod(x):
        iscale[1, 32](x, float(np.prod(C)))

    def alias(x):
        rows = E
        for row in rows:
            for s in row:
                iscale[1, 32](x, s)

    def dict_of_lists(x):
        for _, row in D.items():
            for s in row:
                iscale[1, 32](x, s)

    fn, lst = {"helper": (helper, A), "np.prod": (prod, C), "alias": (alias, E[0]),
               "dict of lists": (dict_of_lists, D["a"])}[case]
    f, x = tg.compile(fn, backend=backend), _ones()
    f(x)  # * 6
    lst[0] = 0.5
    try:
        f(x)  # * 1.5
    finally:
        lst[0] = 2.0
    np.testing.assert_allclose(x.copy_to_host(), 9.0)


def test_a_debugger_replacing_the_trace_function_mid_trace(backend, monkeypatch):
    import callee_layers as layers

    def step(x):
        sys.settrace(None)  # what pdb's `continue` does at a breakpoint
        layers.scaled(x)

    f, x = tg.compile(step, backend=backend), _ones()
    if hasattr(sys, "monitoring"):  # recorded apart from trace functions: still followed
        with warnings.catch_warnings():
            warnings.filterwarnings("error", message=".*debugger replaced")
            f(x)
        monkeypatch.setattr(layers, "GAIN", 5.0)
        f(x)
        np.testing.assert_allclose(x.copy_to_host(), 10.0)
    else:  # a trace function: said, and the debugger's choice is kept
        with pytest.warns(UserWarning, match="a debugger replaced"):
            f(x)
        assert sys.gettrace() is None


class Norm:
    def __init__(self):
        self.gain = 2.0

    def __call__(self, x):
        iscale[1, 32](x, self.gain)


class Layer:
    def __init__(self):
        self.norm = Norm()

    def forward(self, x):
        self.norm(x)


class Model:
    def __init__(self):
        self.layers = [Layer(), Layer()]

    def forward(self, x):
        for layer in self.layers:
            layer.forward(x)


MODEL = Model()


def test_state_four_steps_down_through_names_the_code_uses(backend):
    def step(x):
        MODEL.forward(x)

    f, x = tg.compile(step, backend=backend), _ones()
    f(x)  # * 4
    MODEL.layers[1].norm.gain = 0.5  # MODEL.layers[1].norm.gain: 4 steps
    try:
        f(x)  # * 1
    finally:
        MODEL.layers[1].norm.gain = 2.0
    np.testing.assert_allclose(x.copy_to_host(), 4.0)
