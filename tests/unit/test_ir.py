"""The IR: View.byte_range, Access overlaps, and verify() on good and bad programs."""
from __future__ import annotations

import dataclasses

import networkx as nx
import numpy as np
import pytest

import tracegraph as tg
from tracegraph import ir
from tracegraph.ir import Access, Buffer, Op, Program, View, op_graph, verify

F8 = np.dtype(np.float64)


def _numpy_byte_range(base: np.ndarray, view: np.ndarray) -> tuple[int, int]:
    """The bytes of `base` that `view` touches, measured on real NumPy memory."""
    if view.size == 0:
        raise ValueError("empty")
    start = base.__array_interface__["data"][0]
    idx = np.indices(view.shape).reshape(view.ndim, -1).T
    addrs = [view.__array_interface__["data"][0] + int(np.dot(i, view.strides)) for i in idx]
    return (min(addrs) - start, max(addrs) - start + view.itemsize)


def _view_of(base: np.ndarray, view: np.ndarray) -> View:
    offset = view.__array_interface__["data"][0] - base.__array_interface__["data"][0]
    return View(0, offset, view.shape, view.strides, view.dtype)


@pytest.mark.parametrize("index", [
    np.s_[:],
    np.s_[3:9],
    np.s_[::2],
    np.s_[::-1],
    np.s_[10:2:-3],
    np.s_[-1],
    np.s_[2:5, :],
    np.s_[:, ::-2],
    np.s_[::-1, ::-1],
    np.s_[1, ::-1],
    np.s_[::-2, 1:3],
])
def test_byte_range_matches_numpy(index):
    base = np.zeros(48, F8)
    arr = base.reshape(6, 8) if isinstance(index, tuple) else base
    view = arr[index]
    if np.ndim(view) == 0:
        view = arr[index:index + 1] if index >= 0 else arr[index:]
    assert _view_of(base, view).byte_range() == _numpy_byte_range(base, view)


def test_byte_range_negative_stride_by_hand():
    # elements 7, 5, 3 of a float64 buffer: bytes [24, 64)
    v = View(0, 7 * 8, (3,), (-16,), F8)
    assert v.byte_range() == (24, 64)
    # a transposed 2x3 view (strides swapped) still covers the whole 6 elements
    t = View(0, 0, (3, 2), (8, 24), F8)
    assert t.byte_range() == (0, 48)


def test_byte_range_empty_and_scalar():
    assert View(0, 40, (0,), (8,), F8).byte_range() == (40, 40)
    assert View(0, 40, (3, 0), (8, 8), F8).byte_range() == (40, 40)
    assert View(0, 16, (), (), F8).byte_range() == (16, 24)
    assert View(0, 16, (), (), F8).size == 1


def test_byte_range_broadcast_stride_zero():
    v = View(0, 8, (4, 3), (0, 8), F8)
    assert v.byte_range() == (8, 32)


def test_is_c_contiguous():
    assert View(0, 0, (2, 3), (24, 8), F8).is_c_contiguous()
    assert not View(0, 0, (2, 3), (8, 16), F8).is_c_contiguous()
    assert View(0, 0, (1, 3), (999, 8), F8).is_c_contiguous()  # size-1 dims do not matter
    assert not View(0, 0, (3,), (-8,), F8).is_c_contiguous()


@pytest.mark.parametrize("a, b, expected", [
    ((0, 0, 8, "r"), (0, 8, 16, "r"), False),     # adjacent, not overlapping
    ((0, 0, 9, "r"), (0, 8, 16, "w"), True),      # one byte in common
    ((0, 0, 16, "w"), (1, 0, 16, "w"), False),    # different buffers
    ((0, 4, 12, "rw"), (0, 0, 64, "r"), True),    # contained
    ((0, 0, 64, "r"), (0, 4, 12, "rw"), True),    # containing
    ((0, 8, 8, "w"), (0, 0, 16, "w"), False),     # empty range overlaps nothing
])
def test_access_overlaps(a, b, expected):
    x, y = Access(*a), Access(*b)
    assert x.overlaps(y) is expected
    assert y.overlaps(x) is expected


def test_access_modes():
    assert Access(0, 0, 8, "r").reads and not Access(0, 0, 8, "r").writes
    assert Access(0, 0, 8, "w").writes and not Access(0, 0, 8, "w").reads
    assert Access(0, 0, 8, "rw").reads and Access(0, 0, 8, "rw").writes


def test_ir_is_frozen():
    v = View(0, 0, (4,), (8,), F8)
    with pytest.raises(dataclasses.FrozenInstanceError):
        v.offset = 8  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        Access(0, 0, 8, "r").mode = "w"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        Op("kernel", "k").name = "j"  # type: ignore[misc]


# ---------------------------------------------------------------------------
# verify()

def _program(ops, buffers=None, edges=()):
    ops = tuple(ops)
    buffers = tuple(buffers if buffers is not None else [Buffer(0, 64, ir.TEMP, "buf")])
    g = op_graph(ops)
    for u, v, h in edges:
        g.add_edge(u, v, hazard=h, hazards=frozenset({h}))
    return Program("p", ops, buffers, (), ("call", (), ()), (), ("none",), g)


def _kernel(name, *accesses, location="user.py:7"):
    return Op("kernel", name, tuple(accesses), location)


def test_verify_accepts_a_good_program():
    p = _program([_kernel("w", Access(0, 0, 64, "w")), _kernel("r", Access(0, 0, 64, "r"))],
                 edges=[(0, 1, "RAW")])
    assert verify(p, check_order=True) is p


def test_verify_names_node_with_access_outside_its_buffer():
    p = _program([_kernel("ok", Access(0, 0, 8, "r")),
                  _kernel("overrun", Access(0, 32, 72, "w"), location="mine.py:42")])
    with pytest.raises(tg.VerifyError) as e:
        verify(p)
    msg = str(e.value)
    assert "node 1" in msg and "overrun" in msg and "mine.py:42" in msg and "72" in msg


def test_verify_names_node_with_unknown_buffer():
    p = _program([_kernel("lost", Access(3, 0, 8, "r"))])
    with pytest.raises(tg.VerifyError, match=r"node 0 \(lost.*unknown buffer 3"):
        verify(p)


def test_verify_rejects_bad_mode_and_kind():
    with pytest.raises(tg.VerifyError, match="node 0.*mode 'x'"):
        verify(_program([_kernel("k", Access(0, 0, 8, "x"))]))
    with pytest.raises(tg.VerifyError, match="node 0.*unknown op kind 'launch'"):
        verify(_program([Op("launch", "k")]))


def test_verify_rejects_backward_and_untyped_edges():
    ops = [_kernel("a", Access(0, 0, 8, "w")), _kernel("b", Access(0, 0, 8, "r"))]
    p = _program(ops)
    g = p.graph.copy()
    g.add_edge(1, 0, hazard="RAW")
    with pytest.raises(tg.VerifyError, match="1->0"):
        verify(p.replace(graph=g))
    g = p.graph.copy()
    g.add_edge(0, 1)
    with pytest.raises(tg.VerifyError, match=r"0->1 \(a -> b\) has no hazard"):
        verify(p.replace(graph=g))


def test_verify_rejects_graph_not_matching_ops():
    p = _program([_kernel("a")])
    g = p.graph.copy()
    g.add_node(5, op=Op("kernel", "ghost"))
    with pytest.raises(tg.VerifyError, match="do not match"):
        verify(p.replace(graph=g))
    g = nx.DiGraph()
    g.add_node(0, op=Op("kernel", "other"))
    with pytest.raises(tg.VerifyError, match="node 0.*'op' is not ops"):
        verify(p.replace(graph=g))


def test_verify_rejects_malformed_buffer():
    with pytest.raises(tg.VerifyError, match="buffer 0"):
        verify(_program([_kernel("a")], buffers=[Buffer(0, 8, "nowhere")]))
    with pytest.raises(tg.VerifyError, match="buffer 1"):
        verify(_program([_kernel("a")], buffers=[Buffer(0, 8, ir.TEMP), Buffer(7, 8, ir.TEMP)]))


def test_check_order_names_both_unordered_nodes():
    ops = [_kernel("writer", Access(0, 0, 32, "w"), location="f.py:1"),
           _kernel("reader", Access(0, 24, 40, "r"), location="f.py:2")]
    p = _program(ops)
    verify(p)  # structurally fine
    with pytest.raises(tg.VerifyError) as e:
        verify(p, check_order=True)
    msg = str(e.value)
    assert "nodes 0 (writer" in msg and "1 (reader" in msg and "[24, 32)" in msg


def test_check_order_accepts_transitive_paths_and_ignores_disjoint_or_readonly():
    ops = [_kernel("w0", Access(0, 0, 32, "w")),
           _kernel("mid", Access(0, 0, 32, "r"), Access(0, 32, 64, "w")),
           _kernel("r2", Access(0, 0, 64, "r")),      # ordered after w0 only through mid
           _kernel("r3", Access(0, 0, 32, "r")),      # reader of w0's bytes, via edge
           _kernel("d", Access(0, 32, 64, "r"))]      # reads mid's bytes
    p = _program(ops, edges=[(0, 1, "RAW"), (1, 2, "RAW"), (0, 3, "RAW"), (1, 4, "RAW")])
    verify(p, check_order=True)


def test_check_order_barrier_must_be_ordered():
    ops = [_kernel("a", Access(0, 0, 8, "w")), Op("host", "cb", (), "f.py:3", barrier=True)]
    with pytest.raises(tg.VerifyError, match="barrier"):
        verify(_program(ops), check_order=True)
    verify(_program(ops, edges=[(0, 1, "RAW")]), check_order=True)


def test_program_replace_keeps_other_fields():
    p = _program([_kernel("a")])
    g = nx.DiGraph(p.graph)
    q = p.replace(graph=g)
    assert q is not p and q.graph is g and q.ops is p.ops and q.buffers is p.buffers
    assert p.graph is not g
