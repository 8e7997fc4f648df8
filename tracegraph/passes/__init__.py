"""Pure passes Program -> Program, run in this order by `run_passes`."""
from __future__ import annotations

from dataclasses import replace

from ..ir import OpKind, Program, op_graph, verify
from .branches import find_lanes
from .dependencies import (
    add_dependencies,
    order_host_callbacks,
    primary_hazard,
    transitive_reduction,
)
from .fusion import fuse_elementwise
from .memory import plan_memory

PASSES = (add_dependencies, order_host_callbacks, transitive_reduction, find_lanes, plan_memory)


def run_passes(program: Program, *, check: bool = False) -> Program:
    """All passes in order; with `check`, verify() after each (tests turn this on). First
    elementwise fusion, on the function's own ops only (a body's intermediates are also
    used by later iterations). The bodies of control-flow ops get the other passes first
    (memory is planned for the whole graph only: a construct counts as one use of
    everything its bodies touch)."""
    program = fuse_elementwise(program)
    if check:
        verify(program)
    program = _passes_in_bodies(program, check)
    for p in PASSES:
        program = p(program)
        if check:
            verify(program, check_order=True)
    return program


def _passes_in_bodies(program: Program, check: bool) -> Program:
    ops = []
    for op in program.ops:
        if op.kind == OpKind.CONDITIONAL:
            c = op.conditional
            bodies = tuple(_body_passes(body, check) for body in c.bodies)
            op = replace(op, data=replace(c, bodies=bodies))
        ops.append(op)
    if all(a is b for a, b in zip(ops, program.ops)):
        return program
    return program.replace(ops=tuple(ops), graph=op_graph(tuple(ops)))


def _body_passes(body: Program, check: bool) -> Program:
    body = _passes_in_bodies(body, check)
    for p in PASSES:
        if p is not plan_memory:
            body = p(body)
            if check:
                verify(body, check_order=True)
    return body


__all__ = [
    "PASSES",
    "add_dependencies",
    "find_lanes",
    "fuse_elementwise",
    "order_host_callbacks",
    "plan_memory",
    "primary_hazard",
    "run_passes",
    "transitive_reduction",
]
