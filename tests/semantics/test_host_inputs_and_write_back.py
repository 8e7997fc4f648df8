"""Host (NumPy) inputs: a written strided view is copied back element by element (a column
written from another thread stays), transposed and reversed views match eager Numba,
read-only memory is never written (a store into it is refused before anything runs),
host data copied to the device inside the trace is copied again on every replay, and a
copy of a host array a kernel wrote earlier in the trace is refused."""
from __future__ import annotations

import threading

import numpy as np
import pytest
from eager import host, matches_eager
from numba import cuda
from small_kernels import iscale, scale

import tracegraph as tg
from tracegraph.errors import TraceError
from small_kernels import double, total

N = 8


GRID, BLOCK = 1, N


@cuda.jit
def fill_column(col, value):
    i = cuda.grid(1)
    if i < col.size:
        col[i] = value


def test_write_back_of_a_column_leaves_the_other_columns_alone(backend):
    """Two functions write two columns of one array from two threads at once; each copies
    back only its column (copying the whole span back would undo the other's writes)."""
    a = np.zeros((N, 2))
    first_ran, second_done = threading.Event(), threading.Event()
    # the cuda backend's CPU stand-in runs one stream at a time: there the second call
    # cannot run inside the first's callback, which would wait for it in vain
    wait = 0 if backend == "cuda" and tg._numba.SIMULATOR else 30

    @tg.compile(backend=backend)
    def first(col):
        fill_column[GRID, BLOCK](col, 1.0)
        tg.callback(lambda: (first_ran.set(), second_done.wait(wait)), col)
        return None

    @tg.compile(backend=backend)
    def second(col):
        fill_column[GRID, BLOCK](col, 2.0)
        return None

    streams = (None, None) if backend == "sim" else (cuda.stream(), cuda.stream())

    def run_first():
        first(a[:, 0], stream=streams[0])

    def run_second():
        first_ran.wait(30)
        second(a[:, 1], stream=streams[1])
        second_done.set()

    threads = [threading.Thread(target=run_first), threading.Thread(target=run_second)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    np.testing.assert_array_equal(a[:, 0], np.ones(N))
    np.testing.assert_array_equal(a[:, 1], np.full(N, 2.0))


@pytest.mark.parametrize("view", ["column", "reversed", "transposed", "every_other"])
def test_written_host_views_match_eager(backend, monkeypatch, view):
    base = np.arange(4 * N, dtype=np.float64).reshape(N, 4)
    take = {"column": lambda b: b[:, 1], "reversed": lambda b: b[::-1, 2],
            "transposed": lambda b: b.T[1], "every_other": lambda b: b.reshape(-1)[::2]}[view]

    def step(v):
        iscale[(v.size + 7) // 8, 8](v, 3.0)
        return None

    # eager Numba cannot take a strided NumPy array: the reference runs on a device copy
    def reference(v):
        d = cuda.to_device(np.ascontiguousarray(v))
        iscale[(v.size + 7) // 8, 8](d, 3.0)
        v[...] = d.copy_to_host()

    for _ in range(2):
        mine, want = base.copy(), base.copy()
        f = tg.compile(step, backend=backend)
        f(take(mine))
        f(take(mine))
        reference(take(want))
        reference(take(want))
        np.testing.assert_array_equal(mine, want)


def test_a_transposed_host_array_written_in_place_matches_eager(backend, monkeypatch):
    @cuda.jit
    def scale_2d(m, a):
        i, j = cuda.grid(2)
        if i < m.shape[0] and j < m.shape[1]:
            m[i, j] = m[i, j] * a + i

    def step(m):
        scale_2d[(1, 1), (4, 8)](m, 2.0)
        return None

    base = np.arange(32, dtype=np.float64).reshape(8, 4)
    matches_eager(step, lambda: (base.copy().T,), backend, monkeypatch=monkeypatch)


@cuda.jit(device=True)
def _opaque_store(a, i):
    a[i] = -1.0


_OPAQUE = (_opaque_store,)


@cuda.jit
def store_through_opaque_call(a):
    i = cuda.grid(1)
    if i < a.size:
        _OPAQUE[0](a, i)


def _read_only(kind, tmp_path):
    data = np.arange(N, dtype=np.float64)
    if kind == "flag":
        data.setflags(write=False)
        return data
    if kind == "frombuffer":
        return np.frombuffer(data.tobytes(), np.float64)
    path = tmp_path / "data.bin"
    data.tofile(path)
    return np.memmap(path, np.float64, mode="r", shape=(N,))


@pytest.mark.parametrize("kind", ["flag", "frombuffer", "memmap"])
def test_a_kernel_storing_to_a_read_only_input_is_refused_before_running(backend, kind,
                                                                         tmp_path):
    x = _read_only(kind, tmp_path)
    before = np.array(x)

    def step(x):
        iscale[GRID, BLOCK](x, 2.0)
        return x

    with pytest.raises(tg.TraceError, match="read-only") as e:
        tg.compile(step, backend=backend)(x)
    assert e.value.where.startswith(__file__) and e.value.fix
    np.testing.assert_array_equal(np.asarray(x), before)


@pytest.mark.parametrize("kind", ["flag", "frombuffer", "memmap"])
def test_read_only_inputs_are_read_correctly(backend, kind, tmp_path):
    x = _read_only(kind, tmp_path)

    @tg.compile(backend=backend)
    def step(x):
        out = tg.empty_like(x)
        scale[GRID, BLOCK](x, 2.0, out)
        return out

    np.testing.assert_array_equal(host(step(x)), 2.0 * np.arange(N))
    np.testing.assert_array_equal(host(step(x)), 2.0 * np.arange(N))
    assert not step.latest.program.inputs[0].writes_back


def test_a_store_the_analysis_cannot_see_into_read_only_memory_fails_cleanly(backend,
                                                                             tmp_path):
    x = _read_only("memmap", tmp_path)

    @tg.compile(backend=backend)
    def step(x):
        store_through_opaque_call[GRID, BLOCK](x)
        return None

    with pytest.raises(tg.TracegraphError, match="read-only|readonly|Cannot modify"):
        step(x)
    np.testing.assert_array_equal(np.asarray(x), np.arange(N))


def test_to_device_of_host_data_copies_it_on_every_replay(backend):
    table = np.arange(N, dtype=np.float64)

    @tg.compile(backend=backend)
    def step(x):
        t = cuda.to_device(table)
        out = cuda.device_array_like(x)
        scale[GRID, BLOCK](t, 2.0, out)
        return out

    x = np.zeros(N)
    np.testing.assert_array_equal(host(step(x)), 2.0 * table)
    table[:] = 10.0  # eager Numba would copy the new values on the next call: so do we
    np.testing.assert_array_equal(host(step(x)), np.full(N, 20.0))
    assert [op.data.role for op in step.latest.program.ops if op.kind == "memcpy"].count(
        "constant") == 1


H = np.arange(16.0)


def test_a_host_copy_after_a_write_to_a_numpy_argument_sharing_it_is_refused(backend):
    def step(x):
        double[1, 64](x)
        d = cuda.to_device(H)
        out = cuda.device_array(1)
        total[1, 1](d, out)
        return out

    with pytest.raises(TraceError, match="copied to the device after a kernel wrote x"):
        tg.compile(step, backend=backend)(H)
    with pytest.raises(TraceError, match="after a kernel wrote x"):
        tg.compile(step, backend=backend)(H[:8])

    def before(x):  # copied before the write: what eager copies too
        d = cuda.to_device(H)
        double[1, 64](x)
        out = cuda.device_array(1)
        total[1, 1](d, out)
        return out
    H[:] = np.arange(16.0)
    got = np.asarray(tg.compile(before, backend=backend)(H))
    assert got[0] == np.arange(16.0).sum()
    np.testing.assert_array_equal(H, 2 * np.arange(16.0))
    H[:] = np.arange(16.0)


def test_a_padded_host_argument_copied_in_after_a_write_is_refused(backend):
    def step(x):
        double[1, 64](x)
        d = cuda.to_device(H)
        out = cuda.device_array(1)
        total[1, 1](d, out)
        return out

    f = tg.compile(step, backend=backend, dynamic={"x": 0}, buckets=(8, 16))
    H[:] = np.arange(16.0)
    with pytest.raises(TraceError, match="after a kernel wrote x"):
        f(H[:5])
    np.testing.assert_array_equal(H, np.arange(16.0))  # nothing ran
