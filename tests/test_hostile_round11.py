"""An eleventh hostile round, on the tenth's fixes (each case failed before its fix): an
array picked by a Python value the code names (`WL[IDX]`, `getattr(e, e.which)`), an array
reachable only through an alias the code never names (now warned about), a compiled bound
method's instance, ping-pong buffers swapped between calls (traced once per order, not per
call), str() of a dynamic scalar, and the message for a dynamic scalar of another type."""
from __future__ import annotations

import numpy as np
import pytest
from numba import cuda
from small_kernels import mul, scale

import tracegraph as tg

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


class Deep:
    pass


def test_an_alias_the_code_never_names_does_not_silence_the_warning(backend):
    m = Deep()
    m.enc = Deep()
    m.enc.layers = [Deep()]
    m.enc.layers[0].a = Deep()
    m.enc.layers[0].a.b = Deep()
    m.enc.layers[0].a.b.c = Deep()
    # tied; the code reads a 7-step path (past the search's bound)
    m.enc.layers[0].a.b.c.w = m.head = _dev(2)

    def body(m, x):
        out = cuda.device_array_like(x)
        mul[1, N](x, m.enc.layers[0].a.b.c.w, out)
        return out

    with pytest.warns(UserWarning, match="neither its arguments nor found"):
        tg.compile(body, backend=backend)(m, cuda.to_device(np.arange(float(N))))


class Model:
    def __init__(self, w):
        self.w = w

    def fwd(self, x):
        out = cuda.device_array_like(x)
        mul[1, N](x, self.w, out)
        return out


def test_a_compiled_bound_method_follows_its_instance(backend):
    m = Model(_dev(2))
    f = tg.compile(m.fwd, backend=backend)
    x = cuda.to_device(np.arange(float(N)))
    f(x)
    m.w = _dev(5)
    np.testing.assert_array_equal(_host(f(x)), np.arange(N) * 5.0)


def test_ping_pong_buffers_swapped_between_calls_trace_once_per_order(backend):
    traces = []

    class S:
        pass

    def body(s):
        traces.append(1)
        scale[1, N](s.cur, 2.0, s.nxt)

    s, ref = S(), np.ones(N)
    s.cur, s.nxt = cuda.to_device(np.ones(N)), cuda.device_array(N)
    f = tg.compile(body, backend=backend)
    for _ in range(10):
        f(s)
        s.cur, s.nxt = s.nxt, s.cur
        ref = ref * 2
    assert len(traces) == 2
    np.testing.assert_array_equal(_host(s.cur), ref)


def test_str_of_a_dynamic_scalar_is_refused(backend):
    def body(x, v):
        scale[1, N](x, v, x)
        return x, f"{v}"

    with pytest.raises(tg.TraceError, match="dynamic scalar v"):
        tg.compile(body, backend=backend, dynamic={"v": "value"})(np.ones(N), 2.0)


def test_a_dynamic_scalar_of_another_type_is_named_on_replay(backend):
    def body(x, v):
        scale[1, N](x, v, x)
        return x

    f = tg.compile(body, backend=backend, dynamic={"v": "value"})
    f(np.ones(N), 2.0)
    with pytest.raises(tg.SignatureError, match="expected a float .a dynamic scalar"):
        f.replay(np.ones(N), np.float64(5.0))


def test_replay_takes_the_graph_of_the_swapped_order_once_traced(backend):
    class S:
        pass

    def body(s):
        scale[1, N](s.cur, 2.0, s.nxt)

    s = S()
    s.cur, s.nxt = cuda.to_device(np.ones(N)), cuda.device_array(N)
    f = tg.compile(body, backend=backend)
    f(s)
    s.cur, s.nxt = s.nxt, s.cur
    f(s)  # traces the swapped order
    s.cur, s.nxt = s.nxt, s.cur
    f.replay(s)
    s.cur, s.nxt = s.nxt, s.cur
    f.replay(s)  # both orders replay without tracing
    np.testing.assert_array_equal(_host(s.nxt), np.full(N, 16.0))
    s.nxt = cuda.device_array(N)  # a third array: replay() cannot follow it
    with pytest.raises(tg.SignatureError, match="holds another device array"):
        f.replay(s)
