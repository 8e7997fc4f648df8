"""Running out of memory at build or replay is tg.OutOfMemoryError (a CudaError) at the
call's line, naming the bytes asked, what the memory was for, what holds memory (the
graphs each compiled function keeps, their bytes and arenas) and the fix (f.clear(),
max_graphs=). A graph larger than any device fails the same way on sim, on the CPU
stand-in of the GPU (whose allocations fail past its capacity) and on a GPU; nothing is
cached by the failed compile."""
from __future__ import annotations

import inspect

import numpy as np
import pytest
from numba import cuda

import tracegraph as tg

HUGE = 2**50  # a pebibyte: more than any device (or the simulator's host) has


@cuda.jit
def first(x, out):
    if cuda.grid(1) == 0:
        x[0] = 1
        out[0] = x[0]


def _huge(out):
    big = tg.empty(HUGE, np.uint8)
    first[1, 1](big, out)
    return out


def _small(out):
    tmp = tg.empty(1 << 20, np.uint8)
    first[1, 1](tmp, out)
    return out


def _line_of_call(marker: str) -> str:
    frame = inspect.currentframe().f_back
    lines, start = inspect.getsourcelines(frame.f_code)
    return f"{__file__}:{start + next(k for k, t in enumerate(lines) if marker in t)}"


def test_a_graph_larger_than_the_device_is_an_out_of_memory_error(backend):
    f = tg.compile(_huge, backend=backend)
    out = cuda.device_array(1, np.uint8)
    with pytest.raises(tg.OutOfMemoryError) as err:
        f(out)  # the call
    e = err.value
    assert isinstance(e, tg.CudaError) and e.nbytes == HUGE
    assert f"{HUGE:,} bytes (1.0 PiB)" in e.what
    assert "_huge: 0 graph(s)" in e.what  # what it holds now: nothing yet
    assert "_huge.clear()" in e.fix and "max_graphs=" in e.fix
    assert e.where == _line_of_call("# the call")
    assert f.compiled == () and f.latest is None  # nothing kept of the failed compile
    g = tg.compile(_small, backend=backend)
    np.testing.assert_array_equal(g(out).copy_to_host(), [1])


def _fake():
    from tracegraph.backends.cuda import platform
    return platform.platform()


@pytest.mark.fake_platform
def test_what_holds_memory_is_named(monkeypatch):
    g = tg.compile(_small, backend="cuda")
    out = cuda.device_array(1, np.uint8)
    g(out)
    fake = _fake()
    monkeypatch.setattr(fake, "capacity", fake.live + 1000)  # the device is full now
    f = tg.compile(_small, backend="cuda")
    with pytest.raises(tg.OutOfMemoryError) as err:
        f(out)
    e = err.value
    assert e.nbytes == 1 << 20 and "1,048,576 bytes (1.0 MiB) of device memory" in e.what
    assert "the arena of its graphs' intermediates" in e.what
    assert "free of" in e.what  # the device's free and total memory
    assert "_small: 1 graph(s), 1.0 MiB of graph memory (its arena: 1.0 MiB)" in e.what
    g.clear()  # what the fix says: the memory g held goes back
    del e, err
    import gc
    gc.collect()
    np.testing.assert_array_equal(f(out).copy_to_host(), [1])


def _result(x):
    out = tg.empty_like(x)
    first[1, 1](x, out)
    return out


@pytest.mark.fake_platform
def test_running_out_at_replay_is_the_same_error(monkeypatch):
    f = tg.compile(_result, backend="cuda")
    x = cuda.to_device(np.zeros(4096, np.uint8))
    held = f(x)  # the caller holds the result: the next call needs other memory
    fake = _fake()
    monkeypatch.setattr(fake, "capacity", fake.live)
    with pytest.raises(tg.OutOfMemoryError) as err:
        f(x)
    assert "4,096 bytes" in err.value.what and "_result: 1 graph(s)" in err.value.what
    del held
    np.testing.assert_array_equal(f(x).copy_to_host()[:1], [1])
