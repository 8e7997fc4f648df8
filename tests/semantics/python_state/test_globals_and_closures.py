"""Device arrays and values the traced function reaches through its globals and closure
variables: rebound between calls, the next call follows them (a dict entry, tied names
untied, a view of a captured global, an overlap that moves); a name a kernel reads
rebound inside the trace, around its launch, or (on the simulator) between calls is
refused."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
from numba import cuda
from small_kernels import copy, iadd, mul

import tracegraph as tg

N = 8


def _host(a):
    return a.copy_to_host() if hasattr(a, "copy_to_host") else np.asarray(a)


W = None


CFG: dict = {}


def test_a_view_of_a_captured_global_follows_its_base(backend):
    global W

    def body(x):
        out = cuda.device_array_like(x[:4])
        mul[1, N](x[:4], W[2:6], out)
        return out

    W = cuda.to_device(np.arange(float(N)))
    f = tg.compile(body, backend=backend)
    x = cuda.to_device(np.ones(N))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # W[2:6] is found through W: no warning
        np.testing.assert_array_equal(_host(f(x)), [2.0, 3.0, 4.0, 5.0])
    W = cuda.to_device(np.arange(float(N)) * 10)
    np.testing.assert_array_equal(_host(f(x)), [20.0, 30.0, 40.0, 50.0])


def _dev(v):
    return cuda.to_device(np.full(N, float(v)))


def _x():
    return cuda.to_device(np.arange(float(N)))


ENC = DEC = None


def test_tied_globals_untied_between_calls(backend):
    global ENC, DEC

    def body(x):
        out = cuda.device_array_like(x)
        mul[1, N](x, ENC, out)
        mul[1, N](out, DEC, out)
        return out

    ENC = DEC = _dev(2)
    f = tg.compile(body, backend=backend)
    x = _x()
    f(x)
    ENC = _dev(5)
    np.testing.assert_array_equal(_host(f(x)), np.arange(N) * 10.0)


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


_REBOUND = None


@cuda.jit
def _add_rebound(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] += _REBOUND[i]


def test_a_global_a_kernel_names_rebound_inside_the_traced_function_is_refused(backend):
    """Numba compiles one array into the kernel (on a GPU the first binding, on the
    simulator the last): the graph cannot give each launch its own. Eager on the simulator
    adds A then B; the graph added B twice."""
    a, b = cuda.to_device(np.full(4, 1.0)), cuda.to_device(np.full(4, 100.0))

    def step(out):
        global _REBOUND
        _REBOUND = a
        _add_rebound[1, 4](out)
        _REBOUND = b
        _add_rebound[1, 4](out)

    with pytest.warns(UserWarning), pytest.raises(tg.TraceError, match="bound to another array"):
        tg.compile(step, backend=backend)(cuda.to_device(np.zeros(4)))


def test_a_closure_variable_a_kernel_names_rebound_inside_the_traced_function_is_refused(
        backend):
    a, b = cuda.to_device(np.full(4, 1.0)), cuda.to_device(np.full(4, 100.0))
    g = a

    @cuda.jit
    def add_g(out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] += g[i]

    def step(out):
        nonlocal g
        g = a
        add_g[1, 4](out)
        g = b
        add_g[1, 4](out)

    with pytest.raises(tg.TraceError, match="bound to another array") as e:
        tg.compile(step, backend=backend)(cuda.to_device(np.zeros(4)))
    assert "as arguments" in e.value.fix


@pytest.mark.parametrize("when", ["rebound before the launch, then back", "after the launch"])
def test_a_global_a_kernel_names_rebound_around_its_launch_is_refused(backend, when):
    """The graph runs the kernel on one array: the name must hold at the end of the trace
    what it held at the launch (a rebinding undone, or made after, changes what runs)."""
    a, b = cuda.to_device(np.full(4, 1.0)), cuda.to_device(np.full(4, 100.0))

    def step(out):
        global _REBOUND
        _REBOUND = a
        if when.startswith("rebound before"):
            _REBOUND = b
            _add_rebound[1, 4](out)
            _REBOUND = a
        else:
            _add_rebound[1, 4](out)
            _REBOUND = b

    with pytest.warns(UserWarning), pytest.raises(tg.TraceError, match="after its launch"):
        tg.compile(step, backend=backend)(cuda.to_device(np.zeros(4)))


def test_a_global_rebound_between_calls_is_refused_on_sim():
    """The simulator reads a kernel's globals when it runs: the graph, ordered for the
    traced array, would race with the new one. (On a GPU the compiled kernel keeps the
    traced array, as eager Numba's does, so cuda replays as eager; the CPU stand-in of
    cuda reads globals as the simulator does, and does not model that.)"""
    global _REBOUND
    first = _REBOUND = cuda.to_device(np.full(4, 1.0))
    f = tg.compile(lambda out: _add_rebound[1, 4](out), backend="sim")
    f(cuda.to_device(np.zeros(4)))
    try:
        _REBOUND = cuda.to_device(np.full(4, 100.0))
        with pytest.raises(tg.TracegraphError, match="bound to another array") as e:
            f(cuda.to_device(np.zeros(4)))
        assert "f.clear()" in e.value.fix
        f.clear()
        out = cuda.to_device(np.zeros(4))
        f(out)
        np.testing.assert_array_equal(out.copy_to_host(), 100.0)
    finally:
        _REBOUND = first
