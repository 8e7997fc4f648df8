"""Device-side control flow: tg.while_, tg.if_/tg.else_, tg.switch as conditional nodes,
on every backend (cuda on its CPU stand-in without a GPU), compared with the same loop
run on the host."""
from __future__ import annotations

import numpy as np
import pytest
from eager import host
from numba import cuda
from small_kernels import add, increment, iscale, scale

import tracegraph as tg


@cuda.jit
def halve_until_small(x, flag):
    """x /= 2; flag = x[0] > 1 (one block: the last thread to look sets the flag)."""
    i = cuda.grid(1)
    if i < x.size:
        x[i] = x[i] * 0.5
    cuda.syncthreads()
    if i == 0:
        flag[0] = 1 if x[0] > 1.0 else 0


@cuda.jit
def set_flag(flag, value):
    if cuda.grid(1) == 0:
        flag[0] = value


@cuda.jit
def bump(x, by):
    i = cuda.grid(1)
    if i < x.size:
        x[i] += by


def _halving(backend, **loop):
    @tg.compile(backend=backend)
    def shrink(x):
        flag = tg.zeros(1, np.int32)
        set_flag[1, 1](flag, 1)
        with tg.while_(flag, **loop) as it:
            halve_until_small[1, 8](x, flag)
        return x, it.iterations
    return shrink


@pytest.mark.parametrize("start", [100.0, 1.5, 0.5, 2.0**20])
def test_a_while_loop_runs_until_its_flag_clears(backend, start):
    shrink = _halving(backend, max_iterations=64)
    for _ in range(2):  # a replay loops again from the start
        x = np.full(8, start)
        out, iterations = shrink(x)
        want, n = start, 0
        while True:  # the same loop on the host
            want, n = want * 0.5, n + 1
            if not want > 1.0:
                break
        np.testing.assert_array_equal(host(out), np.full(8, want))
        assert host(iterations).tolist() == [n]


def test_max_iterations_stops_a_runaway_loop_and_can_raise(backend):
    shrink = _halving(backend, max_iterations=3)
    out, iterations = shrink(np.full(8, 1000.0))
    np.testing.assert_array_equal(host(out), np.full(8, 125.0))
    assert host(iterations).tolist() == [3]
    strict = _halving(backend, max_iterations=3, raise_at_limit=True)
    with pytest.raises(tg.TracegraphError, match="limit of 3"):
        strict(np.full(8, 1000.0))
    out, _ = strict(np.full(8, 4.0))  # under the limit: no error
    np.testing.assert_array_equal(host(out), np.full(8, 1.0))


def test_a_flag_that_starts_cleared_runs_no_iteration(backend):
    @tg.compile(backend=backend)
    def never(x):
        flag = tg.zeros(1, np.int32)
        with tg.while_(flag) as it:
            iscale[1, 8](x, 2.0)
        return x, it.iterations

    out, n = never(np.ones(8))
    np.testing.assert_array_equal(host(out), np.ones(8))
    assert host(n).tolist() == [0]


@pytest.mark.parametrize("value", [0, 1, 7])
def test_if_and_else(backend, value):
    @tg.compile(backend=backend)
    def pick(x, which):
        with tg.if_(which):
            iscale[1, 8](x, 2.0)
        with tg.else_():
            iscale[1, 8](x, -1.0)
        return x

    x = np.arange(8, dtype=np.float64)
    got = pick(x.copy(), np.array([value], np.int32))
    np.testing.assert_array_equal(host(got), x * (2.0 if value else -1.0))


@pytest.mark.parametrize("index", [0, 1, 2, 5, -1, 2**32 + 1, -(2**32) + 1])
def test_switch_runs_one_case(backend, index):
    @tg.compile(backend=backend)
    def choose(x, k):
        with tg.switch(k, 3) as cases:
            with cases[0]:
                bump[1, 8](x, 10.0)
            with cases[1]:
                bump[1, 8](x, 20.0)
            with cases[2]:
                bump[1, 8](x, 30.0)
        return x

    got = choose(np.zeros(8), np.array([index], np.int64))
    want = {0: 10.0, 1: 20.0, 2: 30.0}.get(index, 0.0)
    np.testing.assert_array_equal(host(got), np.full(8, want))


def test_nested_bodies_with_parallel_branches(backend):
    """An if inside a while; the loop body forks into two branches that join."""
    @cuda.jit
    def countdown(k, flag, odd):
        if cuda.grid(1) == 0:
            k[0] -= 1
            flag[0] = 1 if k[0] > 0 else 0
            odd[0] = k[0] % 2

    @tg.compile(backend=backend)
    def run(x, y, k):
        flag, odd = tg.zeros(1, np.int32), tg.zeros(1, np.int32)
        set_flag[1, 1](flag, 1)
        with tg.while_(flag, max_iterations=100):
            a, b = tg.empty_like(x), tg.empty_like(y)
            scale[1, 8](x, 1.0, a)         # two independent branches
            scale[1, 8](y, 2.0, b)
            add[1, 8](a, b, x)             # join
            countdown[1, 1](k, flag, odd)
            with tg.if_(odd):
                bump[1, 8](y, 1.0)
        return x, y, k

    x, y = np.zeros(8), np.ones(8)
    got_x, got_y, got_k = run(x, y, np.array([5], np.int32))
    hx, hy, k = np.zeros(8), np.ones(8), 5
    while True:
        hx = hx + 2.0 * hy
        k -= 1
        if k % 2:
            hy = hy + 1.0
        if k <= 0:
            break
    np.testing.assert_array_equal(host(got_x), hx)
    np.testing.assert_array_equal(host(got_y), hy)
    assert host(got_k).tolist() == [0]


def test_device_arrays_used_in_a_body_follow_the_caller(backend):
    """The caller's device arrays (flag included) used inside a loop: new arrays on each
    call are followed (the graph copies them around the loop)."""
    @tg.compile(backend=backend)
    def loop(x, flag):
        with tg.while_(flag, max_iterations=50):
            halve_until_small[1, 8](x, flag)
        return x

    for start in (64.0, 8.0):
        x, flag = cuda.to_device(np.full(8, start)), cuda.to_device(np.ones(1, np.int32))
        out = loop(x, flag)
        assert out is x
        np.testing.assert_array_equal(x.copy_to_host(), np.full(8, 1.0))
        assert flag.copy_to_host().tolist() == [0]


@pytest.mark.parametrize("what", ["callback", "event"])
def test_host_work_in_a_body_is_a_lowering_error(backend, what):
    def step(x):
        flag = tg.zeros(1, np.int32)
        with tg.if_(flag):
            iscale[1, 8](x, 2.0)
            if what == "callback":
                tg.callback(lambda: None, x)
            else:
                tg.record(cuda.event(), x)
        return x

    with pytest.raises(tg.LoweringError, match="body") as e:
        tg.compile(step, backend=backend)(np.ones(8))
    assert e.value.where.startswith(__file__) and e.value.fix


def test_misuse_is_a_trace_error(backend):
    def else_alone(x):
        iscale[1, 8](x, 2.0)
        with tg.else_():
            iscale[1, 8](x, 2.0)
        return x

    def float_flag(x):
        with tg.while_(tg.zeros(1)):
            iscale[1, 8](x, 2.0)
        return x

    for fn, match in ((else_alone, "must follow"), (float_flag, "int32 or int64")):
        with pytest.raises(tg.TraceError, match=match) as e:
            tg.compile(fn, backend=backend)(np.ones(8))
        assert e.value.where.startswith(__file__)


def test_a_dynamic_scalar_inside_a_body_is_refused(backend):
    @tg.compile(backend=backend, dynamic={"a": "value"})
    def step(x, a):
        flag = tg.zeros(1, np.int32)
        with tg.if_(flag):
            iscale[1, 8](x, a)
        return x

    with pytest.raises(tg.TraceError, match="dynamic scalar a"):
        step(np.ones(8), 2.0)


def test_visualize_draws_bodies_as_clusters(backend):
    shrink = _halving(backend, max_iterations=8)
    shrink(np.full(8, 4.0))
    dot = tg.visualize(shrink)
    assert "shape=diamond" in dot and 'label="loop body"' in dot and "style=dashed" in dot


def test_if_and_switch_follow_a_flag_argument_that_moves(backend):
    """The helper node that reads an if's flag (a switch's index) reads a graph-owned copy:
    a later call with the flag in another device array takes that array's branch."""
    def step_if(flag, o):
        with tg.if_(flag):
            increment[1, 32](o)

    def step_switch(k, o):
        with tg.switch(k, 2) as cases:
            with cases[0]:
                increment[1, 32](o)
            with cases[1]:
                increment[1, 32](o)
                increment[1, 32](o)

    f_if, f_switch = tg.compile(step_if, backend=backend), tg.compile(step_switch, backend=backend)
    f_if(cuda.to_device(np.array([1], np.int32)), cuda.to_device(np.zeros(4)))
    f_switch(cuda.to_device(np.array([1], np.int64)), cuda.to_device(np.zeros(4)))
    for flag in (0, 1, 0):
        o = cuda.to_device(np.zeros(4))
        f_if.replay(cuda.to_device(np.array([flag], np.int32)), o)
        np.testing.assert_array_equal(o.copy_to_host(), [flag] * 4)
        o = cuda.to_device(np.zeros(4))
        f_switch.replay(cuda.to_device(np.array([flag], np.int64)), o)
        np.testing.assert_array_equal(o.copy_to_host(), [flag + 1] * 4)
