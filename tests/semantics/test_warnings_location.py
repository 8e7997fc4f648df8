"""Every warning tracegraph emits points at the user's line, never at tracegraph's own
files (trace/bind.py) nor at "traced at ?": the launch or side effect that caused it, or
the call that traced. One test per warning tracegraph gives."""
from __future__ import annotations

import functools
import sys
import warnings

import numpy as np
import pytest
from numba import cuda
from small_kernels import scale

import tracegraph as tg

N = 16


def _provoked(fn, *args, match: str) -> list[warnings.WarningMessage]:
    """The warnings matching `match` that calling fn(*args) emits (each once, "always")."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        fn(*args)
    found = [w for w in seen if match in str(w.message)]
    assert found, [str(w.message)[:120] for w in seen]
    return found


def _at_this_file(found: list[warnings.WarningMessage]) -> None:
    for w in found:
        assert w.filename == __file__, (w.filename, w.lineno, str(w.message)[:120])
        assert "traced at ?" not in str(w.message)


def _dev(value: float = 1.0):
    return cuda.to_device(np.full(N, value, np.float32))


def test_a_stream_given_inside_a_traced_function_points_at_the_launch(backend):
    stream = cuda.stream()

    def step(x, out):
        scale[1, N, stream](x, 2.0, out)  # the launch
        return out

    found = _provoked(tg.compile(step, backend=backend), _dev(), _dev(),
                      match="a stream given to scale")
    _at_this_file(found)
    assert found[0].lineno == step.__code__.co_firstlineno + 1


def test_a_side_effect_points_at_its_line(backend):
    def step(x, out):
        print("tracing")  # the side effect
        scale[1, N](x, 2.0, out)
        return out

    found = _provoked(tg.compile(step, backend=backend), _dev(), _dev(),
                      match="Python side effects run once")
    _at_this_file(found)
    assert found[0].lineno == step.__code__.co_firstlineno + 1


def test_many_graphs_point_at_the_call(backend):
    def step(x, a, out):
        scale[1, N](x, a, out)
        return out

    f = tg.compile(step, backend=backend)
    x, out = _dev(), _dev()

    def calls():
        for k in range(17):
            f(x, float(k), out)
    _at_this_file(_provoked(calls, match="has compiled 16 graphs"))


class _Holder:
    kept = None
    count = 0


HOLDER = _Holder()


def test_an_array_kept_while_tracing_points_at_the_call(backend):
    def step(x):
        HOLDER.kept = tg.empty_like(x)
        scale[1, N](x, 2.0, HOLDER.kept)
        return x

    try:
        _at_this_file(_provoked(tg.compile(step, backend=backend), _dev(),
                                match="keeps an array it made while tracing"))
    finally:
        HOLDER.kept = None


def test_state_the_function_sets_points_at_the_call(backend):
    def step(state, x, out):
        state.count += 1
        scale[1, N](x, float(state.count > 0), out)
        return out

    _at_this_file(_provoked(tg.compile(step, backend=backend), _Holder(), _dev(), _dev(),
                            match="which it also reads"))


class _Buffers:
    pass


def test_tracing_again_and_again_points_at_the_call(backend):
    def step(s):
        scale[1, N](s.x, 2.0, s.out)

    s = _Buffers()
    s.x = _dev()
    f = tg.compile(step, backend=backend)

    def calls():
        for _ in range(10):
            s.out = cuda.device_array(N, np.float32)  # a new captured array every call
            f(s)
    _at_this_file(_provoked(calls, match="traced again 8 times"))


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="sys.monitoring: settrace does "
                    "not interrupt what tracegraph records")
class _Step:
    """A callable object: its warnings name its __call__'s line, not "traced at ?"."""

    count = 0

    def __call__(self, x, out):
        self.count += 1
        scale[1, N](x, float(self.count > 0), out)
        return out


@pytest.mark.parametrize("kind", ["object", "partial"])
def test_a_callable_object_says_where_it_is_defined(backend, kind):
    fn = _Step() if kind == "object" else functools.partial(_Step().__call__)
    found = _provoked(tg.compile(fn, backend=backend), _dev(), _dev(),
                      match="which it also reads")
    _at_this_file(found)
