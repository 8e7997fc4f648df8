"""Passes: typed dependency edges over byte ranges, transitive reduction, lanes/forks/joins."""
from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import cuda
from small_kernels import add, copy, fill, iscale, scale

import tracegraph as tg
from tracegraph import ir
from tracegraph.ir import Access, Buffer, Op, Program, op_graph
from tracegraph.passes import (
    add_dependencies,
    find_lanes,
    run_passes,
    transitive_reduction,
)


def _hand(ops, nbuf=2, nbytes=64):
    ops = tuple(ops)
    return Program("hand", ops, tuple(Buffer(i, nbytes, ir.TEMP) for i in range(nbuf)), (),
                   ("call", (), ()), (), ("none",), op_graph(ops))


def _k(name, *acc, barrier=False):
    return Op("host" if barrier else "kernel", name,
              tuple(Access(b, s, e, m) for b, s, e, m in acc), "t.py:1", barrier=barrier)


def _deps(ops, **kw):
    return tg.verify(add_dependencies(_hand(ops, **kw)), check_order=True)


def _all(ops, **kw):
    return run_passes(_hand(ops, **kw), check=True)


def _kernel_nodes(p):
    return {op.name: i for i, op in enumerate(p.ops) if op.kind == "kernel"}


def _ordered(p, a, b):
    return nx.has_path(p.graph, a, b) or nx.has_path(p.graph, b, a)


def _dev(n=16):
    return cuda.to_device(np.arange(n, dtype=np.float64))


# ---------------------------------------------------------------------------
# typed edges

@pytest.mark.parametrize("first, second, hazards", [
    ("w", "r", {"RAW"}),
    ("r", "w", {"WAR"}),
    ("w", "w", {"WAW"}),
    ("rw", "r", {"RAW"}),
    ("rw", "rw", {"RAW", "WAW", "WAR"}),
    ("r", "rw", {"WAR"}),
])
def test_hazard_types(first, second, hazards):
    p = _deps([_k("a", (0, 0, 32, first)), _k("b", (0, 16, 48, second))])
    assert list(p.graph.edges) == [(0, 1)]
    data = p.graph.edges[0, 1]
    assert data["hazards"] == hazards
    assert data["hazard"] == next(h for h in ("RAW", "WAW", "WAR") if h in hazards)


def test_readers_of_same_data_are_unordered():
    p = _deps([_k("w", (0, 0, 64, "w")), _k("r1", (0, 0, 64, "r")), _k("r2", (0, 8, 16, "r")),
               _k("r3", (0, 0, 64, "r"))])
    assert sorted(p.graph.edges) == [(0, 1), (0, 2), (0, 3)]


def test_no_edge_without_overlap_or_across_buffers():
    p = _deps([_k("a", (0, 0, 32, "w")), _k("b", (0, 32, 64, "w")), _k("c", (1, 0, 64, "w")),
               _k("empty", (0, 0, 0, "w"), (0, 10, 10, "rw"))])
    assert p.graph.number_of_edges() == 0


def test_write_covering_earlier_accesses_keeps_later_ones_ordered():
    # the pass forgets accesses a covering write hides; later conflicts must still be found
    p = _deps([_k("w0", (0, 0, 64, "w")), _k("r1", (0, 0, 8, "r")), _k("w2", (0, 0, 64, "w")),
               _k("r3", (0, 56, 64, "r")), _k("w4", (0, 0, 8, "w")), _k("w5", (0, 4, 12, "w"))])
    assert {(0, 1), (1, 2), (0, 2), (2, 3), (2, 4), (4, 5)} <= set(p.graph.edges)


def test_passes_are_pure():
    prog = _hand([_k("a", (0, 0, 8, "w")), _k("b", (0, 0, 8, "rw")), _k("c", (0, 0, 8, "r"))])
    before = list(prog.graph.edges)
    deps = add_dependencies(prog)
    assert list(prog.graph.edges) == before == []
    edges = sorted(deps.graph.edges)
    red = transitive_reduction(deps)
    assert sorted(deps.graph.edges) == edges
    lanes = find_lanes(red)
    assert "lane" not in red.graph.nodes[0]
    assert lanes.graph.nodes[0]["lane"] == 0
    assert deps.ops is prog.ops and red.ops is prog.ops


# ---------------------------------------------------------------------------
# transitive reduction

def test_transitive_reduction_keeps_node_and_edge_data():
    p = _deps([_k("a", (0, 0, 64, "w")), _k("b", (0, 0, 32, "rw")), _k("c", (0, 0, 64, "r")),
               _k("d", (1, 0, 8, "w"))])
    assert (0, 2) in p.graph.edges  # c reads bytes of a that b does not touch
    g = p.graph.copy()
    g.nodes[1]["mark"] = "kept"
    g.edges[0, 1]["mark"] = "edge kept"
    red = transitive_reduction(p.replace(graph=g))
    tg.verify(red, check_order=True)
    assert sorted(red.graph.edges) == [(0, 1), (1, 2)]
    assert red.graph.edges[0, 1]["mark"] == "edge kept"
    assert red.graph.edges[0, 1]["hazards"] == p.graph.edges[0, 1]["hazards"]
    assert red.graph.edges[1, 2]["hazard"] == "RAW"
    assert red.graph.nodes[1]["mark"] == "kept"
    assert all(red.graph.nodes[i]["op"] is p.ops[i] for i in range(4))
    assert 3 in red.graph.nodes  # isolated nodes stay


def test_transitive_reduction_same_reachability():
    ops = [_k(f"k{i}", (i % 2, 8 * (i % 3), 8 * (i % 3) + 24, "rw" if i % 2 else "w"))
           for i in range(8)]
    p = _deps(ops)
    red = transitive_reduction(p)
    closure = nx.transitive_closure_dag
    assert set(closure(red.graph).edges) == set(closure(p.graph).edges)
    assert red.graph.number_of_edges() <= p.graph.number_of_edges()


def test_transitive_reduction_equals_networkx_on_random_dags():
    import random

    from tracegraph.ir import op_graph
    rng = random.Random(7)
    for trial in range(40):
        n = rng.randrange(2, 40)
        ops = tuple(_k(f"k{i}", (0, 0, 8, "r")) for i in range(n))
        g = op_graph(ops)
        for v in range(n):
            for u in range(v):
                if rng.random() < 0.25:
                    g.add_edge(u, v, hazard="RAW", hazards=frozenset({"RAW"}))
        p = _deps(ops).replace(graph=g)
        red = transitive_reduction(p)
        assert set(red.graph.edges) == set(nx.transitive_reduction(g).edges), trial


# ---------------------------------------------------------------------------
# on traced programs

def test_diamond_branches_unordered_joined_at_add():
    @tg.compile
    def step(x, y):
        u, v, out = tg.empty_like(x), tg.empty_like(y), tg.empty_like(x)
        scale[1, 16](x, 2.0, u)
        scale[1, 16](y, 3.0, v)
        add[1, 16](u, v, out)
        return out

    for args in [(_dev(), _dev()), (np.arange(16.0), np.ones(16))]:
        p = tg.verify(step.trace(*args), check_order=True)
        ks = [i for i, op in enumerate(p.ops) if op.kind == "kernel"]
        s1, s2, a = ks
        assert not _ordered(p, s1, s2)
        assert set(p.graph.predecessors(a)) == {s1, s2}
        assert p.graph.edges[s1, a]["hazard"] == "RAW"
        assert p.graph.edges[s2, a]["hazard"] == "RAW"
        assert a in p.graph.graph["joins"] and p.graph.nodes[a]["join"]
        assert p.graph.nodes[s1]["lane"] != p.graph.nodes[s2]["lane"]
        assert p.graph.graph["lanes"] >= 2


def test_in_place_chain_stays_a_chain():
    @tg.compile
    def f(x):
        for _ in range(4):
            iscale[1, 16](x, 2.0)
        return x

    p = tg.verify(f.trace(_dev()), check_order=True)
    assert sorted(p.graph.edges) == [(0, 1), (1, 2), (2, 3)]
    assert all(h == frozenset({"RAW", "WAW", "WAR"})
               for _, _, h in p.graph.edges(data="hazards"))
    assert p.graph.graph["lanes"] == 1
    assert p.graph.graph["forks"] == [] and p.graph.graph["joins"] == []


def test_disjoint_halves_of_one_buffer_are_unordered():
    @tg.compile
    def f(x):
        iscale[1, 8](x[:8], 2.0)
        iscale[1, 8](x[8:], 3.0)
        iscale[1, 8](x[::2], 5.0)   # touches bytes of both halves: must follow both
        return x

    p = tg.verify(f.trace(_dev()), check_order=True)
    assert sorted(p.graph.edges) == [(0, 2), (1, 2)]
    assert p.graph.nodes[0]["lane"] != p.graph.nodes[1]["lane"]


def test_overlapping_slices_are_ordered():
    @tg.compile
    def f(x, y):
        fill[1, 8](x[:10], 1.0)
        fill[1, 8](x[6:], 2.0)          # WAW on bytes 48..80
        copy[1, 8](x[9:12], y[:3])      # reads both
        copy[1, 8](y[8:], x[12:])       # WAR of nothing above on y; writes x[12:] (WAW)
        return x, y

    p = tg.verify(f.trace(_dev(), _dev()), check_order=True)
    e = p.graph.edges
    assert e[0, 1]["hazard"] == "WAW"
    assert e[1, 2]["hazard"] == "RAW"
    assert (0, 2) not in e  # implied through 1
    assert e[1, 3]["hazards"] == frozenset({"WAW"})
    assert not _ordered(p, 2, 3)


def test_input_aliases_are_ordered():
    @tg.compile
    def f(a, b):
        iscale[1, 8](a, 2.0)
        iscale[1, 8](b, 3.0)
        return a

    base = _dev(24)
    p = tg.verify(f.trace(base[:16], base[8:]), check_order=True)
    assert list(p.graph.edges) == [(0, 1)]
    q = tg.verify(f.trace(base[:8], base[8:]), check_order=True)
    assert q.graph.number_of_edges() == 0


def test_fork_and_lanes():
    @tg.compile
    def f(x):
        u, v, w = tg.empty(16), tg.empty(16), tg.empty(16)
        scale[1, 16](x, 1.0, u)     # 0: fork
        scale[1, 16](u, 2.0, v)     # 1
        scale[1, 16](u, 3.0, w)     # 2
        iscale[1, 16](v, 2.0)       # 3: continues 1's lane
        add[1, 16](v, w, x)         # 4: join (and WAR on x after 0)
        return x

    p = tg.verify(f.trace(_dev()), check_order=True)
    g = p.graph
    assert g.graph["forks"] == [0] and g.graph["joins"] == [4]
    assert g.nodes[0]["fork"] and not g.nodes[1]["fork"]
    assert g.nodes[1]["lane"] == g.nodes[3]["lane"] == g.nodes[0]["lane"]
    assert g.nodes[2]["lane"] != g.nodes[1]["lane"]
    assert g.graph["lanes"] == 2
    assert (0, 4) not in g.edges  # the WAR on x is implied by 0 -> 1 -> 3 -> 4


# ---------------------------------------------------------------------------
# barriers: tg.record / tg.wait / tg.callback with no arrays

def test_barrier_ops_order_everything():
    ev = cuda.event()
    calls = []

    @tg.compile
    def f(x, y):
        iscale[1, 8](x, 2.0)         # 0
        iscale[1, 8](y, 2.0)         # 1
        tg.record(ev)                # 2: after 0 and 1
        iscale[1, 8](x, 2.0)         # 3
        tg.wait(ev)                  # 4
        tg.callback(lambda: calls.append(1))  # 5
        iscale[1, 8](y, 2.0)         # 6
        iscale[1, 8](x, 2.0)         # 7
        return x, y

    p = tg.verify(f.trace(_dev(8), _dev(8)), check_order=True)
    kinds = [op.kind for op in p.ops]
    assert kinds == ["kernel", "kernel", "event_record", "kernel", "event_wait", "host",
                     "kernel", "kernel"]
    assert all(p.ops[i].barrier and not p.ops[i].accesses for i in (2, 4, 5))
    assert p.ops[2].data.event is ev and p.ops[4].data.event is ev
    n = len(p.ops)
    for b in (2, 4, 5):
        for i in range(n):
            if i < b:
                assert nx.has_path(p.graph, i, b), (i, b)
            elif i > b:
                assert nx.has_path(p.graph, b, i), (b, i)
    assert set(p.graph.predecessors(2)) == {0, 1}
    assert set(p.graph.successors(5)) == {6, 7}
    assert not _ordered(p, 6, 7)
    assert calls == []  # recorded, not called


def test_record_and_wait_on_arrays_order_only_those():
    ev = cuda.event()

    @tg.compile
    def f(x, y):
        iscale[1, 8](x, 2.0)         # 0
        tg.record(ev, x)             # 1: after the writer of x only
        iscale[1, 8](y, 2.0)         # 2: free
        tg.wait(ev, y)               # 3: later work on y waits
        iscale[1, 8](y, 3.0)         # 4
        iscale[1, 8](x, 3.0)         # 5
        return x, y

    p = tg.verify(f.trace(_dev(8), _dev(8)), check_order=True)
    assert not any(op.barrier for op in p.ops)
    assert list(p.graph.predecessors(1)) == [0]
    assert not _ordered(p, 1, 2)
    assert nx.has_path(p.graph, 3, 4) and nx.has_path(p.graph, 2, 3)
    assert not _ordered(p, 3, 5)


# ---------------------------------------------------------------------------
# property: every conflict ordered, every edge a real conflict

_acc = st.tuples(st.integers(0, 2), st.integers(0, 12), st.integers(0, 6),
                 st.sampled_from(["r", "w", "rw"]))


@st.composite
def _programs(draw):
    n = draw(st.integers(1, 12))
    ops = []
    for i in range(n):
        barrier = draw(st.integers(0, 9)) == 0
        accs = [] if barrier else draw(st.lists(_acc, min_size=0, max_size=3))
        ops.append(_k(f"k{i}", *[(b, 4 * s, 4 * (s + ln), m) for b, s, ln, m in accs],
                      barrier=barrier))
    return ops


def _conflict(a: Op, b: Op) -> bool:
    if a.barrier or b.barrier:
        return True
    return any(x.overlaps(y) and (x.writes or y.writes) for x in a.accesses for y in b.accesses)


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(_programs())
def test_dependencies_property(ops):
    prog = _hand(ops, nbuf=3, nbytes=4 * 20)
    deps = tg.verify(add_dependencies(prog), check_order=True)
    for u, v in deps.graph.edges:
        assert _conflict(ops[u], ops[v]) or ops[u].barrier or ops[v].barrier, (u, v)
    full = run_passes(prog, check=True)
    closure = nx.transitive_closure_dag
    assert set(closure(full.graph).edges) == set(closure(deps.graph).edges)
    assert set(full.graph.edges) <= set(deps.graph.edges)
    assert nx.transitive_reduction(full.graph).number_of_edges() == full.graph.number_of_edges()
