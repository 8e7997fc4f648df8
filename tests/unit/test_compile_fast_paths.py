"""The compile path's shortcuts for a loop's identical launches (issue 15, W5) keep what
the slow path would record: a tg.access declared between two launches, a stream given by
the CUDA stream protocol, the passes' shared graph parts, the IR's cheaper constructors."""
from __future__ import annotations

import dataclasses
import threading
import warnings

import numpy as np
import pytest
from numba import cuda
from small_kernels import scale

import tracegraph as tg
from tracegraph import passes
from tracegraph._numba import SIMULATOR, hooks
from tracegraph.ir import Op, OpKind
from tracegraph.ir.records import fast_init
from tracegraph.plan import PlanNode

N, GRID, BLOCK = 64, 4, 16


def test_an_access_declared_between_two_identical_launches_counts_for_the_second(backend):
    @cuda.jit
    def peek(x, out):  # reads x, writes out; declared below to write x as well
        i = cuda.grid(1)
        if i < out.size:
            out[i] = x[i]

    def fn(x, out):
        for _ in range(2):
            peek[GRID, BLOCK](x, out)
        tg.access(peek, reads=["x"], writes=["x", "out"])
        for _ in range(2):
            peek[GRID, BLOCK](x, out)

    x, out = cuda.to_device(np.ones(N)), cuda.to_device(np.zeros(N))
    program = tg.compile(fn, backend=backend).trace(x, out)
    x_buffer = program.inputs[0].buffer
    writes_x = [any(a.buffer == x_buffer and "w" in a.mode for a in op.accesses)
                for op in program.ops if op.kind == "kernel"]
    assert writes_x == [False, False, True, True]
    # and the graph orders the writers of x after the readers before them
    assert program.graph.has_edge(1, 2) or program.graph.has_edge(0, 2)


class ProtocolStream:
    """A stream given only through the CUDA stream protocol (__cuda_stream__)."""

    def __init__(self, handle: int):
        self.handle_value = handle

    def __cuda_stream__(self) -> tuple[int, int]:
        return (0, self.handle_value)


def test_a_stream_is_read_through_the_cuda_stream_protocol():
    assert hooks._stream_given(ProtocolStream(0)) is False
    assert hooks._stream_given(ProtocolStream(0x1234)) is True
    assert hooks._stream_given(0) is False and hooks._stream_given(None) is False


def test_a_stream_given_to_a_launch_warns_once_and_the_default_one_does_not(backend):
    """(On a GPU numba-cuda turns each into a cuda.core Stream, read through the protocol;
    it refuses other objects itself.)"""
    def on(given):
        def fn(x, out):
            for _ in range(3):
                scale[GRID, BLOCK, given](x, 2.0, out)
        return fn

    x, out = cuda.to_device(np.ones(N)), cuda.to_device(np.zeros(N))
    cases = [(0, 0), (cuda.stream(), 1)]
    if not SIMULATOR:  # (the simulator's default stream is one like any other)
        cases.append((cuda.default_stream(), 0))
    for given, warned in cases:
        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            tg.compile(on(given), backend=backend).trace(x, out)
        assert len([w for w in record if "stream given" in str(w.message)]) == warned, given


def test_a_thread_without_a_tracer_finds_none_and_another_threads_tracer_stays_its_own():
    seen = []
    previous = hooks.set_tracer(object())
    try:
        thread = threading.Thread(target=lambda: seen.append(hooks.current_tracer()))
        thread.start()
        thread.join()
    finally:
        hooks.set_tracer(previous)
    assert seen == [None]
    assert hooks.current_tracer() is previous


def test_find_lanes_leaves_the_program_it_was_given_as_it_was(backend):
    def fn(x, out):
        scale[GRID, BLOCK](x, 2.0, out)
        scale[GRID, BLOCK](out, 3.0, x)

    x, out = cuda.to_device(np.ones(N)), cuda.to_device(np.zeros(N))
    traced = tg.compile(fn, backend=backend).trace(x, out)
    before = traced.replace(graph=tg.ir.copy_graph(traced.graph))
    reduced = passes.transitive_reduction(passes.add_dependencies(
        before.replace(graph=tg.ir.op_graph(before.ops))))
    nodes_before = {n: dict(d) for n, d in reduced.graph.nodes(data=True)}
    laned = passes.find_lanes(reduced)
    assert {n: dict(d) for n, d in reduced.graph.nodes(data=True)} == nodes_before
    assert "lane" not in reduced.graph.nodes[0] and laned.graph.nodes[0]["lane"] == 0
    assert list(laned.graph.edges(data=True)) == list(reduced.graph.edges(data=True))


def test_the_cheaper_constructors_keep_the_dataclasses_frozen_and_their_defaults():
    op = Op(OpKind.KERNEL, "k")
    assert (op.accesses, op.location, op.data, op.barrier) == ((), "", None, False)
    assert op == Op(kind=OpKind.KERNEL, name="k") and hash(op) == hash(Op(OpKind.KERNEL, "k"))
    with pytest.raises(dataclasses.FrozenInstanceError):
        op.name = "other"  # type: ignore[misc]
    assert dataclasses.replace(op, location="here").location == "here"
    node = PlanNode(0, OpKind.KERNEL, (), "k", "", op)
    assert (node.argtypes, node.params, node.nbytes, node.bodies) == ((), (), 0, ())
    with pytest.raises(TypeError):
        PlanNode(0, OpKind.KERNEL)  # type: ignore[call-arg]


def test_fast_init_refuses_what_it_cannot_make_the_same():
    @dataclasses.dataclass(frozen=True, slots=True)
    class Listed:
        items: list = dataclasses.field(default_factory=list)

    @dataclasses.dataclass(slots=True)
    class Mutable:
        value: int = 0

    @dataclasses.dataclass(frozen=True)
    class Unslotted:
        value: int = 0

    for cls in (Listed, Mutable, Unslotted):
        with pytest.raises(TypeError, match="fast_init"):
            fast_init(cls)
