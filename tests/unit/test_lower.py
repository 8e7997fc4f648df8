"""Lowering a Program to a Plan of explicit graph nodes."""
from __future__ import annotations

import numba
import numpy as np
import pytest
from numba import cuda
from numba.core import datamodel, types
from small_kernels import add, copy, fill, iscale, scale

import tracegraph as tg
from tracegraph import ir
from tracegraph.lower import CScalar, Ptr, lower


def _dev(n=16):
    return cuda.to_device(np.arange(n, dtype=np.float64))


@tg.compile
def diamond(x, y):
    u, v, out = tg.empty_like(x), tg.empty_like(y), tg.zeros_like(x)
    scale[1, 16](x, 2.0, u)
    scale[1, 16](y, 3.0, v)
    add[1, 16](u, v, out)
    return out


def test_one_node_per_op_with_predecessors_as_deps():
    prog = tg.verify(diamond.trace(np.arange(16.0), np.ones(16)), check_order=True)
    plan = lower(prog)
    assert isinstance(plan, tg.Plan)
    assert len(plan.nodes) == len(prog.ops)
    for i, (node, op) in enumerate(zip(plan.nodes, prog.ops)):
        assert node.index == i and node.op is op and node.kind == op.kind
        assert node.deps == tuple(sorted(prog.graph.predecessors(i)))
        assert all(d < i for d in node.deps)
    assert plan.program is prog
    assert [n.name for n in plan.nodes if n.kind == "kernel"] == ["scale", "scale", "add"]


def test_memcpy_in_at_roots_out_at_leaves_and_memset_for_zeros():
    plan = diamond.lower(np.arange(16.0), np.ones(16))
    used = {d for n in plan.nodes for d in n.deps}
    copies_in = [n for n in plan.nodes if n.kind == "memcpy" and n.op.data.role == "input"]
    copies_out = [n for n in plan.nodes if n.kind == "memcpy" and n.op.data.role == "output"]
    assert len(copies_in) == 2 and len(copies_out) == 1
    for n in copies_in:
        assert n.deps == () and n.nbytes == 128
        dst, src = n.op.data.dst, n.op.data.src
        assert plan.buffers[src.buffer].kind == ir.STAGING
        assert plan.buffers[dst.buffer].kind == ir.HOST_INPUT
    (out,) = copies_out
    assert out.index not in used and out.nbytes == 128
    assert plan.buffers[out.op.data.dst.buffer].kind == ir.STAGING
    (memset,) = [n for n in plan.nodes if n.kind == "memset"]
    assert memset.nbytes == 128 and memset.op.data.value == 0
    add_node = next(n for n in plan.nodes if n.name == "add")
    assert memset.index in add_node.deps  # the zeroed buffer is written by add after it


def test_device_inputs_need_no_copies():
    plan = diamond.lower(_dev(), _dev())
    assert [n.kind for n in plan.nodes] == ["memset", "kernel", "kernel", "kernel"]
    assert plan.device_mode
    assert set(plan.patchable_buffers) == {plan.inputs[0].buffer, plan.inputs[1].buffer}
    assert all(plan.buffers[b].kind == ir.DEVICE_INPUT for b in plan.patchable_buffers)


def _array_fields(ty):
    """Numba's own struct members for an array type (not a hard-coded list)."""
    return datamodel.default_manager.lookup(ty)._fields


def test_kernel_params_follow_numbas_flattened_layout():
    @tg.compile
    def f(x, m):
        w = tg.empty((3, 4), np.float32)
        fill[1, 16](w[:, ::2], np.float32(1.5))
        copy[1, 16](x[2:10:2], x[::-1])
        scale[1, 16](x, m, x)
        return w

    plan = f.lower(_dev(), 7)
    fill_node, copy_node, scale_node = [n for n in plan.nodes if n.kind == "kernel"]
    assert _array_fields(fill_node.argtypes[0]) == ("meminfo", "parent", "nitems", "itemsize",
                                                    "data", "shape", "strides")

    # fill(w[:, ::2], float32): a 2-D float32 view with strides (16, 8) at offset 0
    wbuf = fill_node.op.data.args[0].buffer
    assert fill_node.argtypes == (types.Array(types.float32, 2, "A"), types.float32)
    assert fill_node.params == (0, 0, 6, 4, Ptr(wbuf, 0), 3, 2, 16, 8, CScalar("c_float", 1.5))

    # copy(x[2:10:2], x[::-1]): two views of one input buffer
    xbuf = plan.inputs[0].buffer
    assert copy_node.argtypes == (types.Array(types.float64, 1, "A"),) * 2
    assert copy_node.params == (0, 0, 4, 8, Ptr(xbuf, 16), 4, 16,
                                0, 0, 16, 8, Ptr(xbuf, 120), 16, -8)

    # scale(x, 7, x): a Python int argument is int64 like numba.typeof says
    assert scale_node.argtypes == (types.Array(types.float64, 1, "C"), numba.typeof(7),
                                   types.Array(types.float64, 1, "C"))
    assert scale_node.params[5:9] == (16, 8, CScalar("c_int64", 7), 0)


def test_relaunches_with_equal_but_different_scalars_lower_apart():
    """Lowering reuses a kernel's parameters for a launch with the same arguments; 1, 1.0,
    True, np.float32(1) and 0.0 / -0.0 compare equal but launch differently."""
    values = [1, 1.0, True, np.float32(1), 0.0, -0.0, 1, -0.0]

    @tg.compile
    def f(x):
        for v in values:
            scale[1, 16](x, v, x)

    nodes = [n for n in f.lower(_dev()).nodes if n.kind == "kernel"]
    got = [(n.argtypes[1], n.params[7]) for n in nodes]
    want = [(numba.typeof(v), None) for v in values]
    assert [t for t, _ in got] == [t for t, _ in want]
    assert [repr(p) for _, p in got] == [repr(nodes[k].params[7]) for k in (0, 1, 2, 3, 4, 5, 0, 5)]
    assert str(got[5][1].value) == "-0.0" and str(got[4][1].value) == "0.0"
    assert got[0][1] == CScalar("c_int64", 1) and got[2][1] is True


def test_relaunches_with_equal_tuples_of_other_types_lower_apart(backend):
    """Two namedtuples of equal values but other types (fields in another order) launch
    differently: the reuse of parameters keys tuples by their type too."""
    from collections import namedtuple
    P, Q = namedtuple("P", "x y"), namedtuple("Q", "y x")

    @cuda.jit
    def push_x(out, p):
        out[0] = out[0] * 10 + p.x

    def body(out):
        push_x[1, 1](out, P(1.0, 2.0))
        push_x[1, 1](out, Q(1.0, 2.0))

    out = cuda.to_device(np.zeros(1))
    tg.compile(body, backend=backend)(out)
    np.testing.assert_array_equal(out.copy_to_host(), [12.0])


def test_argtypes_match_numba_typeof_of_the_same_views():
    views = [np.s_[:], np.s_[::2], np.s_[3:], np.s_[::-1]]

    @tg.compile
    def f(x):
        for k in views:
            copy[1, 16](x[k], x[k])
        return x

    host = np.zeros(16, np.float32)
    plan = f.lower(cuda.to_device(host))
    for k, node in zip(views, [n for n in plan.nodes if n.kind == "kernel"]):
        assert node.argtypes[0] == numba.typeof(host[k]), k


def test_scalar_and_tuple_params():
    @tg.compile
    def f(x):
        copy[1, 16]((x, 2.0, np.int32(3), True), x)
        fill[1, 16](x, np.float16(0.5))
        fill[1, 16](x, 1 + 2j)
        return x

    plan = f.lower(_dev(4))
    t, h, c = [n for n in plan.nodes if n.kind == "kernel"]
    xbuf = plan.inputs[0].buffer
    assert t.argtypes[0] == numba.typeof((np.zeros(4), 2.0, np.int32(3), True))
    assert t.params[:7] == (0, 0, 4, 8, Ptr(xbuf, 0), 4, 8)
    assert t.params[7:10] == (CScalar("c_double", 2.0), CScalar("c_int32", 3), True)
    assert h.params[7] == CScalar("c_uint16", int(np.float16(0.5).view(np.uint16)))
    assert c.params[7:] == (CScalar("c_double", 1.0), CScalar("c_double", 2.0))
    assert CScalar("c_int32", 3).as_ctype().value == 3


def test_pointer_slots_list_every_address():
    plan = diamond.lower(np.arange(16.0), np.ones(16))
    expected: dict[int, set] = {}
    for n in plan.nodes:
        if n.kind == "kernel":
            for pos, p in enumerate(n.params):
                if isinstance(p, Ptr):
                    expected.setdefault(p.buffer, set()).add((n.index, pos, p.offset))
        elif n.kind == "memcpy":
            dst, src = n.op.data.dst, n.op.data.src
            expected.setdefault(dst.buffer, set()).add((n.index, "dst", dst.offset))
            expected.setdefault(src.buffer, set()).add((n.index, "src", src.offset))
        elif n.kind == "memset":
            dst = n.op.data.dst
            expected.setdefault(dst.buffer, set()).add((n.index, "dst", dst.offset))
    assert {b: set(s) for b, s in plan.pointer_slots.items()} == expected
    assert all(len(set(s)) == len(s) for s in plan.pointer_slots.values())
    # each kernel node's data pointers sit where Numba's layout puts them
    k = next(n for n in plan.nodes if n.name == "add")
    ptr_positions = [pos for pos, p in enumerate(k.params) if isinstance(p, Ptr)]
    assert ptr_positions == [4, 11, 18]


def test_event_and_host_nodes_are_lowered():
    ev = cuda.event()

    @tg.compile
    def f(x):
        iscale[1, 8](x, 2.0)
        tg.record(ev)
        tg.wait(ev, x)
        tg.callback(print)
        return x

    plan = f.lower(_dev(8))
    assert [n.kind for n in plan.nodes] == ["kernel", "event_record", "event_wait", "host"]
    assert [n.deps for n in plan.nodes] == [(), (0,), (1,), (2,)]
    assert plan.nodes[1].op.data.event is ev and plan.nodes[3].op.data.fn is print


def test_bad_launch_dimensions_raise_an_error_at_the_launch():
    @tg.compile
    def f(x):
        iscale[1, 2048](x, 2.0)
        return x

    # refused where the launch is traced (tests/semantics/test_launch_config.py)
    with pytest.raises(tg.TraceError, match=r"iscale\[.*2048.*\] has block x = 2048") as e:
        f.lower(_dev())
    assert e.value.where.endswith(f"test_lower.py:{f.__wrapped__.__code__.co_firstlineno + 2}")
    assert "1,024" in e.value.fix


def test_cyclic_graph_is_refused():
    prog = tg.verify(diamond.trace(_dev(), _dev()), check_order=True)
    g = prog.graph.copy()
    g.add_edge(3, 1, hazard="RAW")
    with pytest.raises(tg.LoweringError, match="cycle"):
        lower(prog.replace(graph=g))
