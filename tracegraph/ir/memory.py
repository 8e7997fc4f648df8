"""Memory in the IR: buffers, the views kernels see of them, the byte ranges ops touch,
and which buffers share memory."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .kinds import BufferKind


@dataclass(frozen=True, slots=True)
class Buffer:
    """One allocation. Views and accesses name it by `id` (its index in Program.buffers)."""
    id: int
    nbytes: int
    kind: BufferKind
    name: str = ""
    input_index: int | None = None  # which flattened input leaf, for input and staging buffers
    # the captured device array (EXTERNAL) or the held host array (HOST_CONSTANT)
    external: Any = field(default=None, compare=False)
    address: int = 0  # where byte 0 lies, for EXTERNAL (a captured array's address is fixed)
    arena_offset: int | None = None  # its place in the graph's arena, when planned


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
        """As NumPy and Numba: axes of length 1 do not count, an empty array is."""
        return _contiguous(self.shape[::-1], self.strides[::-1], self.itemsize)

    def is_f_contiguous(self) -> bool:
        return _contiguous(self.shape, self.strides, self.itemsize)


def bytes_view(buffer: int, offset: int, nbytes: int) -> View:
    """`nbytes` bytes of a buffer from `offset`, as a view (what copies and memsets take)."""
    return View(buffer, offset, (nbytes,), (1,), np.dtype(np.uint8))


def _contiguous(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> bool:
    """Each axis's stride, innermost first, is the bytes of the axes inside it."""
    if 0 in shape:
        return True
    expected = itemsize
    for n, s in zip(shape, strides):
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

    def overlaps(self, other: Access) -> bool:
        """Some byte is in both (an empty range overlaps nothing)."""
        return (self.buffer == other.buffer and max(self.start, other.start)
                < min(self.stop, other.stop))


UNBOUNDED = 1 << 62  # the stop of an access to memory whose offset is not known


def memory_regions(buffers: tuple[Buffer, ...], aliased_inputs: frozenset[tuple[int, int]]
                   = frozenset()) -> dict[int, tuple[int, int, bool]]:
    """buffer -> (region, delta, whole) for buffers that share memory with other buffers.

    Captured arrays sit at fixed addresses, so those whose bytes overlap are one region
    and their accesses compare by address (`delta` is the buffer's byte 0 in the region).
    A device input that overlapped a captured array in the compiling call joins that
    region with `whole`: its accesses conflict with every access of the region. Buffers
    absent from the result are regions of their own.
    """
    externals = sorted((b.address, b.address + b.nbytes, b.id) for b in buffers
                       if b.kind == BufferKind.EXTERNAL and b.nbytes)
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
    for inp, ext in aliased_inputs:
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
        base = min(buffers[b].address for b in group
                   if buffers[b].kind == BufferKind.EXTERNAL)
        for b in group:
            buf = buffers[b]
            whole = buf.kind != BufferKind.EXTERNAL
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
