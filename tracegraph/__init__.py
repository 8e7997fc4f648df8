"""tracegraph: turn a Python function that launches Numba CUDA kernels into one explicit
CUDA graph, built once and replayed with one launch."""
from __future__ import annotations

from . import ops
from .api import CompiledFunction, compile
from .cache import CacheInfo
from .collectives import (
                    Communicator,
                    SimGroup,
                    allgather,
                    allreduce,
                    broadcast,
                    reduce_scatter,
                    sim_group,
)
from .errors import (
                    CudaError,
                    LoweringError,
                    OutOfMemoryError,
                    SignatureError,
                    StaleGraphError,
                    TraceError,
                    TracegraphError,
                    VerifyError,
)
from .ir import Program, verify
from .lower import Plan
from .pytree import register_pytree_node
from .trace import (
                    Array,
                    access,
                    callback,
                    empty,
                    empty_like,
                    launch,
                    length,
                    library,
                    node_attributes,
                    record,
                    wait,
                    zeros,
                    zeros_like,
)
from .trace.control import else_, if_, switch, while_
from .traced import DynamicScalar
from .visualize import visualize

__version__ = "0.2.0"

__all__ = [
    "Array", "CacheInfo", "Communicator", "CompiledFunction", "CudaError", "DynamicScalar",
    "LoweringError", "OutOfMemoryError", "Plan", "Program", "SignatureError", "SimGroup",
    "StaleGraphError",
    "TraceError", "TracegraphError", "VerifyError", "access", "allgather", "allreduce", "broadcast",
    "callback", "compile", "else_", "empty", "empty_like", "if_", "launch", "length", "library",
    "node_attributes", "ops", "record", "reduce_scatter", "register_pytree_node", "sim_group",
    "switch", "verify", "visualize", "wait", "while_", "zeros", "zeros_like",
]
