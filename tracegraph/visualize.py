"""Program / Plan -> DOT (and SVG/PNG through Graphviz)."""
from __future__ import annotations

import os
from typing import Any

import pydot

from .errors import TracegraphError
from .ir import Program
from .lower import Plan

_COLORS = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1",
           "#ff9da7", "#9c755f", "#bab0ac")
_SHAPES = {"kernel": "box", "memcpy": "cds", "memset": "note", "event_record": "invhouse",
           "event_wait": "house", "host": "ellipse", "conditional": "diamond"}


def visualize(target: Any, *args: Any, format: str = "dot", path: str | None = None,
              source: str = "ir", **kwargs: Any) -> str | bytes:
    """Draw a compiled function's graph, a Program or a Plan.

    With a CompiledFunction and arguments, traces those; with none, shows its latest
    compiled graph. `format` is "dot" (text), "svg" or "png" (needs Graphviz's `dot`);
    `path` also writes the result there. `source="driver"` gives the CUDA driver's own
    DOT dump of the instantiated graph (cuda backend only).
    """
    if source == "driver":
        return _driver_dot(target, path)
    program = _program_of(target, args, kwargs)
    dot = _to_pydot(program)
    if format == "dot":
        text = dot.to_string()
        if path:
            with open(path, "w") as f:
                f.write(text)
        return text
    if format not in ("svg", "png"):
        raise TracegraphError(f"unknown format {format!r}", fix='use "dot", "svg" or "png"')
    try:
        data: bytes = dot.create(prog="dot", format=format)  # type: ignore[assignment]
    except (FileNotFoundError, OSError, AssertionError) as exc:
        raise TracegraphError(f"rendering {format} needs Graphviz's `dot` program, which was "
                              f"not found ({exc})",
                              fix="install Graphviz (apt-get install graphviz, brew install "
                                  "graphviz or conda install graphviz), or use format='dot'"
                              ) from None
    if path:
        with open(path, "wb") as f:
            f.write(data)
    return data.decode() if format == "svg" else data


def _program_of(target: Any, args: tuple, kwargs: dict) -> Program:
    if isinstance(target, Program):
        return target
    if isinstance(target, Plan):
        return target.program
    if hasattr(target, "trace") and hasattr(target, "latest"):
        if args or kwargs:
            return target.trace(*args, **kwargs)
        if target.latest is None:
            raise TracegraphError(f"{target.__qualname__} has no compiled graph yet",
                                  fix="call it once, or pass example arguments to visualize")
        return target.latest.program
    raise TracegraphError(f"cannot visualize a {type(target).__name__}",
                          fix="pass a @tg.compile function, a tg.Program or a tg.Plan")


def _driver_dot(target: Any, path: str | None) -> str:
    latest = getattr(target, "latest", None)
    executable = getattr(latest, "executable", None)
    if executable is None or not hasattr(executable, "driver_dot"):
        raise TracegraphError("source='driver' needs a function compiled on the cuda backend",
                              fix="call the function once on a GPU first")
    text = executable.driver_dot()
    if path:
        with open(path, "w") as f:
            f.write(text)
    return text


def _label(program: Program, i: int) -> str:
    op = program.ops[i]
    lines = [op.describe()]
    buffers = program.buffers
    reads = sorted({buffers[a.buffer].name for a in op.accesses if a.reads})
    writes = sorted({buffers[a.buffer].name for a in op.accesses if a.writes})
    if reads:
        lines.append("reads " + ", ".join(reads))
    if writes:
        lines.append("writes " + ", ".join(writes))
    if op.location:
        lines.append(os.path.basename(op.location.rsplit(":", 1)[0]) + ":" +
                     op.location.rsplit(":", 1)[-1] if ":" in op.location else op.location)
    return "\\n".join(lines)


def _to_pydot(program: Program) -> pydot.Dot:
    g = program.graph
    dot = pydot.Dot(graph_name=_quote(program.name), graph_type="digraph", rankdir="TB",
                    fontname="Helvetica")
    lanes: dict[int, pydot.Cluster] = {}
    for i in sorted(g.nodes):
        lane = g.nodes[i].get("lane", 0)
        cluster = lanes.get(lane)
        if cluster is None:
            cluster = pydot.Cluster(f"lane{lane}", label=f"lane {lane}", style="dashed",
                                    color=_COLORS[lane % len(_COLORS)])
            lanes[lane] = cluster
            dot.add_subgraph(cluster)  # type: ignore[arg-type]  # a Cluster is a Subgraph
        op = program.ops[i]
        cluster.add_node(pydot.Node(f"n{i}", label=_quote(_label(program, i)),
                                    shape=_SHAPES.get(op.kind, "box"),
                                    color=_COLORS[lane % len(_COLORS)],
                                    fontname="Helvetica"))
    _edges(dot, program, "n")
    for i, op in enumerate(program.ops):
        if op.kind == "conditional":
            _bodies(dot, op, f"n{i}")
    return dot


def _edges(graph: Any, program: Program, prefix: str) -> None:
    for u, v, data in program.graph.edges(data=True):
        hazards = "/".join(h for h in ("RAW", "WAW", "WAR") if h in data.get("hazards", ()))
        graph.add_edge(pydot.Edge(f"{prefix}{u}", f"{prefix}{v}",
                                  label=hazards or data.get("hazard", ""),
                                  fontname="Helvetica", fontsize="10"))


def _bodies(dot: Any, op: Any, name: str) -> None:
    """A conditional node's bodies as clusters, dashed edges from the node into them."""
    c = op.conditional
    labels = {"while": ["loop body"], "if": ["then", "else"],
              "switch": [f"case {k}" for k in range(len(c.bodies))]}[c.kind]
    for k, body in enumerate(c.bodies):
        prefix = f"{name}_{k}_"
        # Any: pydot versions disagree on whether a Cluster types as a Subgraph
        cluster: Any = pydot.Cluster(prefix.strip("_"), label=labels[k], style="rounded")
        dot.add_subgraph(cluster)
        for j, inner in enumerate(body.ops):
            cluster.add_node(pydot.Node(f"{prefix}{j}", label=_quote(_label(body, j)),
                                        shape=_SHAPES.get(inner.kind, "box"),
                                        fontname="Helvetica"))
            if body.graph.in_degree(j) == 0:
                dot.add_edge(pydot.Edge(name, f"{prefix}{j}", style="dashed"))
        _edges(dot, body, prefix)
        for j, inner in enumerate(body.ops):
            if inner.kind == "conditional":
                _bodies(dot, inner, f"{prefix}{j}")


def _quote(text: str) -> str:
    return '"' + text.replace('"', "'") + '"'
