"""The memory of one executable: an allocation per graph-owned buffer, the address each
buffer's byte 0 is at for the current call, and the ring of allocations a result buffer
rotates through so that a result the caller still holds is never overwritten."""
from __future__ import annotations

import sys
from typing import Any

import numpy as np

from ...device_memory import asked_for
from ...ir import BufferKind
from ...plan import Plan, ReplayTable

_DEVICE = (BufferKind.TEMP, BufferKind.HOST_INPUT)
_PINNED = (BufferKind.STAGING, BufferKind.HOST_CONSTANT)


class Arena:
    """The device memory of the planned buffers of every graph of one function: sized for
    the largest (warmup compiles largest first); a graph that needs more gets a larger one,
    which later graphs share. One replay at a time uses it (executable.py orders them)."""

    def __init__(self) -> None:
        self.allocation: Any = None
        self.nbytes = 0
        self.last: Any = None  # (stream, event) of the last launch using it
        self.users = 0  # executables placing buffers in it

    def ensure(self, platform: Any, nbytes: int) -> Any:
        if self.allocation is None or nbytes > self.nbytes:
            with asked_for(f"the arena of its graphs' intermediates (which has "
                           f"{self.nbytes:,} bytes now)"):
                self.allocation = platform.alloc_device(nbytes)
            self.nbytes = nbytes
        return self.allocation


class GraphMemory:
    """buffer -> allocation and address. Device inputs start at the compiling call's
    addresses (so that call patches nothing); captured arrays at their fixed ones; planned
    intermediates at their place in the function's arena."""

    def __init__(self, plan: Plan, table: ReplayTable, platform: Any, first_call: dict[int, int],
                 arena: Arena | None = None):
        self.plan, self.platform = plan, platform
        self.base: dict[int, int] = {}      # buffer -> address of its byte 0 now
        self.owner: dict[int, Any] = {}     # graph-owned buffer -> its allocation now
        need = plan.program.arena_bytes
        self.arena = arena if arena is not None else Arena()
        self.arena_allocation = self.arena.ensure(platform, need) if need else None
        self.arena.users += 1 if need else 0
        arena_base = platform.address(self.arena_allocation) if need else 0
        for b in plan.buffers:
            if b.arena_offset is not None:
                self.base[b.id] = arena_base + b.arena_offset
            elif b.kind in _DEVICE or b.kind in _PINNED:
                self._own(b.id, self._allocate(b.id))
            elif b.kind == BufferKind.EXTERNAL:
                self.base[b.id] = b.address
            elif b.kind == BufferKind.DEVICE_INPUT:
                self.base[b.id] = first_call.get(b.id, 0)
        # result buffers: the allocations each rotates through (held by the ring alone, so
        # that their count of holders when free never changes), the one in use, and that
        # count
        self.rings: dict[int, list[Any]] = {b: [self.owner.pop(b)] for b in table.results}
        self.current: dict[int, int] = {b: 0 for b in table.results}
        self._free: dict[int, int] = {}
        for ring in self.rings.values():
            self._count_free(ring[0])
        self.own_staging = {h.staging: self.base[h.staging] for h in table.host_inputs}
        self.scratch = platform.alloc_device(64)  # what the bracket copies move

    def _allocate(self, buffer: int) -> Any:
        b = self.plan.buffers[buffer]
        with asked_for(f"buffer {b.name} of {self.plan.name}"):
            if b.kind in _PINNED:
                return self.platform.alloc_pinned(b.nbytes)
            return self.platform.alloc_device(b.nbytes)

    def _own(self, buffer: int, allocation: Any) -> None:
        self.owner[buffer] = allocation
        self.base[buffer] = self.platform.address(allocation)

    def allocation(self, buffer: int) -> Any:
        ring = self.rings.get(buffer)
        return ring[self.current[buffer]] if ring is not None else self.owner[buffer]

    def held(self, buffer: int, i: int) -> bool:
        """Does anyone but the ring reference allocation i of result buffer `buffer` (a
        result, or a view of one)? NumPy memory (pinned, or the fake's) by reference
        count; Numba device memory by Numba's own count of views."""
        ring = self.rings[buffer]
        if isinstance(ring[i], np.ndarray):
            return sys.getrefcount(ring[i]) > 2  # the ring's slot and the argument
        return self.platform.holders(ring[i]) > self._free[id(ring[i])]

    def free_result(self, buffer: int) -> int | None:
        """If the caller still holds the current allocation of result buffer `buffer`,
        move it to one nobody holds (a new one if need be) and return its address."""
        if not self.held(buffer, self.current[buffer]):
            return None  # the usual replay: nothing to do
        ring = self.rings[buffer]
        free = next((i for i in range(len(ring)) if not self.held(buffer, i)), None)
        if free is None:
            ring.append(self._allocate(buffer))
            free = len(ring) - 1
            self._count_free(ring[free])
        self.current[buffer] = free
        self.base[buffer] = self.platform.address(ring[free])
        return self.base[buffer]

    def _count_free(self, allocation: Any) -> None:
        if not isinstance(allocation, np.ndarray):
            self._free[id(allocation)] = self.platform.holders(allocation)

    def result(self, view: Any, host: bool) -> Any:
        """A result: a NumPy view of pinned memory, or a device array over graph memory."""
        owner = self.allocation(view.buffer)
        if host:
            return np.ndarray(view.shape, view.dtype, buffer=owner, offset=view.offset,
                              strides=view.strides)
        return self.platform.device_view(owner, view.offset, view.shape, view.strides,
                                         view.dtype)

    def device_bytes(self) -> int:
        """Device memory this executable allocated (ring allocations included)."""
        total = sum(self.plan.buffers[b].nbytes for b in self.owner
                    if self.plan.buffers[b].kind in _DEVICE)
        total += self.arena.nbytes if self.arena_allocation is not None else 0
        for b, ring in self.rings.items():
            if self.plan.buffers[b].kind in _DEVICE:
                total += self.plan.buffers[b].nbytes * len(ring)
        return total

    def scratch_address(self) -> int:
        return self.platform.address(self.scratch)
