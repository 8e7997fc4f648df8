"""Program -> Plan: backend-neutral explicit graph nodes with their dependencies.

A kernel node carries the Numba argument types (to pick the compiled overload) and the
flattened parameter list Numba passes to the driver, with data pointers left symbolic
(`Ptr(buffer, offset)`) so a backend resolves them once and patches only what changes.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import networkx as nx

from . import _numba
from .errors import LoweringError
from .ir import DEVICE_INPUT, Buffer, InputLeaf, Op, OutputLeaf, Program, View

Ptr = _numba.Ptr
CScalar = _numba.CScalar


@dataclass(frozen=True, slots=True)
class PlanNode:
    """One explicit graph node. `deps` are indices of earlier nodes."""
    index: int
    kind: str
    deps: tuple[int, ...]
    name: str
    location: str
    op: Op = field(repr=False)
    argtypes: tuple = field(default=(), repr=False)
    params: tuple = field(default=(), repr=False)
    nbytes: int = 0  # memcpy/memset size

    def describe(self) -> str:
        return f"{self.op.describe()} ({self.location})" if self.location else self.op.describe()


@dataclass(frozen=True, eq=False)
class Plan:
    """What a backend builds: nodes in a valid order, plus memory and I/O bindings."""
    name: str
    nodes: tuple[PlanNode, ...]
    buffers: tuple[Buffer, ...]
    inputs: tuple[InputLeaf, ...]
    input_tree: Any
    outputs: tuple[OutputLeaf, ...]
    output_tree: Any
    device_mode: bool
    program: Program = field(repr=False)
    # buffer -> ((node, param position or "dst"/"src", byte offset), ...): every place a
    # buffer's address appears, so a backend can re-point it
    pointer_slots: dict[int, tuple[tuple[int, Any, int], ...]] = field(default_factory=dict,
                                                                       repr=False)

    @property
    def patchable_buffers(self) -> tuple[int, ...]:
        """Buffers whose address can change between replays: the caller's device arrays."""
        return tuple(b.id for b in self.buffers if b.kind == DEVICE_INPUT)

    def __repr__(self) -> str:
        kinds: dict[str, int] = {}
        for n in self.nodes:
            kinds[n.kind] = kinds.get(n.kind, 0) + 1
        summary = ", ".join(f"{k} {n}" for n, k in sorted(kinds.items()))
        return f"<tracegraph.Plan {self.name}: {len(self.nodes)} nodes ({summary})>"


def lower(program: Program) -> Plan:
    """Requires: a Program after the passes (edges go forward in program order).
    Guarantees: one PlanNode per op in program order; deps are the graph's predecessors;
    kernel nodes have argtypes and params; pointer_slots lists every buffer address.
    """
    g = program.graph
    if not nx.is_directed_acyclic_graph(g):
        raise LoweringError(f"the dependency graph of {program.name} has a cycle",
                            fix="report this: passes must keep the graph acyclic")
    nodes = []
    slots: dict[int, list[tuple[int, Any, int]]] = {}
    for i, op in enumerate(program.ops):
        deps = tuple(sorted(g.predecessors(i)))
        if op.kind == "kernel":
            node = _kernel_node(i, op, deps, slots)
        elif op.kind == "memcpy":
            dst, src = op.data.dst, op.data.src
            nbytes = dst.size * dst.itemsize
            if nbytes != src.size * src.itemsize:
                raise LoweringError(f"memcpy {op.name}: {nbytes} bytes to "
                                    f"{src.size * src.itemsize}", where=op.location)
            slots.setdefault(dst.buffer, []).append((i, "dst", dst.offset))
            slots.setdefault(src.buffer, []).append((i, "src", src.offset))
            node = PlanNode(i, op.kind, deps, op.name, op.location, op, nbytes=nbytes)
        elif op.kind == "memset":
            dst = op.data.dst
            slots.setdefault(dst.buffer, []).append((i, "dst", dst.offset))
            node = PlanNode(i, op.kind, deps, op.name, op.location, op,
                            nbytes=dst.size * dst.itemsize)
        else:
            node = PlanNode(i, op.kind, deps, op.name, op.location, op)
        nodes.append(node)
    return Plan(program.name, tuple(nodes), program.buffers, program.inputs,
                program.input_tree, program.outputs, program.output_tree, program.device_mode,
                program, {b: tuple(s) for b, s in slots.items()})


def _kernel_node(i: int, op: Op, deps: tuple[int, ...],
                 slots: dict[int, list[tuple[int, Any, int]]]) -> PlanNode:
    launch = op.data
    threads = launch.blockdim[0] * launch.blockdim[1] * launch.blockdim[2]
    if min(launch.griddim) < 1 or min(launch.blockdim) < 1 or threads > 1024:
        raise LoweringError(f"kernel {op.name} is launched with grid {launch.griddim} and "
                            f"block {launch.blockdim}", where=op.location,
                            fix="use positive dimensions and at most 1024 threads per block")
    given = tuple(_argtype(a, op) for a in launch.args)
    try:
        argtypes = _numba.select_overload(launch.kernel, given)
        params = _numba.flatten_params(argtypes, launch.args, _view_fields)
    except (TypeError, ValueError, OverflowError) as exc:
        raise LoweringError(f"kernel {op.name} cannot be launched with arguments of types "
                            f"({', '.join(map(str, given))}): {exc}", where=op.location,
                            fix="pass arguments of the types its signature declares; the "
                                "same launch run eagerly raises the same error") from exc
    for pos, p in enumerate(params):
        if isinstance(p, Ptr):
            slots.setdefault(p.buffer, []).append((i, pos, p.offset))
    return PlanNode(i, "kernel", deps, op.name, op.location, op, argtypes, params)


def _argtype(arg: Any, op: Op) -> Any:
    if isinstance(arg, View):
        layout = _numba.layout_of(arg.shape, arg.strides, arg.itemsize)
        return _numba.array_type(arg.dtype, len(arg.shape), layout, arg.readonly)
    if isinstance(arg, tuple):
        return _numba.tuple_type([_argtype(a, op) for a in arg], type(arg))
    ty = _numba.scalar_type(arg)
    if ty is None:
        raise LoweringError(f"kernel {op.name} got an argument of type {type(arg).__name__}",
                            where=op.location, fix="pass arrays, scalars or tuples of these")
    return ty


def _view_fields(v: View) -> tuple:
    return (v.size, v.itemsize, Ptr(v.buffer, v.offset), v.shape, v.strides)
