"""A caller's device array that moves between replays: re-pointing the
nodes that use it, or copying it into a static buffer in the graph, chosen per input.

The policy is pure and tested here on the CPU; the behaviour tests run on `sim` and `cuda`
under each way (TRACEGRAPH_MOVED_INPUTS), and on `cuda` also check which way was taken."""
from __future__ import annotations

import gc

import numpy as np
import pytest
from numba import cuda
from small_kernels import scale

import tracegraph as tg
from tracegraph import TracegraphError, config
from tracegraph import backends
from tracegraph.plan import input_bases, replay_table
from tracegraph.signature.arguments import describe
from tracegraph.backends.cuda.moved_inputs import Costs, MovePolicy, could_win, watched_inputs
from tracegraph.ir import EXTERNAL

N = 8
FAN = 8


@cuda.jit
def axpb(x, a, b):
    i = cuda.grid(1)
    if i < x.size:
        x[i] = x[i] * a + b


# -- the policy (pure) ------------------------------------------------------------------

def test_an_input_that_never_moves_is_never_copied():
    p = MovePolicy(64, 1024, written=False, nodes=65)
    assert not any(p.observe(False) for _ in range(1000))
    assert p.mode == "repoint" and p.idle


def test_a_wide_input_that_keeps_moving_switches_to_copy_and_back_when_it_stops():
    p = MovePolicy(16, 4096, written=False, nodes=17)
    flips = [p.observe(True) for _ in range(20)]
    assert flips.count(True) == 1 and 2 <= flips.index(True) <= 8  # not on the first move
    assert p.mode == "copy" and not p.idle
    flips = [p.observe(False) for _ in range(100)]
    assert flips.count(True) == 1 and p.mode == "repoint"
    assert p.idle  # the rate snapped to zero: nothing tracked any more


def test_one_move_does_not_switch():
    p = MovePolicy(64, 1024, written=False, nodes=65)
    assert not p.observe(True)
    assert not any(p.observe(False) for _ in range(50))


def test_a_narrow_or_huge_input_is_not_watched():
    c = Costs()
    assert not could_win(1, 1024, False, c)
    assert not could_win(64, 1 << 30, False, c)  # copying 1 GiB costs more than 64 patches
    assert could_win(64, 1024, False, c)


def test_written_inputs_pay_for_two_copies():
    c = Costs()
    assert c.copy(1.0, 4096, True) == pytest.approx(2 * c.copy(1.0, 4096, False))
    def first_winning_fanout(written):
        return next(f for f in range(1, 200) if could_win(f, 4096, written, c))
    assert first_winning_fanout(True) > first_winning_fanout(False)


def test_a_switch_must_pay_back_the_rebuild():
    """The same input in a graph of 20 nodes switches; in one of 100,000 nodes it does not
    (the saving would take longer than the horizon to repay the rebuild)."""
    small = MovePolicy(8, 1024, written=False, nodes=20)
    big = MovePolicy(8, 1024, written=False, nodes=100_000)
    assert any(small.observe(True) for _ in range(20))
    assert not any(big.observe(True) for _ in range(200))


def test_staying_copied_when_going_back_never_pays():
    """At rest, a copied input costs one small copy per replay; in a big graph going back
    would cost more than that over the horizon, so the input stays copied, untracked."""
    p = MovePolicy(400, 1024, written=False, nodes=2000)
    assert any(p.observe(True) for _ in range(20)) and p.mode == "copy"
    assert not any(p.observe(False) for _ in range(500))
    assert p.mode == "copy" and p.idle


def test_forced_mode_from_the_environment(monkeypatch):
    monkeypatch.setenv(config.MOVED_INPUTS, "Copy ")
    assert config.moved_inputs_mode() == "copy"
    monkeypatch.delenv(config.MOVED_INPUTS)
    assert config.moved_inputs_mode() == "auto"
    monkeypatch.setenv(config.MOVED_INPUTS, "sometimes")
    with pytest.raises(TracegraphError, match="TRACEGRAPH_MOVED_INPUTS"):
        config.moved_inputs_mode()


# -- which inputs are watched (pure, on the Plan) ---------------------------------------------

def watched_names(fn, *args, mode="auto"):
    """{input name: written} of what watched_inputs picks for fn's plan on these arguments,
    with the addresses of this call (as the cuda backend builds on them)."""
    f = tg.compile(fn, backend="sim")
    call = f._calls._prepare(args, {})
    plan = f.lower(*args)
    base, _ = input_bases(replay_table(plan), call.infos)
    base.update({b.id: describe(b.external).extent[0] for b in plan.buffers
                 if b.kind == EXTERNAL})
    return {plan.buffers[b].name: w.written
            for b, w in watched_inputs(plan, base, mode).items()}


def four_kinds(narrow, wide, huge, inout):
    """One input read by one node, one read by many, a 64 MiB one (copying it costs more
    than re-pointing), and one written by many."""
    out = tg.empty((FAN, N), np.float64)
    big = tg.empty_like(huge)
    scale[1, N](narrow, 1.0, out[0])
    for k in range(1, FAN):
        scale[1, N](wide, 1.0, out[k])
    for _ in range(16):
        scale[64, 1024](huge, 1.0, big)
    for _ in range(FAN):
        axpb[1, N](inout, 2.0, 1.0)
    return out, big


def four_kinds_args():
    return (cuda.to_device(np.ones(N)), cuda.to_device(np.ones(N)),
            cuda.device_array(1 << 23, np.float64), cuda.to_device(np.ones(N)))


def test_wide_small_inputs_are_watched_narrow_and_huge_ones_are_not():
    step, args = four_kinds, four_kinds_args()
    assert watched_names(step, *args) == {"wide": False, "inout": True}
    assert watched_names(step, *args, mode="copy") == {"narrow": False, "wide": False,
                                                      "huge": False, "inout": True}
    assert watched_names(step, *args, mode="repoint") == {}


def test_inputs_named_by_callbacks_or_events_or_captured_are_not_watched():
    captured = cuda.to_device(np.ones(N))
    event = cuda.event()

    def step(named, waited, aliased, free):
        out = tg.empty((4, N), np.float64)
        for k, x in enumerate((named, waited, aliased, free)):
            scale[1, N](x, 1.0, out[k])
        scale[1, N](captured, 1.0, out[0])
        tg.callback(lambda: None, named)
        tg.record(event, waited)
        return out

    args = (cuda.to_device(np.ones(N)), cuda.to_device(np.ones(N)), captured,
            cuda.to_device(np.ones(N)))
    assert watched_names(step, *args, mode="copy") == {"free": False}


# -- behaviour on both backends, under each way ------------------------------------------

@pytest.fixture(params=["auto", "copy", "repoint"])
def way(request, monkeypatch):
    monkeypatch.setenv(config.MOVED_INPUTS, request.param)
    return request.param


def to_host(a):
    return a.copy_to_host() if hasattr(a, "copy_to_host") else np.asarray(a)


def wide_reader(backend):
    """FAN kernels read x: a moved x re-points FAN nodes, or one copy."""
    def step(x):
        out = tg.empty((FAN, N), np.float64)
        for k in range(FAN):
            scale[1, N](x, float(k + 1), out[k])
        return out
    return tg.compile(step, backend=backend)


def wide_writer(backend):
    """FAN in-place kernels on x: copying it needs a copy back to the caller too."""
    def step(x):
        for _ in range(FAN):
            axpb[1, N](x, 1.5, 1.0)
        return x
    return tg.compile(step, backend=backend)


def watched(f):
    """buffer -> WatchedInput of the cuda executable ({} on sim)."""
    return getattr(f.latest.executable, "watch", {})


def graph_nodes(f):
    return len(f.latest.executable.gdef.nodes())


def test_a_wide_input_moving_every_replay(backend, way):
    f = wide_reader(backend)
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(N) for _ in range(3)]
    dxs = [cuda.to_device(x) for x in xs]
    weights = np.arange(1, FAN + 1, dtype=np.float64)[:, None]
    held = []

    def mode():
        w = watched(f)
        return next(iter(w.values())).mode if w else "repoint"

    for k in range(12):  # moves on every replay: auto switches to copying on the way
        out = f(dxs[k % 3])
        np.testing.assert_allclose(to_host(out), weights * xs[k % 3])
        if k % 4 == 0:
            held.append((out, k % 3))
    if backend == "cuda":
        assert mode() == ("repoint" if way == "repoint" else "copy")
        # copy nodes exist only while copying: one copy-in (+ 2: the bracket, see below)
        assert graph_nodes(f) == FAN + 2 + (way != "repoint")
    for _ in range(24):  # then stays put: auto goes back to re-pointing
        out = f(dxs[1])
    np.testing.assert_allclose(to_host(out), weights * xs[1])
    if backend == "cuda":
        assert mode() == ("copy" if way == "copy" else "repoint")
        assert graph_nodes(f) == FAN + 2 + (way == "copy")
    for k in range(4):  # and moves again
        out = f(dxs[k % 3])
        np.testing.assert_allclose(to_host(out), weights * xs[k % 3])
    for out, i in held:  # results handed out earlier are unchanged
        np.testing.assert_allclose(to_host(out), weights * xs[i])


def test_a_wide_written_input_updates_each_callers_array(backend, way):
    f = wide_writer(backend)
    xs = [np.zeros(N), np.full(N, 2.0)]
    dxs = [cuda.to_device(x) for x in xs]
    expect = [x.copy() for x in xs]
    for k in range(12):
        i = k % 2
        out = f(dxs[i])
        assert out is dxs[i]
        for _ in range(FAN):
            expect[i] = expect[i] * 1.5 + 1.0
        np.testing.assert_allclose(to_host(dxs[i]), expect[i])
        np.testing.assert_allclose(to_host(dxs[1 - i]), expect[1 - i])  # the other untouched
    if backend == "cuda" and way != "repoint":
        (w,) = watched(f).values()
        assert w.mode == "copy" and w.copy_out is not None  # and back to the caller
        assert graph_nodes(f) == FAN + 2  # a chain: no bracket


def test_an_input_a_callback_names_is_never_copied(backend, way):
    seen = []

    def step(x):
        out = tg.empty((FAN, N), np.float64)
        for k in range(FAN):
            scale[1, N](x, float(k + 1), out[k])
        tg.callback(lambda: seen.append(1), x)
        return out

    f = tg.compile(step, backend=backend)
    xs = [cuda.to_device(np.full(N, float(k))) for k in range(2)]
    for k in range(8):
        out = f(xs[k % 2])
        np.testing.assert_allclose(to_host(out)[:, 0], np.arange(1, FAN + 1) * (k % 2))
    assert len(seen) == 8
    assert not watched(f)


# -- cuda only: which inputs get copy nodes, and their memory ------------------------------

def test_only_inputs_where_copying_can_win_are_watched(gpu, monkeypatch):
    monkeypatch.delenv(config.MOVED_INPUTS, raising=False)

    f = tg.compile(four_kinds, backend="cuda")
    f(*four_kinds_args())
    plan = f.latest.executable.plan
    assert {plan.buffers[b].name for b in watched(f)} == {"wide", "inout"}
    assert all(w.mode == "repoint" and w.static is None for w in watched(f).values())
    assert graph_nodes(f) == len(plan.nodes) + 2  # the bracket; no copy nodes until worth it


def _free_device_memory():
    """Free device memory once Numba has released what it holds for deferred freeing."""
    gc.collect()
    cuda.synchronize()
    context = cuda.current_context()
    context.memory_manager.deallocations.clear()
    return context.get_memory_info()[0]


@pytest.mark.gpu_memory
def test_copy_buffers_are_freed(gpu, monkeypatch):
    monkeypatch.setenv(config.MOVED_INPUTS, "copy")
    x = cuda.to_device(np.ones(1 << 18))  # 2 MiB per static copy
    for _ in range(5):  # the driver's own first allocations for graphs happen here
        wide_reader("cuda")(x)
    free0 = _free_device_memory()
    for _ in range(50):  # 100 MiB of static copies if none were freed
        g = wide_reader("cuda")
        g(x)
        assert watched(g)
        del g
    # In its own process the used memory stays flat (2 MiB, measured alone on an H200);
    # after other tests in the same process 10 MiB were seen: what five copies would hold,
    # a twentieth of what keeping them all would
    assert free0 - _free_device_memory() <= 16 << 20


def test_parallel_graphs_are_bracketed_by_two_tiny_copies_and_chains_are_not(gpu):
    """cuda.BRACKET: a memcpy before the roots and one after the sinks of a graph with
    parallel branches (measured faster on the H200); results are unchanged."""
    def forks(a, b, c):
        for arr in (a, b, c):
            axpb[1, N](arr, 2.0, 1.0)

    def chain(a):
        for _ in range(3):
            axpb[1, N](a, 2.0, 1.0)

    f, g = tg.compile(forks, backend="cuda"), tg.compile(chain, backend="cuda")
    arrays = [cuda.to_device(np.full(N, float(k))) for k in range(3)]
    f(*arrays)
    for k, arr in enumerate(arrays):
        np.testing.assert_allclose(arr.copy_to_host(), k * 2.0 + 1.0)
    nodes = f.latest.executable.gdef.nodes()
    roots = [n for n in nodes if not len(n.pred)]
    sinks = [n for n in nodes if not len(n.succ)]
    assert len(nodes) == 5 and len(roots) == 1 and len(sinks) == 1
    assert all(type(n).__name__ == "MemcpyNode" for n in roots + sinks)
    g(arrays[0])
    np.testing.assert_allclose(arrays[0].copy_to_host(), ((1 * 2 + 1) * 2 + 1) * 2 + 1)
    assert graph_nodes(g) == 3
