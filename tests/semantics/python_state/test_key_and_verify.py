"""The two ways to reach Python state the automatic checks do not see: `key=` (a callable
run on every call whose hashable value is part of the signature: a new value traces a new
graph, bounded by max_graphs, an old value reuses its graph) and `verify=` (every call, or
every N-th, is traced again and compared with the cached graph's Program; a difference
raises tg.StaleGraphError naming the op, its line, the value then and now, and the fix,
and never replays the stale graph). TRACEGRAPH_VERIFY turns verify on for every function."""
from __future__ import annotations

import operator

import numpy as np
import pytest
from numba import cuda
from small_kernels import scale

import tracegraph as tg

N = 32


def _x():
    return np.arange(N, dtype=np.float64)


class _State:
    pass


S = _State()


def _hidden():
    return S.value  # read inside a callee: outside the automatic checks


def test_key_traces_a_new_graph_for_a_new_value_and_reuses_old_ones(backend):
    S.value = 2.0

    @tg.compile(backend=backend, key=lambda: S.value)
    def f(x):
        out = tg.empty_like(x)
        scale[1, N](x, _hidden(), out)
        return out

    x = _x()
    for value in (2.0, 3.0, 2.0, 3.0):
        S.value = value
        np.testing.assert_array_equal(f(x), value * x)
    info = f.cache_info()
    assert (info.graphs, info.misses[0], info.hits[0]) == (2, 2, 2)


def test_key_graphs_are_bounded_by_max_graphs(backend):
    @tg.compile(backend=backend, key=lambda: S.value, max_graphs=2)
    def f(x):
        out = tg.empty_like(x)
        scale[1, N](x, _hidden(), out)
        return out

    x = _x()
    for value in (1.0, 2.0, 3.0, 1.0):
        S.value = value
        np.testing.assert_array_equal(f(x), value * x)
    info = f.cache_info()  # (cuda updates an old executable in place rather than evict)
    assert (info.graphs, info.misses[0], info.evictions + info.updates) == (2, 4, 2)


def test_key_is_checked_by_the_direct_replay(backend):
    S.value = 2.0

    @tg.compile(backend=backend, key=lambda: (S.value,))
    def f(x, out):
        scale[1, N](x, _hidden(), out)

    x, out = cuda.to_device(_x()), cuda.device_array(N)
    for _ in range(3):
        f(x, out)
    S.value = 5.0
    f(x, out)
    np.testing.assert_array_equal(out.copy_to_host(), 5.0 * _x())


def test_an_unhashable_key_is_an_error_at_the_call(backend):
    @tg.compile(backend=backend, key=lambda: [S.value])
    def f(x):
        out = tg.empty_like(x)
        scale[1, N](x, 1.0, out)
        return out

    with pytest.raises(tg.TraceError, match="unhashable list") as e:
        f(_x())
    assert __file__ in str(e.value)


def test_a_key_that_is_not_callable_is_refused_at_decoration():
    with pytest.raises(tg.TraceError, match="not a callable"):
        tg.compile(lambda x: x, key=(1, 2))


def test_replay_names_the_key_that_changed(backend):
    S.value = 1.0

    @tg.compile(backend=backend, key=lambda: S.value)
    def f(x):
        out = tg.empty_like(x)
        scale[1, N](x, _hidden(), out)
        return out

    f(_x())
    S.value = 9.0
    with pytest.raises(tg.SignatureError,
                       match=r"key\(\) holds another value .* it was 1\.0 and is 9\.0 now"):
        f.replay(_x())


def test_verify_raises_instead_of_replaying_a_stale_graph(backend):
    S.value = 2.0

    @tg.compile(backend=backend, verify=True)
    def f(x):
        out = tg.empty_like(x)
        scale[1, N](x, _hidden(), out)
        return out

    x = _x()
    np.testing.assert_array_equal(f(x), 2.0 * x)
    np.testing.assert_array_equal(f(x), 2.0 * x)  # traced again, the same Program
    S.value = 3.0
    with pytest.raises(tg.StaleGraphError) as e:
        f(x)
    message = str(e.value)
    assert "argument 1 was 2.0 (float) when the graph was traced and is 3.0 (float)" in message
    assert f"{__file__}:" in message and "key=" in message
    assert isinstance(e.value, tg.TracegraphError)


def test_verify_catches_computed_names_and_callees(backend):
    S.value = 2.0

    @tg.compile(backend=backend, verify=True)
    def f(x):
        out = tg.empty_like(x)
        scale[1, N](x, operator.attrgetter("value")(S), out)
        return out

    f(_x())
    S.value = -2.0
    with pytest.raises(tg.StaleGraphError, match="argument 1"):
        f(_x())


def test_verify_sees_a_changed_number_of_launches(backend):
    S.value = 1

    @tg.compile(backend=backend, verify=True)
    def f(x):
        out = tg.zeros_like(x)
        for _ in range(S.value + 0 * len(())):  # the count from a callee-like read
            scale[1, N](x, 1.0, out)
        return out

    f(_x())
    S.value = 2
    # S.value is a checked chain: a new graph, not an error
    np.testing.assert_array_equal(f(_x()), _x())
    assert f.cache_info().graphs == 2


def test_verify_every_nth_call(backend):
    S.value = 2.0
    traces = []

    @tg.compile(backend=backend, verify=3)
    def f(x):
        traces.append(1)
        out = tg.empty_like(x)
        scale[1, N](x, _hidden(), out)
        return out

    x = _x()
    for _ in range(7):  # the compile, then a verify trace on calls 4 and 7
        f(x)
    assert len(traces) == 3
    S.value = 4.0
    f(x)
    f(x)  # not yet due: the stale graph (verify=N trusts N-1 calls in between)
    with pytest.raises(tg.StaleGraphError):
        f(x)


def test_verify_from_the_environment(backend, monkeypatch):
    monkeypatch.setenv("TRACEGRAPH_VERIFY", "1")
    S.value = 2.0

    @tg.compile(backend=backend)
    def f(x):
        out = tg.empty_like(x)
        scale[1, N](x, _hidden(), out)
        return out

    f(_x())
    S.value = 5.0
    with pytest.raises(tg.StaleGraphError):
        f(_x())


def test_verify_sees_a_kernel_defined_in_the_function_over_new_values(backend):
    """A kernel made inside the traced function is a new object on every trace: the same
    code compiling in the same values is the same kernel; another value is a difference."""
    def make(a):
        @cuda.jit
        def k(x, out):
            i = cuda.grid(1)
            if i < out.size:
                out[i] = a * x[i]
        return k

    S.value = 2.0

    @tg.compile(backend=backend, verify=True)
    def f(x):
        out = tg.empty_like(x)
        make(_hidden())[1, N](x, out)
        return out

    np.testing.assert_array_equal(f(_x()), 2.0 * _x())
    np.testing.assert_array_equal(f(_x()), 2.0 * _x())
    S.value = 3.0
    with pytest.raises(tg.StaleGraphError, match="kernel"):
        f(_x())


def test_a_bad_verify_value_is_refused():
    with pytest.raises(tg.TraceError, match="verify="):
        tg.compile(lambda x: x, verify=-1)
