"""The IR: buffers, views, accesses (memory.py), ops with typed data (ops.py), the Program
and its invariants (program.py), and the enums of their kinds (kinds.py). Everything is
frozen: a Program's `graph` is a networkx DiGraph that passes replace, never mutate (node i
carries `op=ops[i]`, each edge `hazard`)."""
from __future__ import annotations

from .kinds import HAZARDS, BufferKind, CopyRole, InputKind, OpKind, OutputKind
from .memory import (
                     UNBOUNDED,
                     Access,
                     Buffer,
                     View,
                     bytes_view,
                     contiguous_strides,
                     memory_regions,
                     region_access,
)
from .ops import (
    Conditional,
    Copy,
    EventUse,
    Fill,
    ForeignKernel,
    HostCall,
    Launch,
    LibraryCall,
    NodeAttributes,
    Op,
    OpData,
    ScalarArg,
    args_key,
)
from .program import InputLeaf, OutputLeaf, Program, copy_graph, op_graph, same_binding, verify

# the buffer kinds by their short names
TEMP = BufferKind.TEMP
DEVICE_INPUT = BufferKind.DEVICE_INPUT
HOST_INPUT = BufferKind.HOST_INPUT
STAGING = BufferKind.STAGING
EXTERNAL = BufferKind.EXTERNAL
HOST_CONSTANT = BufferKind.HOST_CONSTANT

__all__ = [
    "DEVICE_INPUT", "EXTERNAL", "HAZARDS", "HOST_CONSTANT", "HOST_INPUT", "STAGING", "TEMP",
    "UNBOUNDED", "Access", "Buffer", "BufferKind", "Conditional", "Copy", "CopyRole",
    "EventUse", "Fill", "ForeignKernel", "HostCall", "InputKind", "InputLeaf", "Launch",
    "LibraryCall", "NodeAttributes", "Op", "OpData", "OpKind", "OutputKind", "OutputLeaf",
    "Program", "ScalarArg", "View", "args_key", "bytes_view", "contiguous_strides", "copy_graph",
    "memory_regions", "op_graph", "region_access", "same_binding", "verify",
]
