"""Keyword arguments are matched by name: their order never selects another graph, for
named keyword parameters and for **kwargs the function reads by name (kw["a"],
kw.get("a"), "a" in kw); where it iterates or passes on **kwargs, or for a dict
argument, the caller's order is part of the signature (the function may depend on it),
and a replay in another order says so. tracegraph takes no name from the user's
parameters: a function with a parameter named `stream` gets its own stream= argument,
and every function runs on a CUDA stream through f.on(s)(...) / f.on(s).replay(...)
(f(..., stream=s) where the function has no `stream` parameter)."""
from __future__ import annotations

import numpy as np
import pytest
from numba import cuda

import tracegraph as tg
from small_kernels import add, scale

N = 16


def _dev(value: float = 1.0):
    return cuda.to_device(np.full(N, value, np.float32))


def _host(a):
    return a.copy_to_host()


def _by_name(x, **kw):
    add[1, N](x, kw["a"], kw["out"])
    if "b" in kw:
        add[1, N](kw["out"], kw.get("b"), kw["out"])
    scale[1, N](kw["out"], kw.get("factor", 1.0), kw["out"])
    return kw["out"]


def test_kwargs_read_by_name_are_one_signature_in_any_order(backend):
    f = tg.compile(_by_name, backend=backend)
    x, a, b, out = _dev(1.0), _dev(2.0), _dev(4.0), _dev(0.0)
    np.testing.assert_array_equal(_host(f(x, a=a, b=b, out=out, factor=2.0)), 14.0)
    np.testing.assert_array_equal(_host(f(x, factor=2.0, out=out, b=b, a=a)), 14.0)
    np.testing.assert_array_equal(_host(f.replay(x, out=out, a=a, factor=2.0, b=b)), 14.0)
    assert len(f.compiled) == 1


def test_named_keyword_parameters_are_one_signature_in_any_order(backend):
    @tg.compile(backend=backend)
    def f(x, y, *, out, factor=1.0):
        add[1, N](x, y, out)
        scale[1, N](out, factor, out)
        return out

    x, y, out = _dev(1.0), _dev(2.0), _dev(0.0)
    f(x=x, y=y, out=out, factor=3.0)
    np.testing.assert_array_equal(_host(f.replay(factor=3.0, out=out, y=y, x=x)), 9.0)
    assert len(f.compiled) == 1


def _iterates(x, **stages):
    for _, (factor, out) in stages.items():
        scale[1, N](x, factor, out)
        x = out
    return x


def test_kwargs_the_function_iterates_keep_their_order_and_replay_says_so(backend):
    f = tg.compile(_iterates, backend=backend)
    x, u, v = _dev(1.0), _dev(0.0), _dev(0.0)
    f(x, first=(2.0, u), second=(3.0, v))
    with pytest.raises(tg.SignatureError, match=r"argument \*\*kwargs: its keys come in the "
                                                r"order \('second', 'first'\), and in "
                                                r"\('first', 'second'\)") as err:
        f.replay(x, second=(3.0, v), first=(2.0, u))
    assert "share memory" not in str(err.value)
    f(x, second=(3.0, v), first=(2.0, u))  # a call compiles that order, as eagerly run
    assert len(f.compiled) == 2


def test_a_dict_in_another_key_order_is_named_in_the_replay_error(backend):
    @tg.compile(backend=backend)
    def f(d):
        add[1, N](d["x"], d["y"], d["out"])
        return d["out"]

    x, y, out = _dev(1.0), _dev(2.0), _dev(0.0)
    f({"x": x, "y": y, "out": out})
    with pytest.raises(tg.SignatureError, match=r"argument d: its keys come in the order "
                                                r"\('y', 'x', 'out'\)"):
        f.replay({"y": y, "x": x, "out": out})


def _with_stream_parameter(x, out, stream=1.0):
    scale[1, N](x, stream, out)  # the user's own meaning of "stream": a factor
    return out


def test_a_parameter_named_stream_is_the_function_s_own(backend):
    f = tg.compile(_with_stream_parameter, backend=backend)
    x, out = _dev(2.0), _dev(0.0)
    np.testing.assert_array_equal(_host(f(x, out, stream=3.0)), 6.0)
    np.testing.assert_array_equal(_host(f(x, out)), 2.0)
    np.testing.assert_array_equal(_host(f.replay(x, out, stream=3.0)), 6.0)
    np.testing.assert_array_equal(_host(f(x, out, 5.0)), 10.0)
    assert len(f.compiled) == 3  # one graph per value of the Python scalar


def _graph_stream(backend):
    return cuda.stream() if backend == "cuda" else None


@pytest.mark.parametrize("fn", [_with_stream_parameter, lambda x, out: scale[1, N](x, 1.0, out)],
                         ids=["stream parameter", "no stream parameter"])
def test_on_runs_any_function_on_a_stream(backend, fn):
    f = tg.compile(fn, backend=backend)
    s = _graph_stream(backend)
    x, out = _dev(2.0), _dev(0.0)
    f.on(s)(x, out)
    f.on(s).replay(x, out)
    if s is not None:
        s.synchronize()
    np.testing.assert_array_equal(_host(out), 2.0)
    assert len(f.compiled) == 1


def test_on_binds_a_method(backend):
    class Model:
        factor = 4.0

        @tg.compile(backend=backend)
        def forward(self, x, out):
            scale[1, N](x, self.factor, out)
            return out

    m = Model()
    s = _graph_stream(backend)
    out = m.forward.on(s)(_dev(1.0), _dev(0.0))
    if s is not None:
        s.synchronize()
    np.testing.assert_array_equal(_host(out), 4.0)


@cuda.jit
def slow_add_one(x, spins, one, zero):
    """x[i] + 1 after `spins` dependent multiply-adds (a graph that takes a while)."""
    i = cuda.grid(1)
    if i < x.shape[0]:
        t = x[i]
        for _ in range(spins):
            t = t * one + zero
        x[i] = t + 1.0


def _non_blocking_stream(backend):
    """A stream that does not wait for the legacy default stream, nor it for this one."""
    if backend != "cuda" or tg._numba.SIMULATOR:  # (the CPU stand-in has no streams)
        return None
    from cuda.core import Device
    device = Device(cuda.get_current_device().id)
    device.set_current()
    return device.create_stream()


def test_a_padded_call_on_a_non_blocking_stream_copies_its_rows_on_that_stream(backend):
    """A padded call's rows are copied in and its written rows back on the stream the graph
    runs on: on a non-blocking stream, the copy back waits for a slow graph."""
    f = tg.compile(lambda x, spins: slow_add_one[1, 32](x, spins, 1.0, 0.0),
                   dynamic={"x": 0}, buckets=(8,), backend=backend)
    s = _non_blocking_stream(backend)
    x = cuda.to_device(np.arange(5, dtype=np.float32))
    spins = 3 if s is None else 2_000_000
    for calls in (1, 2, 3):
        f.on(s)(x, spins)
        if s is not None:
            s.sync()
        np.testing.assert_array_equal(_host(x), np.arange(5) + calls)


@pytest.mark.fake_platform
@pytest.mark.parametrize("how", ["on", "keyword"])
def test_the_stream_given_is_the_one_the_graph_launches_on(monkeypatch, how):
    from tracegraph.backends.cuda import platform
    fake = platform.platform()
    given = []
    original = type(fake).stream
    monkeypatch.setattr(type(fake), "stream", lambda self, s: given.append(s) or original(
        self, s))
    s = cuda.stream()
    f = tg.compile(lambda x, out: scale[1, N](x, 2.0, out), backend="cuda")
    x, out = _dev(1.0), _dev(0.0)
    for _ in range(2):
        f.on(s)(x, out) if how == "on" else f(x, out, stream=s)
    mine = [g for g in given if g is not None]  # (None: each executable's default stream)
    assert mine and all(g is s for g in mine)
    given.clear()
    g = tg.compile(_with_stream_parameter, backend="cuda")
    g.on(s)(x, out, stream=3.0)  # the function's stream=, and the graph's stream
    mine = [g for g in given if g is not None]
    assert mine and all(g is s for g in mine)
    np.testing.assert_array_equal(_host(out), 3.0)
