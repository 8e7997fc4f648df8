"""The Plan: backend-neutral explicit graph nodes, and the replay table every backend
follows on each call (which caller memory each buffer stands for, what is copied in and
back, which graph memory is handed out as results).

Kernel nodes carry the Numba argument types (which overload) and the flattened parameter
list Numba passes to the driver, with data pointers left symbolic as `Ptr(buffer,
offset)`, so a backend resolves them once and patches only what moves.
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from typing import Any

from .ir import (
    Buffer,
    BufferKind,
    InputKind,
    InputLeaf,
    Op,
    OpKind,
    OutputKind,
    OutputLeaf,
    Program,
    View,
)
from .ir.records import fast_init


@dataclass(frozen=True, slots=True)
class Ptr:
    """A data-pointer parameter: a byte offset into an IR buffer, resolved by the backend."""
    buffer: int
    offset: int


@dataclass(frozen=True, slots=True)
class CScalar:
    """A scalar parameter passed by value as a ctypes type (e.g. "c_float")."""
    ctype: str
    value: Any

    def as_ctype(self) -> Any:
        return getattr(ctypes, self.ctype)(self.value)


@dataclass(frozen=True, slots=True)
class ScalarSlot:
    """A scalar parameter that is dynamic input leaf `leaf`, passed as ctypes `ctype`:
    the backend fills in each call's value."""
    leaf: int
    ctype: str

    def as_ctype(self, value: Any) -> Any:
        return getattr(ctypes, self.ctype)(value)


@fast_init
@dataclass(frozen=True, slots=True)
class PlanNode:
    """One explicit graph node. `deps` are indices of earlier nodes."""
    index: int
    kind: OpKind
    deps: tuple[int, ...]
    name: str
    location: str
    op: Op = field(repr=False)
    argtypes: tuple = field(default=(), repr=False)
    params: tuple = field(default=(), repr=False)
    nbytes: int = 0  # memcpy/memset size
    bodies: tuple[tuple[PlanNode, ...], ...] = field(default=(), repr=False)  # conditional

    def describe(self) -> str:
        return f"{self.op.describe()} ({self.location})" if self.location else self.op.describe()


# (node, parameter position or "dst"/"src", byte offset): one place a buffer's address is
Slot = tuple[int, Any, int]


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
    # buffer -> every place its address appears, so a backend can re-point it
    pointer_slots: dict[int, tuple[Slot, ...]] = field(default_factory=dict, repr=False)
    # dynamic scalar leaf -> ((node, parameter position), ...): where its value goes
    scalar_slots: dict[int, tuple[tuple[int, int], ...]] = field(default_factory=dict,
                                                                  repr=False)

    @property
    def patchable_buffers(self) -> tuple[int, ...]:
        """Buffers whose address can change between replays: the caller's device arrays."""
        return tuple(b.id for b in self.buffers if b.kind == BufferKind.DEVICE_INPUT)

    def __repr__(self) -> str:
        kinds: dict[str, int] = {}
        for n in self.nodes:
            kinds[n.kind] = kinds.get(n.kind, 0) + 1
        summary = ", ".join(f"{k} {n}" for n, k in sorted(kinds.items()))
        return f"<tracegraph.Plan {self.name}: {len(self.nodes)} nodes ({summary})>"


# ---------------------------------------------------------------------------
# the replay table

@dataclass(frozen=True, slots=True)
class DeviceInput:
    """A caller's device array: buffer `buffer` starts `offset` bytes before leaf `leaf`'s
    element 0."""
    leaf: int
    buffer: int
    offset: int


@dataclass(frozen=True, slots=True)
class HostInput:
    """A caller's NumPy array (or several overlapping ones): copied into pinned `staging`
    (`nbytes` from `offset` bytes before leaf `leaf`'s element 0), and from there by the
    graph; `write_back` are the leaves whose own elements come back. `direct`: the graph
    may copy straight from and to the caller's memory when it is page-locked (the span
    has no gaps and nothing read-only is written back over)."""
    leaf: int
    staging: int
    buffer: int
    offset: int
    nbytes: int
    direct: bool
    write_back: tuple[tuple[int, View], ...]


@dataclass(frozen=True, slots=True)
class ReplayTable:
    """What every replay does with the caller's arguments, precomputed from a Plan."""
    device_inputs: tuple[DeviceInput, ...]
    host_inputs: tuple[HostInput, ...]
    constants: tuple[int, ...]       # HOST_CONSTANT buffers, refilled from held arrays
    results: tuple[int, ...]         # graph memory handed to the caller as results
    single_output: OutputLeaf | None  # the only result, when the function returns one array
    # per result leaf, the first earlier leaf that is the same array (`return o, o`: one
    # object twice, as eagerly), or None
    same_as: tuple[int | None, ...] = ()


def replay_table(plan: Plan) -> ReplayTable:
    """Requires: a lowered Plan. Guarantees: one entry per input buffer (its first leaf),
    the write-backs of every written NumPy leaf, every result buffer."""
    first: dict[int, InputLeaf] = {}
    for inp in plan.inputs:
        if inp.kind == InputKind.ARRAY:
            first.setdefault(inp.buffer, inp)
    device = tuple(DeviceInput(i.index, b, i.view.offset) for b, i in first.items()
                   if i.staging is None)
    host = tuple(_host_input(plan, i) for i in first.values() if i.staging is not None)
    constants = tuple(b.id for b in plan.buffers if b.kind == BufferKind.HOST_CONSTANT)
    results = tuple(sorted({o.view.buffer for o in plan.outputs if o.kind == OutputKind.HOST or (
        o.kind == OutputKind.DEVICE and plan.buffers[o.view.buffer].kind == BufferKind.TEMP)}))
    single = plan.outputs[0] if plan.output_tree.is_leaf() else None
    return ReplayTable(device, host, constants, results, single, _same_as(plan.outputs))


def _same_as(outputs: tuple[OutputLeaf, ...]) -> tuple[int | None, ...]:
    first: dict[OutputLeaf, int] = {}
    same: list[int | None] = []
    for k, o in enumerate(outputs):
        j = first.setdefault(o, k) if o.kind != OutputKind.STATIC else k
        same.append(j if j != k else None)
    return tuple(same)


def _host_input(plan: Plan, first: InputLeaf) -> HostInput:
    group = [i for i in plan.inputs if i.kind == InputKind.ARRAY and i.buffer == first.buffer]
    back = tuple((i.index, i.view) for i in group if i.writes_back)
    direct = not back or all(_gap_free(i.view) and not i.view.readonly for i in group)
    staging = first.staging
    assert staging is not None
    return HostInput(first.index, staging, first.buffer, first.view.offset,
                     plan.buffers[staging].nbytes, direct, back)


def _gap_free(v: View) -> bool:
    """C- or F-contiguous: the view's bytes are exactly its elements."""
    def contiguous(dims: Any) -> bool:
        expected = v.itemsize
        for n, s in dims:
            if n != 1 and s != expected:
                return False
            expected *= n
        return True
    pairs = list(zip(v.shape, v.strides))
    return contiguous(reversed(pairs)) or contiguous(pairs)


def input_bases(table: ReplayTable, infos: list) -> tuple[dict[int, int], dict[int, int]]:
    """Addresses of the caller's memory for this call: ({device input buffer: address of
    its byte 0}, {staging buffer: address of the caller's host memory it mirrors})."""
    device = {d.buffer: infos[d.leaf].ptr - d.offset for d in table.device_inputs}
    staging = {h.staging: infos[h.leaf].ptr - h.offset for h in table.host_inputs}
    return device, staging
