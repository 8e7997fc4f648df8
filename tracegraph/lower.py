"""Program -> Plan: one explicit graph node per op, with its dependencies, the overload
its kernel launches and Numba's flattened parameters (plan.py holds the Plan types)."""
from __future__ import annotations

from typing import Any

import networkx as nx
import numpy as np

from . import _numba
from .errors import LoweringError
from .ir import BufferKind, ForeignKernel, Op, OpKind, Program, ScalarArg, View, args_key
from .plan import CScalar, Plan, PlanNode, Ptr, ScalarSlot

__all__ = ["CScalar", "Plan", "PlanNode", "Ptr", "lower"]

def lower(program: Program) -> Plan:
    """Requires: a Program after the passes (edges go forward in program order).
    Guarantees: one PlanNode per op in program order; deps are the graph's predecessors;
    kernel nodes have argtypes and params; pointer_slots lists every buffer address.
    """
    nodes, slots, scalars = _lower_nodes(program, program, {})
    return Plan(program.name, tuple(nodes), program.buffers, program.inputs,
                program.input_tree, program.outputs, program.output_tree, program.device_mode,
                program, {b: tuple(s) for b, s in slots.items()},
                {leaf: tuple(s) for leaf, s in scalars.items()})


def _lower_nodes(program: Program, top: Program,
                 memo: dict) -> tuple[list[PlanNode], dict, dict]:
    """The nodes of a Program (the whole function's, or a body's), with where buffers'
    addresses and dynamic scalars appear in them. `memo`: the overload and parameters of
    each kernel launched with the same arguments before (a loop launches it again)."""
    g = program.graph
    # edges forward in program order are acyclic (what the passes keep): networkx's
    # check, a topological sort, only where one is not
    forward = all(u < v for u, after in g._succ.items() for v in after)
    if not forward and not nx.is_directed_acyclic_graph(g):
        raise LoweringError(f"the dependency graph of {program.name} has a cycle",
                            fix="report this: passes must keep the graph acyclic")
    nodes = []
    slots: dict[int, list[tuple[int, Any, int]]] = {}
    scalars: dict[int, list[tuple[int, int]]] = {}
    before = g._pred  # networkx's predecessor dicts: its view costs a call per node
    for i, op in enumerate(program.ops):
        deps = tuple(sorted(before[i]))
        if op.kind == "kernel":
            node = _kernel_node(i, op, deps, slots, scalars, top, memo)
        elif op.kind == "memcpy":
            dst, src = op.copy.dst, op.copy.src
            nbytes = dst.size * dst.itemsize
            if nbytes != src.size * src.itemsize:
                raise LoweringError(f"memcpy {op.name}: {nbytes} bytes to "
                                    f"{src.size * src.itemsize}", where=op.location)
            slots.setdefault(dst.buffer, []).append((i, "dst", dst.offset))
            slots.setdefault(src.buffer, []).append((i, "src", src.offset))
            node = PlanNode(i, op.kind, deps, op.name, op.location, op, nbytes=nbytes)
        elif op.kind == "memset":
            dst = op.fill.dst
            slots.setdefault(dst.buffer, []).append((i, "dst", dst.offset))
            node = PlanNode(i, op.kind, deps, op.name, op.location, op,
                            nbytes=dst.size * dst.itemsize)
        elif op.kind == OpKind.CONDITIONAL:
            node = PlanNode(i, op.kind, deps, op.name, op.location, op,
                            bodies=tuple(_lower_body(body, top, memo)
                                         for body in op.conditional.bodies))
        else:
            node = PlanNode(i, op.kind, deps, op.name, op.location, op)
        nodes.append(node)
    return nodes, slots, scalars


_NOT_IN_BODIES = {OpKind.HOST: "a host callback", OpKind.EVENT_RECORD: "an event record",
                  OpKind.EVENT_WAIT: "an event wait"}


def _lower_body(body: Program, top: Program, memo: dict) -> tuple[PlanNode, ...]:
    """A conditional node's body graph: what CUDA allows in one, nothing re-pointed."""
    for op in body.ops:
        what = _NOT_IN_BODIES.get(op.kind)
        if what is not None:
            raise LoweringError(f"{what} ({op.name}) inside a tg.while_/tg.if_/tg.switch "
                                "body: CUDA allows only kernels, copies, memsets and other "
                                "conditionals in a conditional node's body",
                                where=op.location,
                                fix="move it out of the block (before or after it)")
    nodes, _, _ = _lower_nodes(body, top, memo)
    return tuple(nodes)


def _kernel_node(i: int, op: Op, deps: tuple[int, ...],
                 slots: dict[int, list[tuple[int, Any, int]]],
                 scalars: dict[int, list[tuple[int, int]]], program: Program,
                 memo: dict) -> PlanNode:
    launch = op.launch
    threads = launch.blockdim[0] * launch.blockdim[1] * launch.blockdim[2]
    if min(launch.griddim) < 1 or min(launch.blockdim) < 1 or threads > 1024:
        raise LoweringError(f"kernel {op.name} is launched with grid {launch.griddim} and "
                            f"block {launch.blockdim}", where=op.location,
                            fix="use positive dimensions and at most 1024 threads per block")
    if isinstance(launch.kernel, ForeignKernel):
        return _foreign_node(i, op, deps, slots)
    # one Launch for a loop's relaunches with the very same arguments (the tracer's memo;
    # it lives as long as the program), else the same kernel and equal arguments
    found = memo.get(("launch", id(launch)))
    if found is None:
        key = (id(launch.kernel), args_key(launch.args))
        found = memo.get(key)
        if found is None:
            found = memo[key] = _overload_and_params(op, program)
        memo[("launch", id(launch))] = found
    argtypes, params, pointers, dynamic = found
    for pos, buffer, offset in pointers:
        slots.setdefault(buffer, []).append((i, pos, offset))
    for pos, leaf in dynamic:
        scalars.setdefault(leaf, []).append((i, pos))
    return PlanNode(i, OpKind.KERNEL, deps, op.name, op.location, op, argtypes, params)


def _overload_and_params(op: Op, program: Program) -> tuple[tuple, tuple, tuple, tuple]:
    """(the overload's argtypes, Numba's flattened parameters, (position, buffer, offset)
    of each pointer among them, (position, leaf) of each dynamic scalar): a loop's
    relaunches share them, so their nodes skip the search."""
    launch = op.launch
    given = tuple(_argtype(a, op, program) for a in launch.args)
    try:
        argtypes = _numba.select_overload(launch.kernel, given)
        params = _numba.flatten_params(argtypes, launch.args, _view_fields)
        for p in params:  # a dynamic scalar converts as a constant would (a float to an
            if isinstance(p, ScalarSlot):  # int64 parameter: TypeError, as eager Numba's)
                p.as_ctype(program.inputs[p.leaf].value)
    except (TypeError, ValueError, OverflowError) as exc:
        raise LoweringError(f"kernel {op.name} cannot be launched with arguments of types "
                            f"({', '.join(map(str, given))}): {exc}", where=op.location,
                            fix="pass arguments of the types its signature declares; the "
                                "same launch run eagerly raises the same error") from exc
    pointers = tuple((pos, p.buffer, p.offset) for pos, p in enumerate(params)
                     if isinstance(p, Ptr))
    dynamic = tuple((pos, p.leaf) for pos, p in enumerate(params) if isinstance(p, ScalarSlot))
    return argtypes, params, pointers, dynamic


def _foreign_node(i: int, op: Op, deps: tuple[int, ...],
                  slots: dict[int, list[tuple[int, Any, int]]]) -> PlanNode:
    """A kernel compiled elsewhere: a pointer per array (its element 0), NumPy scalars by
    value in their own C type."""
    params: list[Any] = []
    described: list[tuple] = []  # what each parameter is: the CPU stand-in rebuilds arrays
    written = {a.buffer for a in op.accesses if a.writes}
    for pos, a in enumerate(op.launch.args):
        if isinstance(a, View):
            params.append(Ptr(a.buffer, a.offset))
            slots.setdefault(a.buffer, []).append((i, pos, a.offset))
            described.append(("array", a.shape, a.strides, a.dtype, a.buffer in written))
        else:
            params.append(CScalar(np.ctypeslib.as_ctypes_type(a.dtype).__name__, a.item()))
            described.append(("scalar", a.dtype))
    return PlanNode(i, OpKind.KERNEL, deps, op.name, op.location, op, tuple(described),
                    tuple(params))


def _argtype(arg: Any, op: Op, program: Program) -> Any:
    if isinstance(arg, View):
        # an argument over a NumPy input is a NumPy array to eager Numba, typed by NumPy's
        # flags; any other is a device array
        host = program.buffers[arg.buffer].kind == BufferKind.HOST_INPUT
        layout = _numba.layout_of(arg.shape, arg.strides, arg.itemsize, host=host)
        return _numba.array_type(arg.dtype, len(arg.shape), layout, arg.readonly)
    if isinstance(arg, tuple):
        return _numba.tuple_type([_argtype(a, op, program) for a in arg], type(arg))
    if isinstance(arg, ScalarArg):  # typed by the value it was traced with
        arg = program.inputs[arg.leaf].value
    ty = _numba.scalar_type(arg)
    if ty is None:
        raise LoweringError(f"kernel {op.name} got an argument of type {type(arg).__name__}",
                            where=op.location, fix="pass arrays, scalars or tuples of these")
    return ty


def _view_fields(v: View) -> tuple:
    return (v.size, v.itemsize, Ptr(v.buffer, v.offset), v.shape, v.strides)
