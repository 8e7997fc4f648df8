"""State read by the functions a traced function calls (a method of an argument or a
global, another module's function, a closure, a bound method kept as a value, four
steps down through names the code uses): a change between calls is followed; what a
called function sets on its own object (or another's) is no guard and traces once; a
debugger's trace function keeps running; library code (and an @njit helper compiled
while tracing) is not the user's."""
from __future__ import annotations

import importlib.util
import sys
import types
import warnings

import callee_layers as layers
import numba
import numpy as np
import pytest
from eager import against_eager, with_state_change
from numba import cuda
from small_kernels import add_to, increment, iscale, mul

import tracegraph as tg
from tracegraph.trace.callees import Callees


@cuda.jit
def twice(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] *= 2


@cuda.jit
def negate(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = -x[i]


def _ones():
    return cuda.to_device(np.ones(4))


class Opt:
    def __init__(self):
        self.lr = 2.0

    def factor(self):
        return self.lr * 1.0


def test_a_method_of_an_argument_reads_an_attribute(backend):
    def step(opt, x):
        iscale[1, 32](x, opt.factor())

    f, opt, x = tg.compile(step, backend=backend), Opt(), _ones()
    f(opt, x)
    opt.lr = 3.0
    f(opt, x)
    np.testing.assert_allclose(x.copy_to_host(), 6.0)


def test_a_method_of_a_global_object_reads_an_attribute(backend):
    opt = Opt()

    def step(x):
        iscale[1, 32](x, opt.factor())

    f, x = tg.compile(step, backend=backend), _ones()
    f(x)
    f(x)
    opt.lr = 0.5
    f(x)
    np.testing.assert_allclose(x.copy_to_host(), 2.0)


def test_another_modules_function_launches_its_global_kernel(backend, monkeypatch):
    def step(x):
        layers.forward(x)

    f, x = tg.compile(step, backend=backend), _ones()
    f(x)
    monkeypatch.setattr(layers, "K", twice)
    f(x)
    np.testing.assert_allclose(x.copy_to_host(), 4.0)
    monkeypatch.setattr(layers, "K", negate)  # a graph for neither kernel so far
    with pytest.raises(tg.SignatureError, match="callee_layers.K"):
        f.replay(x)


def test_another_modules_function_passes_its_global_array(backend, monkeypatch):
    monkeypatch.setattr(layers, "W", _ones())

    def step(x):
        layers.forward_w(x)

    f, x = tg.compile(step, backend=backend), _ones()
    f(x)
    monkeypatch.setattr(layers, "W", cuda.to_device(np.full(4, 10.0)))
    f(x)
    np.testing.assert_allclose(x.copy_to_host(), 12.0)


def test_another_modules_function_walks_its_list_of_kernels(backend, monkeypatch):
    monkeypatch.setattr(layers, "KERNELS", [increment])

    def step(x):
        layers.forward_all(x)

    f, x = tg.compile(step, backend=backend), _ones()
    f(x)
    layers.KERNELS.append(twice)
    f(x)
    np.testing.assert_allclose(x.copy_to_host(), 6.0)  # (1 + 1 + 1) * 2


def test_another_modules_function_reads_its_global_value(backend, monkeypatch):
    def step(x):
        layers.scaled(x)

    f, x = tg.compile(step, backend=backend), _ones()
    f(x)
    monkeypatch.setattr(layers, "GAIN", 5.0)
    f(x)
    np.testing.assert_allclose(x.copy_to_host(), 10.0)


def test_state_a_called_function_keeps_does_not_trace_again(backend, monkeypatch):
    monkeypatch.setattr(layers, "LOG", [])

    def step(x):
        layers.counted(x)

    f, x = tg.compile(step, backend=backend), _ones()
    for _ in range(4):
        f(x)
    np.testing.assert_allclose(x.copy_to_host(), 5.0)
    assert len(f.compiled) == 1
    assert len(layers.LOG) == 1  # its side effect ran once, at the trace


def test_a_debuggers_trace_function_keeps_running(backend):
    seen = []

    def debugger(frame, event, arg):
        seen.append(frame.f_code.co_name)
        return None

    def step(x):
        layers.scaled(x)

    f, x = tg.compile(step, backend=backend), _ones()
    previous = sys.gettrace()
    sys.settrace(debugger)
    try:
        f(x)
        assert sys.gettrace() is debugger
    finally:
        sys.settrace(previous)
    assert "scaled" in seen
    np.testing.assert_allclose(x.copy_to_host(), 2.0)


def test_library_code_is_not_the_users():
    def user(a):
        return np.sum(a)

    with Callees() as callees:
        user(np.ones(3))
    names = {code.co_name for code, _, _ in callees.user_code()}
    assert "user" in names
    assert not any(scope["__name__"].startswith("numpy") for _, scope, _ in callees.user_code())


@pytest.mark.skipif(not hasattr(sys, "monitoring"), reason="sys.monitoring: Python 3.12+")
def test_sys_monitoring_records_each_function_and_frees_its_tool():
    def user(a):
        return a + 1

    with Callees() as callees:
        assert callees._monitored
        for k in range(3):
            user(k)
    assert user.__code__ in callees.found
    with Callees() as again:  # a later trace sees the functions the first turned off
        user(0)
    assert user.__code__ in again.found
    assert sys.monitoring.get_tool(4) is None and sys.monitoring.get_tool(3) is None


class PingPong:
    def __init__(self):
        self.bufs = [cuda.to_device(np.full(4, 1.0)), cuda.to_device(np.full(4, 10.0))]
        self.i = 0

    def cur(self):
        return self.bufs[self.i]


WL = [cuda.to_device(np.full(4, 100.0)), cuda.to_device(np.full(4, 1000.0))]
SEL = 0


def _pick():
    return SEL


def test_arrays_picked_by_called_functions_are_followed(backend):
    global SEL
    from small_kernels import iadd
    pp = PingPong()

    def step(x):
        iadd[1, 32](x, pp.cur())
        iadd[1, 32](x, WL[_pick()])

    f, x = tg.compile(step, backend=backend), cuda.to_device(np.zeros(4))
    f(x)
    pp.i = 1
    f(x)
    SEL = 1
    try:
        f(x)
    finally:
        SEL = 0
    np.testing.assert_allclose(x.copy_to_host(), 101 + 110 + 1010)


N = 8


def _host(a):
    return a.copy_to_host() if hasattr(a, "copy_to_host") else np.asarray(a)


_STORE: list = []


def _make_weights():
    if not _STORE:
        _STORE.append(cuda.to_device(np.full(N, 4.0)))
    return _STORE[0]


def test_an_array_a_called_function_finds_by_its_names_is_followed(backend):
    def body(x):
        out = cuda.device_array_like(x)
        mul[1, N](x, _make_weights(), out)
        return out

    _make_weights()  # made outside the trace, found inside through a call's own global
    f, x = tg.compile(body, backend=backend), cuda.to_device(np.ones(N))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        np.testing.assert_array_equal(_host(f(x)), np.full(N, 4.0))
    saved = _STORE[0]
    _STORE[0] = cuda.to_device(np.full(N, 5.0))
    try:
        np.testing.assert_array_equal(_host(f(x)), np.full(N, 5.0))
    finally:
        _STORE[0] = saved


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


class QNet:
    def __init__(self, scale=2.0, target=True):
        self.scale = scale
        self.target = QNet(scale, False) if target else None

    def sync_from(self, other):
        self.scale = other.scale  # the target's own scale

    def step(self, x):
        iscale[1, 32](x, self.scale)
        self.target.sync_from(self)


def test_a_target_network_of_the_same_class_syncing_its_attribute(backend):
    with_state_change(backend, QNet, lambda q: q.step, lambda q: setattr(q, "scale", 3.0))


class StatsSink:
    def __init__(self):
        self.scale = 0.0


def _record(stats, v):
    stats.scale = v  # a plain function: on the object it is given


class RecordingModel:
    def __init__(self):
        self.scale, self.stats = 2.0, StatsSink()

    def step(self, x):
        iscale[1, 32](x, self.scale)
        _record(self.stats, 1.0)


def test_a_plain_function_setting_an_attribute_of_another_object(backend):
    with_state_change(backend, RecordingModel, lambda m: m.step, lambda m: setattr(m, "scale", 3.0))


def test_an_njit_helper_compiled_while_tracing_is_not_the_function_s_code(
        backend, fixed_device_arrays):
    # Numba's compiler runs other packages' Python (typing hooks): none of it is the
    # traced function's, so none of its state is searched or checked on later calls
    @numba.njit
    def coef(a):
        return a * 2.0 + 1.0

    def step(x):
        add_to[1, 32](x, coef(1.5))
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        f = against_eager(step, backend, [], calls=3)
    assert sum(f.cache_info().misses.values()) == 1
