"""Leaks (CPU side): compiled functions, their graphs and executables,
traced Programs and the tracer are freed once nothing holds them; a compiled function does
not keep its callers' arrays alive; replaying does not grow memory."""
from __future__ import annotations

import gc
import tracemalloc
import weakref

import numpy as np
import pytest
from numba import cuda
from small_kernels import add, scale

import tracegraph as tg
from tracegraph import _numba

pytestmark = pytest.mark.filterwarnings("ignore:the traced function .*:UserWarning")

N = 8
GRID, BLOCK = 2, 4


def _make(backend):
    def step(x, y):
        u, v, out = tg.empty_like(x), tg.zeros_like(y), tg.empty_like(x)
        scale[GRID, BLOCK](x, 2.0, u)
        scale[GRID, BLOCK](y, 3.0, v)
        add[GRID, BLOCK](u, v, out)
        return out
    return tg.compile(step, backend=backend)


def _collected(refs: dict) -> list[str]:
    """Names of the referents still alive after a full collection."""
    gc.collect()
    return [name for name, r in refs.items() if r() is not None]


def _x():
    return np.arange(N, dtype=np.float64)


@pytest.mark.parametrize("place", ["host", "device"])
def test_compiled_function_and_its_graphs_are_freed(backend, place):
    f = _make(backend)
    wrap = np.array if place == "host" else cuda.to_device
    out = None
    for a in (_x(), _x()[:4].copy()):          # two signatures
        out = f(wrap(a), wrap(a))
        f.replay(wrap(a), wrap(a))
    refs = {"function": weakref.ref(f)}
    for k, entry in enumerate(f.compiled):
        refs.update({f"entry{k}": weakref.ref(entry), f"program{k}": weakref.ref(entry.program),
                     f"plan{k}": weakref.ref(entry.plan),
                     f"executable{k}": weakref.ref(entry.executable)})
    del f, entry
    assert _collected(refs) == []
    np.testing.assert_array_equal(out if place == "host" else out.copy_to_host(),
                                  5 * _x()[:4])  # results outlive the function


def test_clear_frees_the_graphs_but_keeps_the_function(backend):
    f = _make(backend)
    f(_x(), _x())
    entry = f.latest
    refs = {"entry": weakref.ref(entry), "executable": weakref.ref(entry.executable),
            "plan": weakref.ref(entry.plan)}
    del entry
    f.clear()
    assert _collected(refs) == []
    np.testing.assert_array_equal(f(_x(), _x()), 5 * _x())


def test_traced_programs_and_plans_are_freed(backend):
    f = _make(backend)
    prog, plan = f.trace(_x(), _x()), f.lower(_x(), _x())
    refs = {"program": weakref.ref(prog), "plan": weakref.ref(plan),
            "graph": weakref.ref(prog.graph), "plan's program": weakref.ref(plan.program)}
    del prog, plan
    assert _collected(refs) == []
    assert not f.compiled   # trace and lower compile nothing


def test_the_tracer_and_traced_arrays_are_freed_after_a_trace(backend):
    seen = []

    def step(x):
        out = tg.empty_like(x)
        seen.append(weakref.ref(out))
        seen.append(weakref.ref(out._tracer))
        scale[GRID, BLOCK](x, 2.0, out)
        return out

    f = tg.compile(step, backend=backend)
    f(_x())
    assert _collected(dict(enumerate(seen))) == []


def test_the_tracer_is_freed_after_a_failed_trace(backend):
    seen = []

    def step(x):
        out = tg.empty_like(x)
        seen.append(weakref.ref(out._tracer))
        scale[GRID, BLOCK](x, 2.0, out)
        raise ValueError("halfway")

    f = tg.compile(step, backend=backend)
    with pytest.raises(ValueError, match="halfway"):
        f(_x())
    assert _collected({"tracer": seen[0]}) == []
    assert _numba.current_tracer() is None


def test_a_compiled_function_does_not_keep_its_callers_arrays_alive(backend):
    f = _make(backend)
    x, y = cuda.to_device(_x()), cuda.to_device(_x())
    out = f(x, y)
    f.replay(x, y)                # the replay fast path remembers the last arguments
    refs = {"x": weakref.ref(x), "y": weakref.ref(y)}
    del x, y
    assert _collected(refs) == []
    x2, y2 = cuda.to_device(_x() + 1), cuda.to_device(_x())
    np.testing.assert_array_equal(f.replay(x2, y2).copy_to_host(), 5 * _x() + 2)
    np.testing.assert_array_equal(out.copy_to_host(), 5 * _x())


def test_many_compiles_free_their_functions(backend):
    refs = {}
    for k in range(20):
        f = _make(backend)
        np.testing.assert_array_equal(f(_x(), _x() + k), 5 * _x() + 3 * k)
        refs[k] = weakref.ref(f)
    del f
    assert _collected(refs) == []


def test_replays_do_not_grow_memory(backend):
    f = _make(backend)
    x, y = _x(), _x()
    f(x, y)
    for _ in range(20):           # warm up caches
        f.replay(x, y)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        for _ in range(200):
            f.replay(x, y)
        gc.collect()
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    grown = sum(s.size_diff for s in after.compare_to(before, "filename") if s.size_diff > 0)
    assert grown < 64 * 1024, f"{grown} bytes more after 200 replays"
