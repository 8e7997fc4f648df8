"""Warp- and group-level reductions for the row kernels (nn.py, argmax.py, attention.py).

A *group* is `group` consecutive threads of a block (a multiple of the warp, or the
whole block) that work on one row. On a GPU a warp reduces through register shuffles
(`shfl_xor_sync`: every lane ends with the same value, since each butterfly step adds
the same two partials in either order) and the warps of a group through a few words of
shared memory, in a fixed order. Numba's simulator has no shuffles: there a warp
reduces through shared memory (`scratch`, one slot per thread), summed in lane order.

Every function here must be called by all threads of the block together (it may
synchronize the block): kernels call them outside any branch that depends on the thread.
"""
from __future__ import annotations

import math

from numba import cuda

from . import _base as B
from ._elementwise_kernels import _max2

WARP = 32
FULL_MASK = 0xFFFFFFFF


if B.SIMULATOR:
    @cuda.jit(device=True)
    def warp_sum(v, scratch):
        """The sum of `v` over the lanes of this thread's warp, in every lane."""
        tid = cuda.threadIdx.x
        scratch[tid] = v
        cuda.syncthreads()
        first = tid - tid % WARP
        last = min(first + WARP, cuda.blockDim.x)
        s = scratch[first]
        for i in range(first + 1, last):
            s += scratch[i]
        cuda.syncthreads()
        return s

    @cuda.jit(device=True)
    def warp_max(v, scratch):
        """The maximum of `v` over the lanes of this thread's warp (NaN wins)."""
        tid = cuda.threadIdx.x
        scratch[tid] = v
        cuda.syncthreads()
        first = tid - tid % WARP
        last = min(first + WARP, cuda.blockDim.x)
        s = scratch[first]
        for i in range(first + 1, last):
            s = _max2(s, scratch[i])
        cuda.syncthreads()
        return s
else:
    @cuda.jit(device=True)
    def warp_sum(v, scratch):  # noqa: ARG001 - the simulator's version uses it
        """The sum of `v` over the 32 lanes of this thread's warp, in every lane."""
        v += cuda.shfl_xor_sync(FULL_MASK, v, 16)
        v += cuda.shfl_xor_sync(FULL_MASK, v, 8)
        v += cuda.shfl_xor_sync(FULL_MASK, v, 4)
        v += cuda.shfl_xor_sync(FULL_MASK, v, 2)
        v += cuda.shfl_xor_sync(FULL_MASK, v, 1)
        return v

    @cuda.jit(device=True)
    def warp_max(v, scratch):  # noqa: ARG001 - the simulator's version uses it
        """The maximum of `v` over the 32 lanes of this thread's warp (NaN wins)."""
        v = _max2(v, cuda.shfl_xor_sync(FULL_MASK, v, 16))
        v = _max2(v, cuda.shfl_xor_sync(FULL_MASK, v, 8))
        v = _max2(v, cuda.shfl_xor_sync(FULL_MASK, v, 4))
        v = _max2(v, cuda.shfl_xor_sync(FULL_MASK, v, 2))
        v = _max2(v, cuda.shfl_xor_sync(FULL_MASK, v, 1))
        return v


@cuda.jit(device=True)
def group_sum(v, group, scratch, partials):
    """The sum of `v` over this thread's group of `group` threads (a warp or a multiple of
    one), in every thread of the group: warps first, then their partials in warp order."""
    v = warp_sum(v, scratch)
    if group <= WARP:
        return v
    tid = cuda.threadIdx.x
    if tid % WARP == 0:
        partials[tid // WARP] = v
    cuda.syncthreads()
    first = (tid - tid % group) // WARP
    s = partials[first]
    for w in range(first + 1, first + group // WARP):
        s += partials[w]
    cuda.syncthreads()
    return s


@cuda.jit(device=True)
def group_max(v, group, scratch, partials):
    """The maximum of `v` over this thread's group (NaN wins), in every thread of it."""
    v = warp_max(v, scratch)
    if group <= WARP:
        return v
    tid = cuda.threadIdx.x
    if tid % WARP == 0:
        partials[tid // WARP] = v
    cuda.syncthreads()
    first = (tid - tid % group) // WARP
    s = partials[first]
    for w in range(first + 1, first + group // WARP):
        s = _max2(s, partials[w])
    cuda.syncthreads()
    return s


def row_groups(n: int, rows: int) -> tuple[int, int, int]:
    """(group, block, grid) for kernels giving each of `rows` rows of `n` elements a group
    of threads: about four elements a thread, from one warp up to a block of 256 threads,
    several rows a block when rows are short. The simulator gets one row of at most 8
    threads a block (a Python thread per CUDA thread)."""
    if B.SIMULATOR:
        group = min(8, B.next_pow2(max(n, 1)))
        return group, group, B.grid_for(rows)
    group = max(WARP, min(B.MAX_BLOCK, B.next_pow2(-(-max(n, 1) // 4))))
    per_block = max(1, B.MAX_BLOCK // group)
    per_block = min(per_block, B.next_pow2(max(rows, 1)))
    block = group * per_block
    return group, block, max(1, min(-(-rows // per_block), 65535))


NINF = -math.inf
