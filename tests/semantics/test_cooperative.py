"""Cooperative (grid-sync) kernels as graph nodes: equal to eager Numba / NumPy with
several blocks (the simulator runs a cooperative grid's blocks at once), numba-cuda's own
grid-sync doc examples, in a loop body, re-pointed on replay, and a clear error for a grid
too large to be resident; a grid sync in a closure's device function is found at trace
time."""
from __future__ import annotations

import sys

import numpy as np
import pytest
from numba import cuda

import tracegraph as tg
from tracegraph import _numba
from tracegraph.backends.cuda import platform as cuda_platform


def _line() -> int:
    return sys._getframe(1).f_lineno + 1


@cuda.jit
def rotate_through_grid(a, out, shift):
    """Every thread reads what a thread of another block wrote before the grid sync."""
    i = cuda.grid(1)
    g = cuda.cg.this_grid()
    if i < a.size:
        a[i] = i * 2
    g.sync()
    if i < a.size:
        out[i] = a[(i + shift) % a.size]


@cuda.jit(device=True)
def _sync_grid():
    cuda.cg.this_grid().sync()


@cuda.jit
def prefix_by_rounds(x):
    """x[i] = sum(x[:i+1]) by log2(n) rounds of doubling, a grid sync between rounds (in a
    device function, found by name)."""
    i = cuda.grid(1)
    step = 1
    while step < x.size:
        v = x[i - step] if i < x.size and i >= step else 0
        _sync_grid()
        if i < x.size:
            x[i] += v
        _sync_grid()
        step *= 2


def test_cooperative_kernel_equals_numpy_across_blocks(backend):
    @tg.compile(backend=backend)
    def f(a, out):
        rotate_through_grid[3, 32](a, out, 33)
        return out

    a = np.zeros(96, np.float32)
    out = np.zeros(96, np.float32)
    res = f(a, out)
    i = np.arange(96)
    np.testing.assert_array_equal(res, ((i + 33) % 96) * 2)
    np.testing.assert_array_equal(a, i * 2)
    (op,) = [op for op in f.trace(a, out).ops if op.kind == "kernel"]
    assert op.launch.cooperative and "cooperative" in op.describe()


def test_grid_sync_in_a_device_function_with_partial_last_block(backend):
    @tg.compile(backend=backend)
    def f(x):
        prefix_by_rounds[3, 16](x)
        return x

    x = np.arange(1, 41, dtype=np.int64)  # 40 elements in 3 blocks of 16
    np.testing.assert_array_equal(f(x.copy()), np.cumsum(x))


def test_cooperative_node_carries_the_attribute_and_is_re_pointed(backend):
    """A device array moved between calls: the node is re-pointed and stays cooperative
    (on the CPU stand-in a node without the attribute raises when it grid-syncs)."""
    if backend == "sim" and not _numba.SIMULATOR:
        pytest.skip("device arrays: the cuda backend's test")

    @tg.compile(backend=backend)
    def f(a, out):
        rotate_through_grid[3, 32](a, out, 40)

    i = np.arange(96)
    for _ in range(2):
        a = cuda.to_device(np.zeros(96, np.float32))
        out = cuda.device_array(96, np.float32)
        f(a, out)
        np.testing.assert_array_equal(out.copy_to_host(), ((i + 40) % 96) * 2)


def test_numba_doc_example_laplace_forall(backend):
    """numba-cuda's doc_examples/test_laplace.py kernel (forall launch, early return of
    the threads past the end, one grid sync per time step), small, against NumPy."""
    @cuda.jit
    def solve_heat_equation(buf_0, buf_1, timesteps, k):
        i = cuda.grid(1)
        if i >= len(buf_0):
            return
        grid = cuda.cg.this_grid()
        for step in range(timesteps):
            if (step % 2) == 0:
                data = buf_0
                next_data = buf_1
            else:
                data = buf_1
                next_data = buf_0
            curr_temp = data[i]
            if i == 0:
                next_temp = curr_temp + k * (data[i + 1] - (2 * curr_temp))
            elif i == len(data) - 1:
                next_temp = curr_temp + k * (data[i - 1] - (2 * curr_temp))
            else:
                next_temp = curr_temp + k * (data[i - 1] - (2 * curr_temp) + data[i + 1])
            next_data[i] = next_temp
            grid.sync()

    size, niter = 41, 12

    @tg.compile(backend=backend)
    def f(buf_0, buf_1):
        solve_heat_equation[3, 16](buf_0, buf_1, niter, 0.25)
        solve_heat_equation.forall(len(buf_0))(buf_1, buf_0, 2, 0.25)
        return buf_0, buf_1

    data = np.zeros(size)
    data[20] = 10000
    b0, b1 = f(data.copy(), np.zeros(size))

    def step(d):
        n = d.copy()
        n[0] = d[0] + 0.25 * (d[1] - 2 * d[0])
        n[-1] = d[-1] + 0.25 * (d[-2] - 2 * d[-1])
        n[1:-1] = d[1:-1] + 0.25 * (d[:-2] - 2 * d[1:-1] + d[2:])
        return n

    def heat(buf_0, buf_1, timesteps):  # the kernel's buffer alternation, in NumPy
        for t in range(timesteps):
            data, next_data = (buf_0, buf_1) if t % 2 == 0 else (buf_1, buf_0)
            next_data[:] = step(data)

    r0, r1 = data.copy(), np.zeros(size)
    heat(r0, r1, niter)
    heat(r1, r0, 2)
    np.testing.assert_allclose(b0, r0)
    np.testing.assert_allclose(b1, r1)


def test_numba_doc_example_sequential_rows(backend):
    """numba-cuda's doc_examples/test_cg.py kernel (explicit signature), small."""
    from numba.cuda import int32

    @cuda.jit((int32[:, ::1],))
    def sequential_rows(M):
        col = cuda.grid(1)
        g = cuda.cg.this_grid()
        rows = M.shape[0]
        cols = M.shape[1]
        for row in range(1, rows):
            opposite = cols - col - 1
            M[row, col] = M[row - 1, opposite] + 1
            g.sync()

    @tg.compile(backend=backend)
    def f(a):
        sequential_rows[a.shape[1] // 16, 16](a)
        return a

    a = f(np.zeros((6, 48), np.int32))
    np.testing.assert_array_equal(a, np.repeat(np.arange(6, dtype=np.int32)[:, None], 48, 1))


def test_cooperative_kernel_in_a_loop_body(backend):
    @cuda.jit
    def count_down(flag, n):
        if cuda.grid(1) == 0:
            n[0] -= 1
            flag[0] = 1 if n[0] > 0 else 0

    @tg.compile(backend=backend)
    def f(a, out, flag, n):
        with tg.while_(flag, max_iterations=10):
            rotate_through_grid[3, 32](a, out, 33)
            rotate_through_grid[3, 32](out, a, 1)
            count_down[1, 1](flag, n)
        return a

    a = np.zeros(96, np.float32)
    n = np.array([3], np.int32)
    res = f(a, np.zeros(96, np.float32), np.ones(1, np.int32), n)
    assert n[0] == 0
    i = np.arange(96)
    # every round: a <- 2i, out[i] = a[i+33]; then out <- 2i, a[i] = out[i+1] = 2(i+1)
    np.testing.assert_array_equal(res, 2 * ((i + 1) % 96))


def test_cooperative_grid_too_large_to_be_resident_is_a_lowering_error(backend):
    if backend == "sim":
        pytest.skip("co-residency is the device's limit: the cuda backend's check")
    lines = []

    @tg.compile(backend=backend)
    def f(a, out):
        lines.append(_line())
        rotate_through_grid[100_000, 1024](a, out, 1)

    a = cuda.device_array(4, np.float32) if not _numba.SIMULATOR else np.zeros(4, np.float32)
    with pytest.raises(tg.LoweringError) as e:
        f(a, a)
    msg = str(e.value)
    assert "all 100000 blocks" in msg and "resident at once" in msg, msg
    assert e.value.where == f"{__file__}:{lines[0]}"
    assert "max_cooperative_grid_blocks" in e.value.fix


def test_grid_sync_undetected_in_a_plain_launch_raises_on_sim():
    """A launch the simulator runs block after block cannot honour a grid sync: it raises
    instead of giving the answer of a block-by-block run."""
    a = _numba.simulator_array(np.zeros(64, np.float32))
    out = _numba.simulator_array(np.zeros(64, np.float32))
    with pytest.raises(Exception, match="not cooperative"):
        _numba.run_simulated(rotate_through_grid, (2, 1, 1), (32, 1, 1), 0, [a, out, 1])


@pytest.mark.fake_platform
def test_the_fake_platform_checks_its_limit_and_the_attribute(monkeypatch):
    plat = cuda_platform.platform()
    monkeypatch.setattr(plat, "cooperative_blocks", 2)

    @tg.compile(backend="cuda")
    def f(a, out):
        rotate_through_grid[3, 32](a, out, 1)

    with pytest.raises(tg.LoweringError, match="at most 2 blocks"):
        f(np.zeros(96, np.float32), np.zeros(96, np.float32))

    # a kernel node built without the cooperative attribute fails on the stand-in
    monkeypatch.setattr(plat, "cooperative_blocks", 100)
    monkeypatch.setattr(plat, "set_cooperative", lambda node: None)

    @tg.compile(backend="cuda")
    def g(a, out):
        rotate_through_grid[3, 32](a, out, 1)

    with pytest.raises(Exception, match="not cooperative"):
        g(np.zeros(96, np.float32), np.zeros(96, np.float32))


def test_grid_sync_in_a_closure_device_function_is_found_at_trace_time(backend):
    def make():
        @cuda.jit(device=True)
        def barrier():
            cuda.cg.this_grid().sync()

        @cuda.jit
        def k(a):
            a[cuda.grid(1)] = 1
            barrier()
        return k

    k = make()
    assert tg._numba.uses_grid_sync(k)
