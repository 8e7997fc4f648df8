"""The sim backend: results, graph memory between runs, and the random-order test mode."""
from __future__ import annotations

import time

import networkx as nx
import numpy as np
import pytest
from numba import cuda
from small_kernels import add, iadd, iscale, scale

import tracegraph as tg
from tracegraph import pytree
from tracegraph.signature import arguments
from tracegraph.backends import sim
from tracegraph.lower import lower


@cuda.jit
def ishift(x, a):
    i = cuda.grid(1)
    if i < x.size:
        x[i] += a


def _diamond(x, y):
    u, v, out = tg.empty_like(x), tg.empty_like(y), tg.empty_like(x)
    scale[1, 16](x, 2.0, u)
    scale[1, 16](y, 3.0, v)
    add[1, 16](u, v, out)
    return out


def _wide(x, y):
    """Four independent chains, joined pairwise: many valid orders."""
    a, b = tg.empty_like(x), tg.empty_like(x)
    scale[1, 16](x, 2.0, a)
    ishift[1, 16](a, 1.0)
    scale[1, 16](y, 3.0, b)
    ishift[1, 16](b, -1.0)
    iscale[1, 16](x[:8], 0.5)
    ishift[1, 16](y[8:], 4.0)
    add[1, 16](a, b, a)
    return a, x, y


def _wide_expected(x, y):
    x, y = x.copy(), y.copy()
    a = (2 * x + 1) + (3 * y - 1)
    x[:8] *= 0.5
    y[8:] += 4.0
    return a, x, y


def _run(plan, *args, seed=None):
    leaves, _, _ = pytree.flatten(args)
    infos = [arguments.describe(x) for x in leaves]
    return sim.build(plan, seed).run(leaves, infos)


def test_diamond_gives_2x_plus_3y(backend):
    f = tg.compile(_diamond, backend=backend)
    x, y = np.arange(16.0), np.linspace(-1, 1, 16)
    np.testing.assert_allclose(f(x, y), 2 * x + 3 * y)
    tg.verify(f.latest.program, check_order=True)


def test_in_place_inputs_and_views(backend):
    f = tg.compile(_wide, backend=backend)
    x, y = np.arange(16.0), np.arange(16.0, 32.0)
    ea, ex, ey = _wide_expected(x, y)
    a, rx, ry = f(x, y)
    np.testing.assert_allclose(a, ea)
    assert rx is x and ry is y
    np.testing.assert_allclose(x, ex)
    np.testing.assert_allclose(y, ey)


def test_zeros_are_zeroed_on_every_run(backend):
    @tg.compile(backend=backend)
    def f(x):
        z = tg.zeros_like(x)
        iadd[1, 16](z, x)
        return z

    x = np.arange(16.0)
    np.testing.assert_array_equal(f(x), x)
    np.testing.assert_array_equal(f(x), x)  # not 2x: the memset runs again
    np.testing.assert_array_equal(f.replay(x + 1), x + 1)


def test_host_callback_runs_after_the_writes_it_waits_for(backend):
    seen = []
    holder = {}

    @tg.compile(backend=backend)
    def f(x):
        iscale[1, 16](x, 2.0)
        tg.callback(lambda: seen.append(holder["x"].copy()))
        ishift[1, 16](x, 1.0)
        return x

    x = np.arange(16.0)
    holder["x"] = x
    f(x)
    assert len(seen) == 1
    np.testing.assert_allclose(x, 2 * np.arange(16.0) + 1)


def test_error_in_a_node_names_the_node():
    @cuda.jit
    def bad(x):
        i = cuda.grid(1)
        if i < x.size:
            x[i + 100] = 1.0  # out of bounds: the simulator raises

    @tg.compile(backend="sim")
    def f(x):
        bad[1, 8](x)
        return x

    with pytest.raises(Exception) as e:
        f(np.zeros(8))
    notes = "\n".join(getattr(e.value, "__notes__", []))
    assert "while executing graph node" in notes and "bad[1, 8]" in notes


# ---------------------------------------------------------------------------
# random topological orders

def test_random_order_is_a_valid_topological_order():
    f = tg.compile(_wide, backend="sim")
    plan = f.lower(np.arange(16.0), np.zeros(16))
    g = nx.DiGraph()
    g.add_nodes_from(range(len(plan.nodes)))
    g.add_edges_from((d, n.index) for n in plan.nodes for d in n.deps)
    orders = set()
    for seed in range(20):
        order = sim.random_topological_order(plan, seed)
        assert sorted(order) == list(range(len(plan.nodes)))
        pos = {v: i for i, v in enumerate(order)}
        assert all(pos[u] < pos[v] for u, v in g.edges)
        orders.add(tuple(order))
    assert len(orders) > 5  # it really does shuffle


def test_random_orders_give_the_same_results_on_valid_programs():
    f = tg.compile(_wide, backend="sim")
    x, y = np.arange(16.0), np.arange(16.0, 32.0)
    plan = f.lower(x, y)
    tg.verify(plan.program, check_order=True)
    ea, ex, ey = _wide_expected(x, y)
    for seed in range(8):
        xs, ys = x.copy(), y.copy()
        a, rx, ry = _run(plan, xs, ys, seed=seed)
        np.testing.assert_allclose(a, ea)
        np.testing.assert_allclose(xs, ex)
        np.testing.assert_allclose(ys, ey)


def test_env_var_selects_random_order(monkeypatch):
    x, y = np.arange(16.0), np.arange(16.0, 32.0)
    ea, _, _ = _wide_expected(x, y)
    orders = set()
    for seed in ("1", "2", "3", "random"):
        monkeypatch.setenv("TRACEGRAPH_SIM_ORDER", seed)
        f = tg.compile(_wide, backend="sim")
        a, _, _ = f(x.copy(), y.copy())
        np.testing.assert_allclose(a, ea)
        orders.add(tuple(f.latest.executable.order))
    assert len(orders) > 1
    monkeypatch.delenv("TRACEGRAPH_SIM_ORDER")
    f = tg.compile(_wide, backend="sim")
    f(x.copy(), y.copy())
    assert list(f.latest.executable.order) == list(range(len(f.latest.plan.nodes)))


def test_removed_edge_gives_a_wrong_result_for_some_seed():
    @tg.compile(backend="sim")
    def chain(x):
        iscale[1, 16](x, 2.0)
        ishift[1, 16](x, 1.0)
        return x

    x = np.arange(16.0)
    prog = chain.trace(x)
    tg.verify(prog, check_order=True)
    k1, k2 = [i for i, op in enumerate(prog.ops) if op.kind == "kernel"]
    assert prog.graph.has_edge(k1, k2)
    g = prog.graph.copy()
    g.remove_edge(k1, k2)
    broken = prog.replace(graph=g)
    with pytest.raises(tg.VerifyError, match="not ordered"):
        tg.verify(broken, check_order=True)

    good_plan, bad_plan = lower(prog), lower(broken)
    expected = 2 * x + 1
    wrong = 0
    for seed in range(16):
        xs = x.copy()
        _run(good_plan, xs, seed=seed)
        np.testing.assert_allclose(xs, expected)
        xs = x.copy()
        _run(bad_plan, xs, seed=seed)
        wrong += not np.allclose(xs, expected)
    assert wrong > 0
    # program order hides the missing edge: that is why the random mode exists
    xs = x.copy()
    _run(bad_plan, xs)
    np.testing.assert_allclose(xs, expected)


@cuda.jit
def _block_sums(x, out):
    """Every thread adds the whole block's values through one shared array."""
    smem = cuda.shared.array(64, np.float32)
    tid = cuda.threadIdx.x
    smem[tid] = x[cuda.blockIdx.x, tid]
    cuda.syncthreads()
    acc = np.float32(0)
    for j in range(cuda.blockDim.x):
        acc += smem[j]
    out[cuda.blockIdx.x, tid] = acc


@cuda.jit
def _block_votes(x, out):
    """syncthreads_count per block in a cooperative launch (the grid syncs), where the
    simulator runs the blocks at once: each block counts only its own threads' votes."""
    # an int predicate: Numba on a GPU types syncthreads_count(bool) as an error
    vote = 1 if x[cuda.blockIdx.x, cuda.threadIdx.x] > 0 else 0
    out[cuda.blockIdx.x, cuda.threadIdx.x] = cuda.syncthreads_count(vote)
    cuda.cg.this_grid().sync()


def test_threads_of_a_block_share_one_shared_array(backend, monkeypatch):
    # Numba's simulator can hand two threads that reach cuda.shared.array at once two
    # different arrays (lookup and store are two steps); every thread must see one array.
    # A slow allocation of the shared array opens that window for every thread.
    empty = np.empty

    def slow_empty(shape: object, *args: object, **kwargs: object) -> np.ndarray:
        if shape == 64:
            time.sleep(0.001)
        return empty(shape, *args, **kwargs)

    monkeypatch.setattr(np, "empty", slow_empty)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 64)).astype(np.float32)

    @tg.compile(backend=backend)
    def f(x):
        out = tg.empty(x.shape, np.float32)
        for _ in range(6):
            _block_sums[x.shape[0], x.shape[1]](x, out)
        return out

    for _ in range(3):
        got = np.asarray(f(x))
        np.testing.assert_allclose(got, np.repeat(x.sum(1, keepdims=True), 64, 1), rtol=1e-5)


def test_syncthreads_count_counts_its_own_block(backend):
    x = np.array([[1, -1, 1, 1], [-1, -1, -1, 1]], np.float32)

    @tg.compile(backend=backend)
    def f(x):
        out = tg.empty(x.shape, np.int32)
        _block_votes[2, 4](x, out)
        return out

    np.testing.assert_array_equal(np.asarray(f(x)), [[3] * 4, [1] * 4])
