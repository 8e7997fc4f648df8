"""tg.visualize: DOT text with kernels, accesses, locations, hazards and lanes."""
from __future__ import annotations

import os
import shutil
import sys

import numpy as np
import pydot
import pytest
from numba import cuda
from small_kernels import add, iscale, scale

import tracegraph as tg

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # pydot's parser

HERE = os.path.basename(__file__)
LINES: dict[str, int] = {}


def _here(name: str) -> None:
    LINES[name] = sys._getframe(1).f_lineno + 1


@tg.compile
def step(x, y):
    u, v, out = tg.empty_like(x), tg.empty_like(y), tg.empty_like(x)
    _here("scale_x")
    scale[1, 16](x, 2.0, u)
    _here("scale_y")
    scale[2, 8](y, 3.0, v)
    _here("add")
    add[(1, 2), (8, 2)](u, v, out)
    iscale[1, 16](u, 4.0)  # WAR after add's read of u
    return out


def _parse(text: str) -> pydot.Dot:
    (graph,) = pydot.graph_from_dot_data(text)
    return graph


def _labels(graph: pydot.Dot) -> dict[str, str]:
    labels = {}
    for sub in [graph] + graph.get_subgraphs():
        for node in sub.get_nodes():
            label = node.get("label")
            if label:
                labels[node.get_name()] = label.strip('"')
    return labels


def test_dot_shows_kernels_dims_accesses_and_locations():
    x, y = cuda.to_device(np.zeros(16)), cuda.to_device(np.zeros(16))
    text = tg.visualize(step, x, y)
    assert isinstance(text, str)
    graph = _parse(text)
    labels = _labels(graph)
    prog = step.trace(x, y)
    assert len(labels) == len(prog.ops)
    by_first_line = {lab.split("\\n")[0]: lab for lab in labels.values()}
    assert set(by_first_line) == {"scale[1, 16]", "scale[2, 8]", "add[1x2, 8x2]",
                                  "iscale[1, 16]"}
    sx = by_first_line["scale[1, 16]"].split("\\n")
    assert "reads x" in sx and any(line.startswith("writes ") for line in sx)
    assert sx[-1] == f"{HERE}:{LINES['scale_x']}"
    assert by_first_line["scale[2, 8]"].split("\\n")[-1] == f"{HERE}:{LINES['scale_y']}"
    ad = by_first_line["add[1x2, 8x2]"].split("\\n")
    assert ad[-1] == f"{HERE}:{LINES['add']}"
    assert ad[1].startswith("reads ") and ad[1].count(",") == 1  # u and v


def test_edges_carry_hazards_and_lanes_are_clusters():
    x, y = cuda.to_device(np.zeros(16)), cuda.to_device(np.zeros(16))
    graph = _parse(tg.visualize(step, x, y))
    edges = {(e.get_source(), e.get_destination()): e.get("label") for e in graph.get_edges()}
    prog = step.trace(x, y)
    assert set(edges) == {(f"n{u}", f"n{v}") for u, v in prog.graph.edges}
    for (u, v), label in edges.items():
        hazards = prog.graph.edges[int(u[1:]), int(v[1:])]["hazards"]
        assert set(label.strip('"').split("/")) == set(hazards)
    assert "WAR" in {h for lab in edges.values() for h in lab.strip('"').split("/")}
    clusters = graph.get_subgraphs()
    assert all(c.get_name().startswith("cluster_") for c in clusters)
    assert len(clusters) == prog.graph.graph["lanes"] == 2
    lanes = [{n.get_name() for n in c.get_nodes()} for c in clusters]
    # the two scale kernels run side by side: different clusters
    assert all(not ({"n0", "n1"} <= lane) for lane in lanes)


def test_visualize_latest_program_and_plan(tmp_path):
    @tg.compile(backend="sim")
    def f(x):
        iscale[1, 16](x, 2.0)
        return x

    with pytest.raises(tg.TracegraphError, match="no compiled graph yet"):
        tg.visualize(f)
    f(np.zeros(16))
    latest = tg.visualize(f)
    assert "iscale[1, 16]" in latest
    assert tg.visualize(f.latest.program) == latest
    assert tg.visualize(f.latest.plan) == latest
    path = tmp_path / "g.dot"
    assert tg.visualize(f, path=str(path)) == path.read_text()
    with pytest.raises(tg.TracegraphError, match="cannot visualize a int"):
        tg.visualize(3)
    with pytest.raises(tg.TracegraphError, match="unknown format 'jpeg'"):
        tg.visualize(f, format="jpeg")


def test_svg_without_graphviz_says_what_to_install(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no `dot` anywhere on it
    x, y = np.zeros(16), np.zeros(16)
    for fmt in ("svg", "png"):
        with pytest.raises(tg.TracegraphError) as e:
            tg.visualize(step, x, y, format=fmt)
        assert "Graphviz" in str(e.value) and fmt in str(e.value)
        assert "install graphviz" in e.value.fix and "format='dot'" in e.value.fix


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz `dot` is not installed")
def test_svg_and_png_render_with_graphviz(tmp_path):
    x, y = np.zeros(16), np.zeros(16)
    svg = tg.visualize(step, x, y, format="svg", path=str(tmp_path / "g.svg"))
    assert isinstance(svg, str) and "<svg" in svg and "scale[1, 16]" in svg
    assert (tmp_path / "g.svg").read_text() == svg
    png = tg.visualize(step, x, y, format="png")
    assert isinstance(png, bytes) and png[:8] == b"\x89PNG\r\n\x1a\n"
