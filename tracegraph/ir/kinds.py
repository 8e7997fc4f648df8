"""The kinds of things the IR holds, as enums whose members are also their string names
(so `op.kind == "kernel"` and f-strings read naturally)."""
from __future__ import annotations

from enum import StrEnum


class _Named(StrEnum):
    def __str__(self) -> str:
        return self.value

    def __repr__(self) -> str:
        return repr(self.value)


class OpKind(_Named):
    KERNEL = "kernel"
    MEMCPY = "memcpy"
    MEMSET = "memset"
    EVENT_RECORD = "event_record"
    EVENT_WAIT = "event_wait"
    HOST = "host"
    CONDITIONAL = "conditional"  # while / if / if-else / switch over bodies (sub-programs)
    LIBRARY = "library"  # stream-capturable library work (cuBLAS, PyTorch...), a child graph


class BufferKind(_Named):
    TEMP = "temp"                  # graph-owned device memory (tg.empty / tg.zeros / ops)
    DEVICE_INPUT = "device_input"  # the caller's device array; re-pointed on replay
    HOST_INPUT = "host_input"      # graph-owned device copy of a caller's NumPy array
    STAGING = "staging"            # pinned host memory: NumPy inputs in, NumPy results out
    EXTERNAL = "external"          # a device array the function captured (fixed address)
    HOST_CONSTANT = "host_constant"  # pinned memory refilled from a held host array each run


class InputKind(_Named):
    ARRAY = "array"
    STATIC = "static"   # a Python value baked into the graph
    SCALAR = "scalar"   # a Python number declared dynamic: a kernel parameter patched per call


class OutputKind(_Named):
    INPUT = "input"     # an argument handed back: the caller's own object
    INPUT_VIEW = "input view"  # a view of an argument: a view of the caller's own array
    HOST = "host"       # a NumPy result: a view of pinned memory
    DEVICE = "device"   # a device result: a view of graph memory
    STATIC = "static"   # a Python value the function returned


class CopyRole(_Named):
    USER = "user"              # a copy the traced function asked for
    INPUT = "input"            # a NumPy argument, from pinned staging to the device
    OUTPUT = "output"          # a result, to pinned staging (or fresh device memory)
    WRITE_BACK = "write-back"  # a written NumPy argument, back to pinned staging
    CONSTANT = "constant"      # held host data (cuda.to_device inside the function)


HAZARDS = ("RAW", "WAW", "WAR")  # in order of precedence when one edge carries several
