"""The Program: what a traced function did (its ops, buffers, inputs and results) and the
dependency DAG the passes build over the ops; verify() checks its invariants."""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import networkx as nx
import numpy as np

from ..errors import VerifyError
from .kinds import HAZARDS, BufferKind, InputKind, OpKind, OutputKind
from .memory import Buffer, View, memory_regions, region_access
from .ops import Op

_BUFFER_KINDS = frozenset(BufferKind)
_OP_KINDS = frozenset(OpKind)


NO_VIEW = View(-1, 0, (), (), np.dtype(np.uint8))  # what a static input leaf has


def same_binding(a: Any, b: Any) -> bool:
    """A name holds what it held: the same object, or a tuple (namedtuple) of the same type
    rebuilt from the same objects (`FNS = (relu, square)` run again)."""
    if a is b:
        return True
    return isinstance(a, tuple) and type(a) is type(b) and len(a) == len(b) and \
        all(same_binding(x, y) for x, y in zip(a, b))



@dataclass(frozen=True, slots=True)
class InputLeaf:
    """One flattened argument of the traced function."""
    index: int
    path: str                # e.g. "x" or "args[1]['w']": used in error messages
    kind: InputKind
    placement: str = ""      # "host" or "device", for arrays
    shape: tuple[int, ...] = ()
    dtype: np.dtype | None = None
    strides: tuple[int, ...] = ()
    buffer: int = -1                 # the device-side buffer kernels use (-1: static)
    staging: int | None = None       # the pinned staging buffer, for host arrays
    view: View = NO_VIEW             # the traced array kernels see
    value: Any = None                # for static leaves
    written: bool = False            # some op writes this input's bytes

    @property
    def writes_back(self) -> bool:
        """A written NumPy input: its elements are copied back into the caller's array."""
        return self.written and self.staging is not None and not self.view.readonly


@dataclass(frozen=True, slots=True)
class OutputLeaf:
    """One flattened result: an input handed back, a view of graph memory, or a static value."""
    kind: OutputKind
    input_index: int = -1
    view: View = NO_VIEW
    value: Any = None


@dataclass(frozen=True, eq=False)
class Program:
    """What a traced function did: ops in program order plus their dependency DAG."""
    name: str
    ops: tuple[Op, ...]
    buffers: tuple[Buffer, ...]
    inputs: tuple[InputLeaf, ...]
    input_tree: Any
    outputs: tuple[OutputLeaf, ...]
    output_tree: Any
    graph: nx.DiGraph
    device_mode: bool = False  # results are device arrays (some input was a device array)
    # (device input buffer, captured buffer) pairs whose memory overlapped in the compiling
    # call: ordered conservatively (api.py compiles again if the overlap changes)
    aliased_inputs: frozenset[tuple[int, int]] = frozenset()
    arena_bytes: int = 0  # the planned buffers' arena (passes/memory.py)
    # (op, user's line, elements) of each tg.ops call that combines elements along an axis
    # (reductions, softmax, layer_norm, matmul's K): dynamic.py checks none follows the
    # dynamic length, where padding would count
    combines: tuple[tuple[str, str, int], ...] = ()
    # (GlobalRef, what it held) of each global or closure variable the kernels name: the
    # simulator reads them when a kernel runs, so a rebinding since the trace is refused
    bindings: tuple[tuple[Any, Any], ...] = ()

    @functools.cached_property
    def written_inputs(self) -> frozenset[int]:
        """The indexes of the input leaves the program writes."""
        return frozenset(i.index for i in self.inputs if i.written)

    def rebound(self) -> Any:
        """The first global or closure variable kernels name that holds another array (or
        device function) now than when traced (None: none)."""
        return next((ref for ref, value in self.bindings
                     if not same_binding(ref.resolve(), value)), None)

    def replace(self, **changes: Any) -> Program:
        fields = {f: getattr(self, f) for f in self.__dataclass_fields__}
        fields.update(changes)
        return Program(**fields)

    def __repr__(self) -> str:
        kinds: dict[str, int] = {}
        for op in self.ops:
            kinds[op.kind] = kinds.get(op.kind, 0) + 1
        summary = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
        return (f"<tracegraph.Program {self.name}: {summary}; "
                f"{self.graph.number_of_edges()} edges, {len(self.buffers)} buffers>")


def op_graph(ops: tuple[Op, ...]) -> nx.DiGraph:
    """A graph with one node per op (attribute `op`) and no edges yet."""
    g = nx.DiGraph()
    # networkx's own dicts, filled directly: add_nodes_from costs about 1 us a node
    g._node.update({i: {"op": op} for i, op in enumerate(ops)})
    g._succ.update({i: {} for i in range(len(ops))})
    g._pred.update({i: {} for i in range(len(ops))})
    return g


def copy_graph(g: nx.DiGraph, *, share_edges: bool = False) -> nx.DiGraph:
    """What g.copy() gives (the graph's attributes, each node's and edge's data dict
    copied, the same orders), through networkx's dicts: its copy costs about 3 us a node,
    twice in a compile's passes. With `share_edges`, g's own adjacency, for a pass that
    changes node data only: passes never change a graph they are given (a full copy cost
    find_lanes 0.7 of its 1.0 ms on a 1,000-launch chain)."""
    h = nx.DiGraph()
    h.graph.update(g.graph)
    h._node.update({n: d.copy() for n, d in g._node.items()})
    if share_edges:
        h._succ = h._adj = g._succ
        h._pred = g._pred
        return h
    succ, pred = h._succ, h._pred
    for n in g._node:
        succ[n], pred[n] = {}, {}
    for u, nbrs in g._succ.items():
        out = succ[u]
        for v, d in nbrs.items():
            out[v] = pred[v][u] = d.copy()
    return h


def verify(program: Program, *, check_order: bool = False) -> Program:
    """Check the invariants every pass must keep; raise VerifyError naming the node.

    With check_order, also check that every two ops touching overlapping bytes where
    one writes are ordered by a path in the graph (quadratic: for tests).
    """
    g = program.graph
    nbuf = len(program.buffers)
    for i, b in enumerate(program.buffers):
        if b.id != i or b.kind not in _BUFFER_KINDS or b.nbytes < 0:
            raise VerifyError(f"buffer {i} is malformed: {b}")
    if set(g.nodes) != set(range(len(program.ops))):
        raise VerifyError(f"graph nodes {sorted(g.nodes)[:8]}... do not match the "
                          f"{len(program.ops)} ops")
    for i, op in enumerate(program.ops):
        where = f"node {i} ({op.describe()}) from {op.location or '?'}"
        if op.kind not in _OP_KINDS:
            raise VerifyError(f"{where}: unknown op kind {op.kind!r}")
        if g.nodes[i].get("op") is not op:
            raise VerifyError(f"{where}: graph attribute 'op' is not ops[{i}]")
        for a in op.accesses:
            if not (0 <= a.buffer < nbuf):
                raise VerifyError(f"{where}: access to unknown buffer {a.buffer}")
            if not (0 <= a.start <= a.stop <= program.buffers[a.buffer].nbytes):
                raise VerifyError(f"{where}: access bytes [{a.start}, {a.stop}) outside "
                                  f"buffer {a.buffer} of {program.buffers[a.buffer].nbytes} bytes")
            if a.mode not in ("r", "w", "rw"):
                raise VerifyError(f"{where}: access mode {a.mode!r}")
    for u, v, data in g.edges(data=True):
        if not u < v:
            raise VerifyError(f"edge {u}->{v} goes against program order")
        if data.get("hazard") not in HAZARDS:
            raise VerifyError(f"edge {u}->{v} ({program.ops[u].describe()} -> "
                              f"{program.ops[v].describe()}) has no hazard type")
    if check_order:
        _check_order(program)
        _check_arena(program)
    for op in program.ops:
        if op.kind == OpKind.CONDITIONAL:
            for body in op.conditional.bodies:
                if isinstance(body, Program):
                    verify(body, check_order=check_order)
    return program


def _check_arena(program: Program) -> None:
    """Planned buffers that overlap in the arena are never in use at the same time: every
    op touching one is ordered with every op touching the other, all the same way."""
    planned = [(b.id, b.arena_offset, b.arena_offset + b.nbytes) for b in program.buffers
               if b.arena_offset is not None]
    users: dict[int, set[int]] = {}
    for i, op in enumerate(program.ops):
        for access in op.accesses:
            users.setdefault(access.buffer, set()).add(i)
    reach = {i: nx.descendants(program.graph, i) for i in range(len(program.ops))}
    for k, (a, a_lo, a_hi) in enumerate(planned):
        for b, b_lo, b_hi in planned[k + 1:]:
            lo = max(a_lo, b_lo)
            if lo >= min(a_hi, b_hi):
                continue
            ua, ub = users.get(a, set()), users.get(b, set())
            if not (all(y in reach[x] for x in ua for y in ub) or
                    all(x in reach[y] for x in ua for y in ub)):
                raise VerifyError(f"buffers {a} and {b} share arena bytes from {lo} "
                                  "but may be in use at the same time")


def _check_order(program: Program) -> None:
    ops = program.ops
    reach = {i: nx.descendants(program.graph, i) for i in range(len(ops))}
    regions = memory_regions(program.buffers, program.aliased_inputs)
    accesses = [[region_access(a, regions) for a in op.accesses] for op in ops]
    for j, later in enumerate(ops):
        for i in range(j):
            earlier = ops[i]
            if j in reach[i]:
                continue
            if earlier.barrier or later.barrier:
                raise VerifyError(f"barrier node {i} or {j} is not ordered with the other")
            for a in accesses[i]:
                for b in accesses[j]:
                    if a.overlaps(b) and (a.writes or b.writes) and a.stop > a.start \
                            and b.stop > b.start:
                        raise VerifyError(
                            f"nodes {i} ({earlier.describe()}, {earlier.location}) and {j} "
                            f"({later.describe()}, {later.location}) touch bytes "
                            f"[{max(a.start, b.start)}, {min(a.stop, b.stop)}) of buffer "
                            f"{a.buffer} with a write but are not ordered")
