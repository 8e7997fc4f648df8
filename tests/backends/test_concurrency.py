"""Concurrency: one compiled function replayed from 8 threads at once
gives every caller its own correct result; different functions compile concurrently,
also while others replay."""
from __future__ import annotations

import threading

import numpy as np
import pytest
from numba import cuda
from small_kernels import add, iadd, scale

import tracegraph as tg

pytestmark = pytest.mark.filterwarnings("ignore:the traced function .*:UserWarning")

N = 8
GRID, BLOCK = 2, 4
THREADS = 8


def diamond(x, y):
    u, v, out = tg.empty_like(x), tg.empty_like(y), tg.empty_like(x)
    scale[GRID, BLOCK](x, 2.0, u)
    scale[GRID, BLOCK](y, 3.0, v)
    add[GRID, BLOCK](u, v, out)
    return out


def _host(a):
    return a.copy_to_host() if hasattr(a, "copy_to_host") else np.asarray(a)


def _in_threads(work, n: int = THREADS) -> list:
    """Run work(k) in n threads started together; re-raise the first failure."""
    barrier = threading.Barrier(n)
    results: list = [None] * n
    errors: list = []

    def run(k):
        try:
            barrier.wait()
            results[k] = work(k)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    if errors:
        raise errors[0]
    return results


@pytest.mark.parametrize("place", ["host", "device"])
def test_replay_one_function_from_8_threads(backend, place, request):
    f = tg.compile(diamond, backend=backend)
    wrap = np.array if place == "host" else cuda.to_device
    base = np.arange(N, dtype=np.float64)
    f(wrap(base), wrap(base))
    shared_y = wrap(np.ones(N))       # one input read by every thread

    def work(k):
        got = []
        for r in range(6):
            x = base + 100 * k + r
            out = f.replay(wrap(x), shared_y)
            got.append((x, _host(out)))
        return got

    for per_thread in _in_threads(work):
        for x, out in per_thread:
            np.testing.assert_array_equal(out, 2 * x + 3)
    assert len(f.compiled) == 1


def test_replay_from_8_threads_writing_their_own_inputs(backend, request):
    @tg.compile(backend=backend)
    def accumulate(acc, x):
        iadd[GRID, BLOCK](acc, x)
        return acc

    accs = [np.zeros(N) for _ in range(THREADS)]
    accumulate(np.zeros(N), np.ones(N))

    def work(k):
        for _ in range(5):
            assert accumulate.replay(accs[k], np.full(N, float(k))) is accs[k]

    _in_threads(work)
    for k, acc in enumerate(accs):
        np.testing.assert_array_equal(acc, np.full(N, 5.0 * k))


def test_calls_that_compile_from_8_threads(backend):
    """Threads calling one function with new signatures at once: each signature is
    traced once, every result is right."""
    traces = []

    def body(x, a):
        traces.append(a)
        out = tg.empty_like(x)
        scale[GRID, BLOCK](x, a, out)
        return out

    f = tg.compile(body, backend=backend)
    x = np.arange(N, dtype=np.float64)

    def work(k):
        a = float(k % 4)
        return a, [f(x, a) for _ in range(3)]

    for a, outs in _in_threads(work):
        for out in outs:
            np.testing.assert_array_equal(out, a * x)
    assert sorted(traces) == [0.0, 1.0, 2.0, 3.0]
    assert len(f.compiled) == 4


def test_compile_two_functions_concurrently(backend):
    def other(x, y):
        out = tg.empty_like(x)
        add[GRID, BLOCK](x, y, out)
        iadd[GRID, BLOCK](out, y)
        return out

    x, y = np.arange(N, dtype=np.float64), np.ones(N)
    want = {0: 2 * x + 3, 1: x + 2}

    def work(k):
        results = []
        for r in range(4):   # a new function each time: trace, compile, run, replay
            f = tg.compile(diamond if k % 2 == 0 else other, backend=backend)
            results.append((_host(f(x, y)), _host(f.replay(x, y)), len(f.latest.plan.nodes)))
        return results

    for k, results in enumerate(_in_threads(work, 4)):
        for first, again, _ in results:
            np.testing.assert_array_equal(first, want[k % 2])
            np.testing.assert_array_equal(again, want[k % 2])


def test_tracing_while_another_thread_replays(backend):
    busy = tg.compile(diamond, backend=backend)
    x = np.arange(N, dtype=np.float64)
    busy(x, x)
    stop = threading.Event()

    def replay_loop():
        while not stop.is_set():
            np.testing.assert_array_equal(busy.replay(x, x), 5 * x)

    loop = threading.Thread(target=replay_loop)
    loop.start()
    try:
        for k in range(10):
            f = tg.compile(diamond, backend=backend)
            program = f.trace(x, x + k)
            assert [op.name for op in program.ops if op.kind == "kernel"] == [
                "scale", "scale", "add"]
            np.testing.assert_array_equal(f(x, x + k), 5 * x + 3 * k)
    finally:
        stop.set()
        loop.join()
