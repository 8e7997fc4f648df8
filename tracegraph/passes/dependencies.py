"""Dependency edges from byte-range accesses."""
from __future__ import annotations

from itertools import pairwise

from ..ir import HAZARDS, Access, OpKind, Program, copy_graph, memory_regions, region_access


def _hazards(earlier: Access, later: Access) -> frozenset[str]:
    key = (earlier.mode, later.mode)
    found = _HAZARDS_OF.get(key)
    if found is None:
        found = _HAZARDS_OF[key] = frozenset(
            h for h, yes in (("RAW", earlier.writes and later.reads),
                             ("WAW", earlier.writes and later.writes),
                             ("WAR", earlier.reads and later.writes)) if yes)
    return found


_HAZARDS_OF: dict[tuple[str, str], frozenset[str]] = {}  # (earlier mode, later mode) ->
_RAW, _WAR, _WAW = frozenset({"RAW"}), frozenset({"WAR"}), frozenset({"WAW"})


def primary_hazard(hazards: set[str] | frozenset[str]) -> str:
    return next(h for h in HAZARDS if h in hazards)


def add_dependencies(program: Program) -> Program:
    """Order every two ops that touch overlapping bytes of one buffer where one writes.

    Requires: a graph with one node per op and no edges.
    Guarantees: for every such pair (i < j) a path i -> j; each edge carries `hazards`
    (the set of RAW/WAR/WAW it stands for) and `hazard` (the first of RAW, WAW, WAR in it).
    Reads of the same bytes, and disjoint byte ranges of one buffer, get no edge. Buffers
    that share memory (captured arrays, and inputs that overlapped them) compare in their
    region's coordinates (ir.memory_regions). A barrier op is ordered after all earlier ops
    and before all later ones. Not transitively reduced.
    """
    regions = memory_regions(program.buffers, program.aliased_inputs)
    edges: dict[tuple[int, int], frozenset[str]] = {}
    # per buffer, the accesses a later op may still conflict with: (access, op index)
    live: dict[int, list[tuple[Access, int]]] = {}
    last_barrier: int | None = None
    since_barrier: list[int] = []

    def edge(i: int, j: int, hazards: frozenset[str]) -> None:
        old = edges.get((i, j))
        edges[(i, j)] = hazards if old is None else old | hazards

    for j, op in enumerate(program.ops):
        if op.barrier:
            for i in since_barrier:
                writes = any(a.writes for a in program.ops[i].accesses)
                edge(i, j, _RAW if writes else _WAR)
            if last_barrier is not None and not since_barrier:
                edge(last_barrier, j, _WAW)
            last_barrier, since_barrier = j, []
            live.clear()
        else:
            if last_barrier is not None:
                writes = any(a.writes for a in op.accesses)
                edge(last_barrier, j, _WAW if writes else _RAW)
            since_barrier.append(j)
        mine = [region_access(a, regions) if regions else a
                for a in op.accesses if a.stop > a.start]
        for a in mine:
            writes = a.writes
            for r, i in live.get(a.buffer, ()):
                if i != j and r.start < a.stop and a.start < r.stop and (writes or r.writes):
                    edge(i, j, _hazards(r, a))
        for a in mine:
            records = live.setdefault(a.buffer, [])
            if a.writes:
                # what this write covers is ordered before it; later conflicts with the
                # covered accesses are conflicts with this write too
                records[:] = [(r, i) for r, i in records
                              if i == j or not (a.start <= r.start and r.stop <= a.stop)]
            records.append((a, j))

    graph = copy_graph(program.graph)
    succ, pred = graph._succ, graph._pred  # (add_edges_from: about 2 us an edge)
    for (i, j), h in edges.items():
        data = succ[i].get(j)
        if data is None:
            succ[i][j] = pred[j][i] = _edge_data(h)
        else:  # (an edge the graph had: its data updated, as add_edges_from does)
            data.update(_edge_data(h))
    return program.replace(graph=graph)


def _edge_data(hazards: frozenset[str]) -> dict:
    primary = _PRIMARY.get(hazards)
    if primary is None:
        primary = _PRIMARY[hazards] = primary_hazard(hazards)
    return {"hazards": hazards, "hazard": primary}


_PRIMARY: dict[frozenset[str], str] = {}  # hazards -> the primary one (a few sets in all)


def order_host_callbacks(program: Program) -> Program:
    """Host callbacks in program order.

    Requires: a graph whose edges go forward in program order.
    Guarantees: a path between every two host ops in program order (an edge between
    consecutive ones, WAW: each may use host state an earlier one left, which no access
    shows); other edges unchanged.
    """
    hosts = [j for j, op in enumerate(program.ops) if op.kind == OpKind.HOST]
    missing = [(i, j) for i, j in pairwise(hosts) if not program.graph.has_edge(i, j)]
    if not missing:
        return program
    graph = copy_graph(program.graph)
    graph.add_edges_from((i, j, {"hazards": frozenset({"WAW"}), "hazard": "WAW"})
                         for i, j in missing)
    return program.replace(graph=graph)


def transitive_reduction(program: Program) -> Program:
    """Drop edges implied by longer paths.

    Requires: edges that go forward in program order (so program order is topological).
    Guarantees: the same reachability with the fewest edges (what
    networkx.transitive_reduction gives); node data and the data of kept edges unchanged.

    An edge u -> v is implied exactly when another predecessor of v has u as an ancestor.
    Ancestor sets are Python ints used as bitsets, built in program order: near-linear,
    where networkx's general algorithm took 188 ms on a 1,000-launch chain.
    """
    g = program.graph
    if all(len(before) <= 1 for before in g._pred.values()):
        return program  # a forest: nothing is implied twice
    ancestors: dict[int, int] = {}
    implied: list[tuple[int, int]] = []
    for v in sorted(g.nodes):
        preds = list(g.predecessors(v))
        mask = 0
        for p in preds:
            mask |= ancestors[p] | (1 << p)
        ancestors[v] = mask
        if len(preds) > 1:
            implied.extend((u, v) for u in preds
                           if any((ancestors[w] >> u) & 1 for w in preds if w != u))
    if not implied:
        return program
    reduced = g.copy()
    reduced.remove_edges_from(implied)
    return program.replace(graph=reduced)
