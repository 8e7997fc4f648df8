"""Collectives as graph nodes (tg.allreduce, tg.allgather, tg.reduce_scatter,
tg.broadcast): one rank (the identity) on both backends, several simulated ranks in threads
of one process (tg.sim_group), and their ordering in the graph."""
from __future__ import annotations

import threading

import networkx as nx
import numpy as np
import pytest
from numba import cuda

import tracegraph as tg

N = 8


@cuda.jit
def double(x):
    i = cuda.grid(1)
    if i < x.size:
        x[i] *= 2


@cuda.jit
def add_one(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = x[i] + 1


def run_ranks(f, comms, args_of):
    """f(*args_of(rank), comm) in one thread per rank; the results by rank."""
    results: list = [None] * len(comms)
    errors: list = []

    def rank(r):
        try:
            results[r] = f(*args_of(r), comms[r])
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=rank, args=(r,)) for r in range(len(comms))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "a rank hangs"
    if errors:
        raise errors[0]
    return results


def data(r, n=N):
    return (np.arange(n) + 10 * r).astype(np.float32)


# ---------------------------------------------------------------------------
# one rank: the identity

def test_single_rank_collectives_are_the_identity(backend):
    @tg.compile(backend=backend)
    def f(x):
        a = tg.empty(N, np.float32)
        add_one[1, N](x, a)
        tg.allreduce(a)
        g = tg.empty(N, np.float32)
        tg.allgather(a, g)
        s = tg.empty(N, np.float32)
        tg.reduce_scatter(g, s, op="max")
        tg.broadcast(s, root=0)
        out = tg.empty(N, np.float32)
        add_one[1, N](s, out)
        return out

    x = np.arange(N, dtype=np.float32)
    for k in range(2):  # the build and a replay
        np.testing.assert_array_equal(f(x + k), x + k + 2)
    kinds = [op.name for op in f.trace(x).ops if op.kind == "library"]
    assert kinds == ["allreduce_sum", "allgather", "reduce_scatter_max", "broadcast"]


def test_accesses_are_declared_exactly():
    @tg.compile(backend="sim")
    def f(x, out):
        tg.allreduce(x)
        tg.allgather(x, out)
        tg.broadcast(x)

    x, out = np.ones(N, np.float32), np.zeros(N, np.float32)
    program = f.trace(x, out)
    x_buf, out_buf = (program.inputs[0].buffer, program.inputs[1].buffer)
    ops = [op for op in program.ops if op.kind == "library"]

    def modes(op):
        return {(a.buffer, a.mode) for a in op.accesses if a.buffer in (x_buf, out_buf)}

    assert modes(ops[0]) == {(x_buf, "rw")}
    assert modes(ops[1]) == {(x_buf, "r"), (out_buf, "rw")}
    assert modes(ops[2]) == {(x_buf, "rw")}


def test_refuses_wrong_sizes_ops_and_dtypes():
    comms = tg.sim_group(2)

    def compiled(body):
        return tg.compile(backend="sim")(body)

    with pytest.raises(tg.TraceError, match="world_size"):
        compiled(lambda x, c: tg.allgather(x, tg.empty(N, np.float32), comm=c))(
            np.ones(N, np.float32), comms[0])
    with pytest.raises(tg.TraceError, match="world_size"):
        compiled(lambda x, c: tg.reduce_scatter(x, tg.empty(N, np.float32), comm=c))(
            np.ones(N, np.float32), comms[0])
    with pytest.raises(tg.TraceError, match="unknown op"):
        compiled(lambda x: tg.allreduce(x, op="mean"))(np.ones(N, np.float32))
    with pytest.raises(tg.TraceError, match="avg"):
        compiled(lambda x: tg.allreduce(x, op="avg"))(np.ones(N, np.int32))
    with pytest.raises(tg.TraceError, match="NCCL has no type"):
        compiled(lambda x: tg.allreduce(x))(np.ones(N, np.complex64))
    with pytest.raises(tg.TraceError, match="contiguous"):
        compiled(lambda x: tg.allreduce(x[::2]))(np.ones(N, np.float32))
    with pytest.raises(tg.TraceError, match="root"):
        compiled(lambda x, c: tg.broadcast(x, root=2, comm=c))(np.ones(N, np.float32),
                                                               comms[0])
    with pytest.raises(tg.TraceError, match="only meaningful inside"):
        tg.allreduce(np.ones(N, np.float32))


# ---------------------------------------------------------------------------
# several simulated ranks, one thread each

@pytest.mark.parametrize("world", [2, 4])
@pytest.mark.parametrize("op", ["sum", "prod", "max", "min", "avg"])
def test_allreduce_over_threaded_ranks(world, op):
    @tg.compile(backend="sim")
    def f(x, comm):
        return tg.allreduce(x, op=op, comm=comm)

    inputs = [data(r) for r in range(world)]
    ref = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min,
           "avg": np.mean}[op](np.stack(inputs), axis=0)
    for _ in range(2):  # the first call and a replay
        xs = [a.copy() for a in inputs]
        results = run_ranks(f, tg.sim_group(world), lambda r, xs=xs: (xs[r],))
        for r in range(world):
            np.testing.assert_allclose(results[r], ref, rtol=1e-6)
            np.testing.assert_array_equal(xs[r], results[r])  # in place


@pytest.mark.parametrize("world", [2, 4])
def test_allgather_reduce_scatter_broadcast_over_threaded_ranks(world):
    @tg.compile(backend="sim")
    def f(x, comm):
        gathered = tg.empty((comm.world_size, N), np.float32)
        tg.allgather(x, gathered, comm=comm)
        block = tg.empty(N, np.float32)  # gathered has world_size x N elements
        tg.reduce_scatter(gathered, block, op="sum", comm=comm)
        b = tg.empty(N, np.float32)
        add_one[1, N](x, b)
        tg.broadcast(b, root=world - 1, comm=comm)
        return gathered, block, b

    comms = tg.sim_group(world)
    inputs = [data(r) for r in range(world)]
    results = run_ranks(f, comms, lambda r: (inputs[r],))
    stacked = np.stack(inputs)
    summed = world * stacked.reshape(-1)  # every rank reduces the same gathered array
    for r, (gathered, block, b) in enumerate(results):
        np.testing.assert_array_equal(gathered, stacked)
        np.testing.assert_array_equal(block, summed[r * N:(r + 1) * N])
        np.testing.assert_array_equal(b, inputs[world - 1] + 1)


def test_ranks_may_close_over_their_communicator():
    comms = tg.sim_group(2)

    def rank_fn(comm):
        @tg.compile(backend="sim")
        def f(x):
            return tg.allreduce(x, comm=comm)
        return f

    fs = [rank_fn(c) for c in comms]
    results = run_ranks(lambda x, c: fs[c.rank](x), comms, lambda r: (data(r),))
    for res in results:
        np.testing.assert_array_equal(res, data(0) + data(1))


def test_ranks_calling_different_collectives_raise_instead_of_hanging():
    comms = tg.sim_group(2)

    @tg.compile(backend="sim")
    def f(x, comm):
        if comm.rank == 0:
            tg.allreduce(x, comm=comm)
        else:
            tg.broadcast(x, comm=comm)

    with pytest.raises(tg.TracegraphError, match="different collectives"):
        run_ranks(f, comms, lambda r: (data(r),))


# ---------------------------------------------------------------------------
# ordering: by the data each collective reads and writes

@pytest.mark.parametrize("seed", ["1", "2", "3", "4"])
def test_collective_between_kernels_in_random_order(monkeypatch, seed):
    monkeypatch.setenv("TRACEGRAPH_SIM_ORDER", seed)
    world = 2

    @tg.compile(backend="sim")
    def f(x, y, comm):
        double[1, N](x)                 # writes x before the allreduce
        tg.allreduce(x, comm=comm)
        out = tg.empty(N, np.float32)
        add_one[1, N](x, out)           # reads it after
        other = tg.empty(N, np.float32)
        add_one[1, N](y, other)         # another branch
        double[1, N](other)
        return out, other

    comms = tg.sim_group(world)
    xs, ys = [data(r) for r in range(world)], [data(r) + 100 for r in range(world)]
    results = run_ranks(f, comms, lambda r: (xs[r].copy(), ys[r]))
    for r, (out, other) in enumerate(results):
        np.testing.assert_array_equal(out, 2 * (data(0) + data(1)) + 1)
        np.testing.assert_array_equal(other, 2 * (ys[r] + 1))

    program = f.trace(data(0), data(0), comms[0])
    g = program.graph
    names = [op.name for op in program.ops]
    coll = names.index("allreduce_sum")
    kernels = [i for i, op in enumerate(program.ops) if op.kind == "kernel"]
    first_double, after, branch_a, branch_b = kernels
    assert nx.has_path(g, first_double, coll)
    assert nx.has_path(g, coll, after)
    for i in (branch_a, branch_b):  # compute on the other branch may overlap
        assert not nx.has_path(g, coll, i) and not nx.has_path(g, i, coll)


def test_collectives_on_one_communicator_run_in_program_order(monkeypatch):
    monkeypatch.setenv("TRACEGRAPH_SIM_ORDER", "7")

    @tg.compile(backend="sim")
    def f(x, y, comm):
        tg.allreduce(x, comm=comm)      # x and y are independent data, but NCCL needs
        tg.allreduce(y, op="max", comm=comm)  # every rank to issue them in one order
        return x, y

    comms = tg.sim_group(2)
    results = run_ranks(f, comms, lambda r: (data(r), data(r) * 3))
    for x, y in results:
        np.testing.assert_array_equal(x, data(0) + data(1))
        np.testing.assert_array_equal(y, data(1) * 3)
    program = f.trace(data(0), data(0), comms[0])
    a, b = [i for i, op in enumerate(program.ops) if op.kind == "library"]
    assert nx.has_path(program.graph, a, b)


def test_collective_inside_a_loop_body():
    @cuda.jit
    def count_down(n, flag):
        if cuda.grid(1) == 0:
            n[0] -= 1
            flag[0] = 1 if n[0] > 0 else 0

    @tg.compile(backend="sim")
    def f(x, n, flag, comm):
        with tg.while_(flag, max_iterations=10):
            tg.allreduce(x, comm=comm)
            count_down[1, 1](n, flag)
        return x

    comms = tg.sim_group(2)
    results = run_ranks(f, comms, lambda r: (np.full(N, r + 1, np.float32),
                                             np.array([3], np.int32), np.ones(1, np.int32)))
    # 1 + 2 = 3, then 6, then 12 on both ranks
    for x in results:
        np.testing.assert_array_equal(x, 12)
