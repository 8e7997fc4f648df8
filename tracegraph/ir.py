"""The IR: buffers, views, accesses, ops and the Program that holds them.

Everything here is frozen. A Program's `graph` is a networkx DiGraph that passes
replace, never mutate: node i carries `op=ops[i]`, each edge carries `hazard`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import networkx as nx
import numpy as np

from .errors import VerifyError

OP_KINDS = frozenset({"kernel", "memcpy", "memset", "event_record", "event_wait", "host"})
HAZARDS = ("RAW", "WAW", "WAR")  # in order of precedence when one edge carries several

# Buffer kinds.
TEMP = "temp"                  # graph-owned device memory (tg.empty / tg.zeros / ops)
DEVICE_INPUT = "device_input"  # the caller's device array; its pointer is patched on replay
HOST_INPUT = "host_input"      # graph-owned device copy of a caller's NumPy array
STAGING = "staging"            # pinned host memory: NumPy inputs in, NumPy outputs out
EXTERNAL = "external"          # a device array the traced function captured (constant pointer)
HOST_CONSTANT = "host_constant"  # pinned memory refilled from a held host array every run
BUFFER_KINDS = frozenset({TEMP, DEVICE_INPUT, HOST_INPUT, STAGING, EXTERNAL, HOST_CONSTANT})


@dataclass(frozen=True, slots=True)
class Buffer:
    """One allocation. Views and accesses name it by `id` (its index in Program.buffers)."""
    id: int
    nbytes: int
    kind: str
    name: str = ""
    input_index: int | None = None  # which flattened input leaf, for input and staging buffers
    # the captured device array (EXTERNAL) or the held host array (HOST_CONSTANT)
    external: Any = field(default=None, compare=False)
    address: int = 0  # where byte 0 lies, for EXTERNAL (a captured array's address is fixed)


def contiguous_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    strides = []
    acc = itemsize
    for n in reversed(shape):
        strides.append(acc)
        acc *= max(n, 1)
    return tuple(reversed(strides))


@dataclass(frozen=True, slots=True)
class View:
    """An array as a kernel sees it: a window of a buffer."""
    buffer: int
    offset: int  # bytes from the buffer's start to element [0, 0, ...]
    shape: tuple[int, ...]
    strides: tuple[int, ...]  # bytes
    dtype: np.dtype
    readonly: bool = False  # a view of a caller's read-only array: kernels must not store to it

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def byte_range(self) -> tuple[int, int]:
        """The [start, stop) bytes of the buffer this view can touch (empty when size is 0)."""
        if self.size == 0:
            return (self.offset, self.offset)
        lo = hi = self.offset
        for n, s in zip(self.shape, self.strides):
            step = (n - 1) * s
            if step < 0:
                lo += step
            else:
                hi += step
        return (lo, hi + self.itemsize)

    def is_c_contiguous(self) -> bool:
        expected = self.itemsize
        for n, s in zip(reversed(self.shape), reversed(self.strides)):
            if n != 1 and s != expected:
                return False
            expected *= n
        return True


@dataclass(frozen=True, slots=True)
class Access:
    """A byte range of a buffer that an op reads ("r"), writes ("w") or both ("rw")."""
    buffer: int
    start: int
    stop: int
    mode: str

    @property
    def reads(self) -> bool:
        return "r" in self.mode

    @property
    def writes(self) -> bool:
        return "w" in self.mode

    def overlaps(self, other: "Access") -> bool:
        """Some byte is in both (an empty range overlaps nothing)."""
        return (self.buffer == other.buffer and max(self.start, other.start)
                < min(self.stop, other.stop))


@dataclass(frozen=True, slots=True)
class Op:
    """One recorded operation, in program order.

    kernel:       `kernel` is the user's dispatcher, `args` the launch arguments with
                  traced arrays replaced by Views (tuples stay tuples).
    memcpy:       args = (dst View, src View), same number of bytes, both contiguous.
    memset:       args = (dst View,), payload = byte value.
    host:         payload = the Python callable.
    event_record / event_wait: payload = the event.
    A `barrier` op is ordered after every earlier op and before every later one.
    """
    kind: str
    name: str
    accesses: tuple[Access, ...] = ()
    location: str = ""
    kernel: Any = field(default=None, compare=False)
    griddim: tuple[int, int, int] = (1, 1, 1)
    blockdim: tuple[int, int, int] = (1, 1, 1)
    sharedmem: int = 0
    args: tuple = ()
    payload: Any = field(default=None, compare=False)
    barrier: bool = False

    def describe(self) -> str:
        if self.kind == "kernel":
            return f"{self.name}[{_dims(self.griddim)}, {_dims(self.blockdim)}]"
        return self.name


def _dims(d: tuple[int, int, int]) -> str:
    trimmed = list(d)
    while len(trimmed) > 1 and trimmed[-1] == 1:
        trimmed.pop()
    return "x".join(str(x) for x in trimmed)


@dataclass(frozen=True, slots=True)
class InputLeaf:
    """One flattened argument of the traced function."""
    index: int
    path: str                # e.g. "x" or "args[1]['w']": used in error messages
    kind: str                # "array" or "static"
    placement: str = ""      # "host" or "device", for arrays
    shape: tuple[int, ...] = ()
    dtype: np.dtype | None = None
    strides: tuple[int, ...] = ()
    buffer: int | None = None        # the device-side buffer kernels use
    staging: int | None = None       # the pinned staging buffer, for host arrays
    view: View | None = None         # the traced array kernels see
    value: Any = None                # for static leaves
    written: bool = False            # some op writes this input's bytes

    @property
    def writes_back(self) -> bool:
        """A written NumPy input: its elements are copied back into the caller's array."""
        return self.written and self.staging is not None and not self.view.readonly


@dataclass(frozen=True, slots=True)
class OutputLeaf:
    """One flattened result: an input handed back, a view of graph memory, or a static value."""
    kind: str                # "input", "host", "device" or "static"
    input_index: int | None = None
    view: View | None = None
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

    def replace(self, **changes: Any) -> "Program":
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


UNBOUNDED = 1 << 62  # the stop of an access to memory whose offset is not known


def memory_regions(program: Program) -> dict[int, tuple[int, int, bool]]:
    """buffer -> (region, delta, whole) for buffers that share memory with other buffers.

    Captured arrays sit at fixed addresses, so those whose bytes overlap are one region
    and their accesses compare by address (`delta` is the buffer's byte 0 in the region).
    A device input that overlapped a captured array in the compiling call joins that
    region with `whole`: its accesses conflict with every access of the region. Buffers
    absent from the result are regions of their own.
    """
    externals = sorted((b.address, b.address + b.nbytes, b.id) for b in program.buffers
                       if b.kind == EXTERNAL and b.nbytes)
    parent: dict[int, int] = {}

    def find(x: int) -> int:
        while parent.get(x, x) != x:
            x = parent[x]
        return x

    hi, first = -1, -1
    for lo, end, b in externals:
        parent.setdefault(b, b)
        if lo < hi:
            parent[find(b)] = find(first)
            hi = max(hi, end)
        else:
            hi, first = end, b
    for inp, ext in program.aliased_inputs:
        parent.setdefault(inp, inp)
        parent.setdefault(ext, ext)
        parent[find(inp)] = find(ext)
    members: dict[int, list[int]] = {}
    for b in parent:
        members.setdefault(find(b), []).append(b)
    regions: dict[int, tuple[int, int, bool]] = {}
    for group in members.values():
        if len(group) < 2:
            continue
        key = min(group)
        base = min(program.buffers[b].address for b in group
                   if program.buffers[b].kind == EXTERNAL)
        for b in group:
            buf = program.buffers[b]
            whole = buf.kind != EXTERNAL
            regions[b] = (key, 0 if whole else buf.address - base, whole)
    return regions


def region_access(access: Access, regions: dict[int, tuple[int, int, bool]]) -> Access:
    """`access` in its region's coordinates (itself for a buffer of its own)."""
    r = regions.get(access.buffer)
    if r is None:
        return access
    key, delta, whole = r
    if whole:
        return Access(key, 0, UNBOUNDED if access.stop > access.start else 0, access.mode)
    return Access(key, access.start + delta, access.stop + delta, access.mode)


def op_graph(ops: tuple[Op, ...]) -> nx.DiGraph:
    """A graph with one node per op (attribute `op`) and no edges yet."""
    g = nx.DiGraph()
    g.add_nodes_from((i, {"op": op}) for i, op in enumerate(ops))
    return g


def verify(program: Program, *, check_order: bool = False) -> Program:
    """Check the invariants every pass must keep; raise VerifyError naming the node.

    With check_order, also check that every two ops touching overlapping bytes where
    one writes are ordered by a path in the graph (quadratic: for tests).
    """
    g = program.graph
    nbuf = len(program.buffers)
    for i, b in enumerate(program.buffers):
        if b.id != i or b.kind not in BUFFER_KINDS or b.nbytes < 0:
            raise VerifyError(f"buffer {i} is malformed: {b}")
    if set(g.nodes) != set(range(len(program.ops))):
        raise VerifyError(f"graph nodes {sorted(g.nodes)[:8]}... do not match the "
                          f"{len(program.ops)} ops")
    for i, op in enumerate(program.ops):
        where = f"node {i} ({op.describe()}) from {op.location or '?'}"
        if op.kind not in OP_KINDS:
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
    return program


def _check_order(program: Program) -> None:
    ops = program.ops
    reach = {i: nx.descendants(program.graph, i) for i in range(len(ops))}
    regions = memory_regions(program)
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
                    if a.overlaps(b) and (a.writes or b.writes) and a.stop > a.start and b.stop > b.start:
                        raise VerifyError(
                            f"nodes {i} ({earlier.describe()}, {earlier.location}) and {j} "
                            f"({later.describe()}, {later.location}) touch bytes "
                            f"[{max(a.start, b.start)}, {min(a.stop, b.stop)}) of buffer "
                            f"{a.buffer} with a write but are not ordered")
