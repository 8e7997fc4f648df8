"""State read by the functions a traced function calls (trace/callees.py): a method of
`self` computing a value, another module's function launching its own global kernel,
passing its own global array, walking its own list of kernels, reading its own value;
state those functions keep themselves does not trace again; a debugger's trace function
keeps running. Each case gave a silent wrong answer before callees were followed."""
from __future__ import annotations

import sys

import numpy as np
import pytest
from numba import cuda

import callee_layers as layers
import tracegraph as tg
from small_kernels import increment, iscale
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
