"""Fork and join points, and lanes for display."""
from __future__ import annotations

from ..ir import Program


def find_lanes(program: Program) -> Program:
    """Mark forks, joins and parallel lanes.

    Requires: a dependency graph whose edges go forward in program order.
    Guarantees: every node gets `lane` (an int; a chain of ops keeps one lane, a fork
    starts new ones), `fork` (more than one successor) and `join` (more than one
    predecessor); graph attributes `lanes` (count), `forks` and `joins` (node lists).
    """
    g = program.graph.copy()
    lanes = 0
    continued: set[int] = set()  # nodes whose lane a successor already took
    for v in sorted(g.nodes):
        lane = None
        for u in sorted(g.predecessors(v)):
            if u not in continued:
                continued.add(u)
                lane = g.nodes[u]["lane"]
                break
        if lane is None:
            lane, lanes = lanes, lanes + 1
        g.nodes[v]["lane"] = lane
        g.nodes[v]["fork"] = g.out_degree(v) > 1
        g.nodes[v]["join"] = g.in_degree(v) > 1
    g.graph["lanes"] = lanes
    g.graph["forks"] = [v for v in g if g.nodes[v]["fork"]]
    g.graph["joins"] = [v for v in g if g.nodes[v]["join"]]
    return program.replace(graph=g)
