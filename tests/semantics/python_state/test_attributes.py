"""Attributes of the function's arguments, globals and bound instance, changed between
calls: device arrays (through an alias, a property, a view of a view, a __getattr__ that
raises KeyError, buffers swapped ping-pong or three ways, a fresh view each call) and
values (slices, ranges, value-like objects, a class pattern's keyword attribute) are
followed; moved arrays that keep tracing are warned about; a replay names what changed;
weights made lazily while tracing are said, then a clear error."""
from __future__ import annotations

import dataclasses
import datetime
import fractions
import functools
import types
from typing import NamedTuple

import numpy as np
import pytest
from eager import against_eager
from numba import cuda
from small_kernels import add_to, iscale, mul, scale

import tracegraph as tg

N = 8


class Model:
    def __init__(self, w):
        self.w = w


def _host(a):
    return a.copy_to_host() if hasattr(a, "copy_to_host") else np.asarray(a)


class Layer:
    """Equal by name: two layers of other weights are one static argument value."""

    def __init__(self, name, w):
        self.name, self.w = name, w

    def __eq__(self, other):
        return isinstance(other, Layer) and other.name == self.name

    def __hash__(self):
        return hash(self.name)

    @tg.compile
    def forward(self, x):
        out = cuda.device_array_like(x)
        mul[1, N](x, self.w, out)
        return out


def test_equal_instances_with_other_weights_use_their_own():
    a = Layer("dense", cuda.to_device(np.full(N, 2.0)))
    b = Layer("dense", cuda.to_device(np.full(N, 3.0)))
    x = cuda.to_device(np.arange(float(N)))
    np.testing.assert_array_equal(_host(a.forward(x)), np.arange(N) * 2.0)
    np.testing.assert_array_equal(_host(b.forward(x)), np.arange(N) * 3.0)
    np.testing.assert_array_equal(_host(a.forward(x)), np.arange(N) * 2.0)


def _dev(v):
    return cuda.to_device(np.full(N, float(v)))


def _x():
    return cuda.to_device(np.arange(float(N)))


class TiedModel:
    def __init__(self, w):
        self.initial = w  # an alias the kernel does not read
        self.w = w


def _body(model, x):
    out = cuda.device_array_like(x)
    mul[1, N](x, model.w, out)
    return out


def test_an_alias_does_not_hide_the_path_the_code_reads(backend):
    f = tg.compile(_body, backend=backend)
    m, x = TiedModel(_dev(2)), _x()
    f(m, x)
    m.w = _dev(5)
    np.testing.assert_array_equal(_host(f(m, x)), np.arange(N) * 5.0)


class PingPong:
    def __init__(self, a, b):
        self.bufs, self.i = [a, b], 0

    @property
    def cur(self):
        return self.bufs[self.i]


def test_an_array_chosen_by_a_property(backend):
    def body(pp, x):
        out = cuda.device_array_like(x)
        mul[1, N](x, pp.cur, out)
        return out

    f = tg.compile(body, backend=backend)
    pp, x = PingPong(_dev(2), _dev(5)), _x()
    f(pp, x)
    pp.i = 1
    np.testing.assert_array_equal(_host(f(pp, x)), np.arange(N) * 5.0)


def test_a_view_of_a_view_attribute(backend):
    class Packed:
        def __init__(self):
            self.flat = cuda.to_device(np.full(2 * N, 2.0))
            self.w = self.flat[N:]

    def body(m, x):
        out = cuda.device_array_like(x[:4])
        mul[1, N](x[:4], m.w[2:6], out)
        return out

    f = tg.compile(body, backend=backend)
    m, x = Packed(), _x()
    f(m, x)
    m.w = _dev(5)
    np.testing.assert_array_equal(_host(f(m, x)), np.arange(4) * 5.0)


class Config:
    def __init__(self, **kw):
        self._d = kw

    def __getattr__(self, name):
        return self._d[name]  # KeyError, not AttributeError, for a missing name


CFG = None


def test_an_object_whose_getattr_raises_keyerror(backend):
    global CFG

    def body(x):
        out = cuda.device_array_like(x)
        mul[1, N](x, CFG.w, out)
        return out

    CFG = Config(w=_dev(2))
    f = tg.compile(body, backend=backend)
    x = _x()
    np.testing.assert_array_equal(_host(f(x)), np.arange(N) * 2.0)
    CFG = Config(w=_dev(5))
    np.testing.assert_array_equal(_host(f(x)), np.arange(N) * 5.0)


class FwdModel:
    def __init__(self, w):
        self.w = w

    def fwd(self, x):
        out = cuda.device_array_like(x)
        mul[1, N](x, self.w, out)
        return out


def test_a_compiled_bound_method_follows_its_instance(backend):
    m = FwdModel(_dev(2))
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


def _ones():
    return cuda.to_device(np.ones(4))


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


W = cuda.to_device(np.full(N, 2.0))


class Lazy:
    def __init__(self):
        self._W = None

    @property
    def W(self):
        if self._W is None:  # made on first use: while the first call traces
            self._W = cuda.to_device(np.full(N, 2.0))
        return self._W

    @functools.cached_property
    def V(self):
        return cuda.to_device(np.full(N, 3.0))


@pytest.mark.parametrize("first, then", [
    (b"fast", b"slow"),
    (fractions.Fraction(1, 2), fractions.Fraction(3, 2)),
    (datetime.timedelta(seconds=2), datetime.timedelta(seconds=5)),
], ids=["bytes", "fraction", "timedelta"])
def test_a_value_like_object_held_as_an_attribute_is_seen_changed(backend, first, then):
    class Model:
        pass
    m = Model()
    m.v = first

    def step(x):
        v = m.v
        scale = 2.0 if v == b"fast" else 5.0 if isinstance(v, bytes) else \
            v.total_seconds() if isinstance(v, datetime.timedelta) else float(v)
        add_to[1, 32](x, scale)
    against_eager(step, backend, [("changed", lambda: setattr(m, "v", then))])


class _SlotCfg:
    """A slotted config served from a dict: a miss raises KeyError (getattr(obj,
    "__dict__", None) then raises too, and the search skips the object)."""
    __slots__ = ("_d",)

    def __init__(self, **kw):
        object.__setattr__(self, "_d", dict(kw))

    def __getattr__(self, k):
        return self._d[k]

    def __setattr__(self, k, v):
        self._d[k] = v


def test_a_value_served_by_a_getattr_that_raises_keyerror_is_seen_changed(backend):
    cfg = _SlotCfg(scale=2.0)

    def step(x):
        add_to[1, 32](x, cfg.scale)
    against_eager(step, backend, [("changed", lambda: setattr(cfg, "scale", 5.0))])


class _MatchCfg:
    def __init__(self):
        self.scale = 2.0



class _Opts:
    def __init__(self, relax):
        self.relax = relax


@dataclasses.dataclass
class _Problem:
    x: object
    opts: _Opts


class _Params(NamedTuple):
    w: object
    SCALE = 2.0  # a class attribute, not a field


def test_chains_through_a_container_argument_into_an_object_or_a_class_attribute(backend):
    """prob.opts.relax (an object leaf's attribute) and p.SCALE (a namedtuple's class
    attribute) leave the structure the signature flattens: checked as names are."""
    @tg.compile(backend=backend)
    def solve(prob, p):
        out = tg.empty_like(prob.x)
        scale[1, N](prob.x, prob.opts.relax * p.SCALE, out)
        return out

    x = cuda.to_device(np.arange(N, dtype=np.float64))
    prob, p = _Problem(x, _Opts(0.5)), _Params(x)
    try:
        np.testing.assert_array_equal(_host(solve(prob, p)), 1.0 * np.arange(N))
        prob.opts.relax = 0.25
        np.testing.assert_array_equal(_host(solve(prob, p)), 0.5 * np.arange(N))
        _Params.SCALE = 8.0
        np.testing.assert_array_equal(_host(solve(prob, p)), 2.0 * np.arange(N))
        # a rebuilt container of the same leaves: the signature's, no trace
        traces = len(solve.compiled)
        np.testing.assert_array_equal(_host(solve(_Problem(x, prob.opts), _Params(x))),
                                      2.0 * np.arange(N))
        assert len(solve.compiled) == traces
    finally:
        _Params.SCALE = 2.0


def test_buffers_named_by_an_object_argument_and_also_passed_are_followed(backend):
    """bufs.cur / bufs.nxt hold two of the call's own arrays, swapped between calls: what
    the attributes hold is checked by memory, not taken for the arguments themselves."""
    @tg.compile(backend=backend)
    def step(u, v, bufs):
        scale[1, N](bufs.cur, 2.0, bufs.nxt)

    u = cuda.to_device(np.arange(N, dtype=np.float64))
    v = cuda.to_device(np.zeros(N))
    bufs = types.SimpleNamespace(cur=u, nxt=v)
    want = np.arange(N, dtype=np.float64)
    for _ in range(4):
        step(u, v, bufs)
        want = 2 * want
        np.testing.assert_array_equal(_host(bufs.nxt), want)
        bufs.cur, bufs.nxt = bufs.nxt, bufs.cur


class _Act:
    def __init__(self, alpha):
        self.alpha = alpha

    def __call__(self, v):
        return v * self.alpha


class _Layer(NamedTuple):
    w: object
    act = _Act(2.0)  # a callable class attribute: an object, not a method


def test_an_attribute_of_a_callable_class_attribute_of_a_container_is_checked(backend):
    @tg.compile(backend=backend)
    def f(layer):
        out = tg.empty_like(layer.w)
        scale[1, N](layer.w, layer.act.alpha, out)
        return out

    w = np.arange(N, dtype=np.float64)
    try:
        np.testing.assert_array_equal(_host(f(_Layer(w))), 2.0 * w)
        _Layer.act.alpha = 3.0
        np.testing.assert_array_equal(_host(f(_Layer(w))), 3.0 * w)
    finally:
        _Layer.act.alpha = 2.0
