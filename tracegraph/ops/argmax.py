"""argmax as a row reduction: the index of the largest element along one axis (or of all
elements), NumPy's answer: the first of equal maxima, the first NaN where there is one.

The input is seen as a 3-D view (outer, n, inner) as in reduce.py. A group of threads
scans a chunk of a row, keeping (value, index) pairs, and the group combines them
(shared memory, in a tree). A row is split into chunks over many blocks when there are
few rows (a decode step's logits: 1 to 64 rows of 50,257): a first launch writes each
chunk's pair, a second picks among a row's chunks. Otherwise one launch does both.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import cuda, int64

from ..trace import access, empty
from ..traced import Array
from . import _base as B
from .elementwise import copy
from .reduce import _as_3d, _fold

# rows longer than _ONE_LAUNCH are split into chunks of at least _MIN_CHUNK elements
# while rows * chunks stays under _TARGET_BLOCKS (a few blocks per SM)
_ONE_LAUNCH = 16 if B.SIMULATOR else 4096
_MIN_CHUNK = 4 if B.SIMULATOR else 1024
_TARGET_BLOCKS = 8 if B.SIMULATOR else 512


@cuda.jit(device=True)
def _better(v, i, u, j, n):
    """Whether the pair (u, j) beats (v, i): an index n is no element; a NaN beats any
    number; then the larger value; then the lower index."""
    if j >= n:
        return False
    if i >= n:
        return True
    if u != u:
        return v == v or j < i
    if v != v:
        return False
    return u > v or (u == v and j < i)


@cuda.jit(device=True)
def _block_pick(v, i, n, vals, idxs):
    """The best (value, index) of the block's threads, in every thread (blockDim.x a
    power of two)."""
    tid = cuda.threadIdx.x
    vals[tid] = v
    idxs[tid] = i
    cuda.syncthreads()
    s = cuda.blockDim.x // 2
    while s > 0:
        if tid < s and _better(vals[tid], idxs[tid], vals[tid + s], idxs[tid + s], n):
            vals[tid] = vals[tid + s]
            idxs[tid] = idxs[tid + s]
        cuda.syncthreads()
        s //= 2
    v, i = vals[0], idxs[0]
    cuda.syncthreads()
    return v, i


@cuda.jit
def argmax_chunks(x, ninf, part_v, part_i, out):
    """Block (job, c) picks the best element of chunk c (of gridDim.y) of row `job` of the
    3-D view x (outer, n, inner): into out[outer, inner] when a row is one chunk, else
    into part_v, part_i[job, c]."""
    vals = cuda.shared.array(MAX_BLOCK, x.dtype)
    idxs = cuda.shared.array(MAX_BLOCK, int64)
    tid = cuda.threadIdx.x
    n_inner = x.shape[2]
    n = x.shape[1]
    chunk = (n + cuda.gridDim.y - 1) // cuda.gridDim.y
    final = cuda.gridDim.y == 1
    c = cuda.blockIdx.y
    lo = c * chunk
    hi = min(lo + chunk, n)
    for job in range(cuda.blockIdx.x, x.shape[0] * n_inner, cuda.gridDim.x):
        m = job // n_inner
        k = job - m * n_inner
        v = ninf
        i = n
        step = cuda.blockDim.x
        j = lo + tid
        while j + 3 * step < hi:  # four loads in flight
            u0 = x[m, j, k]
            u1 = x[m, j + step, k]
            u2 = x[m, j + 2 * step, k]
            u3 = x[m, j + 3 * step, k]
            if _better(v, i, u0, j, n):
                v, i = u0, j
            if _better(v, i, u1, j + step, n):
                v, i = u1, j + step
            if _better(v, i, u2, j + 2 * step, n):
                v, i = u2, j + 2 * step
            if _better(v, i, u3, j + 3 * step, n):
                v, i = u3, j + 3 * step
            j += 4 * step
        while j < hi:
            u = x[m, j, k]
            if _better(v, i, u, j, n):
                v, i = u, j
            j += step
        v, i = _block_pick(v, i, n, vals, idxs)
        if tid == 0:
            if final:
                out[m, k] = i
            else:
                part_v[job, c] = v
                part_i[job, c] = i


@cuda.jit
def argmax_parts(part_v, part_i, n, ninf, out):
    """out[job] = the index of the best pair among part_v, part_i[job, :] (one block a
    row of parts; out a (outer, inner) view)."""
    vals = cuda.shared.array(MAX_BLOCK, part_v.dtype)
    idxs = cuda.shared.array(MAX_BLOCK, int64)
    tid = cuda.threadIdx.x
    n_inner = out.shape[1]
    for job in range(cuda.blockIdx.x, part_v.shape[0], cuda.gridDim.x):
        v = ninf
        i = n
        for c in range(tid, part_v.shape[1], cuda.blockDim.x):
            if _better(v, i, part_v[job, c], part_i[job, c], n):
                v = part_v[job, c]
                i = part_i[job, c]
        v, i = _block_pick(v, i, n, vals, idxs)
        if tid == 0:
            m = job // n_inner
            out[m, job - m * n_inner] = i


MAX_BLOCK = B.MAX_BLOCK
access(argmax_chunks, reads=["x"], writes=["part_v", "part_i", "out"])
access(argmax_parts, reads=["part_v", "part_i"], writes=["out"])


def argmax(x: Any, axis: Any = None, *, out: Any = None) -> Array:
    """The index of the largest element along `axis` (None: of the flattened array, a 0-d
    result), as NumPy's argmax: int64, the first of equal maxima, the first NaN if any.
    `out` may be any integer array of the result's shape (a decode step's int32 tokens)."""
    op = "argmax"
    x = B.require_array(op, x)
    B.check_dtype(op, x.dtype, B.NUMERIC)
    if axis is not None:
        axis = B.normalize_axis(op, axis, x.ndim)
        if x.ndim == 0:
            axis = None
    out_shape = () if axis is None else tuple(s for d, s in enumerate(x.shape) if d != axis)
    if out is not None and B.overlaps(x, B.require_array(op, out, "out")):
        x = copy(x)  # a block would read what another has written
    x3, (_, (n, _), _) = _as_3d(x, axis)
    B.combines(op, x, n)
    if n == 0:
        raise B.fail(op, f"attempt to get argmax of an empty sequence (shape {x.shape})",
                     "take argmax over a non-empty axis")
    result, _ = B.out_array(op, out, out_shape, np.dtype(np.int64))
    if result.size == 0:
        return B.launched_nothing(result)
    target = result
    split = ((), ()) if axis is None else (tuple(range(axis)), tuple(range(axis, result.ndim)))
    folded = (_fold(result, split[0]), _fold(result, split[1]))
    if folded[0] is None or folded[1] is None:
        target = empty(out_shape, np.int64)
        folded = (_fold(target, split[0]), _fold(target, split[1]))
    (mo, so), (ko, sk) = folded  # type: ignore[misc]  # a new array always folds
    out2 = B.view(target, (mo, ko), (so, sk))
    _launch(x3, out2)
    if target is not result:
        copy(target, out=result)
    return result


def _launch(x3: Array, out2: Array) -> None:
    """One launch, or two when a row is split into chunks over several blocks."""
    m, n, k = x3.shape
    jobs = m * k
    ninf = B.scalar_of(-math.inf, x3.dtype) if x3.dtype.kind == "f" else \
        B.scalar_of(np.iinfo(x3.dtype).min, x3.dtype)
    chunks = 1 if n <= _ONE_LAUNCH else \
        max(1, min(_TARGET_BLOCKS // jobs, -(-n // _MIN_CHUNK), 65535))
    block = B.block_for(-(-n // chunks))  # the kernel's chunk: ceil(n / chunks)
    if chunks == 1:
        argmax_chunks[(B.grid_for(jobs), 1), block](x3, ninf, out2, out2, out2)
        return
    part_v = empty((jobs, chunks), x3.dtype)
    part_i = empty((jobs, chunks), np.int64)
    argmax_chunks[(B.grid_for(jobs), chunks), block](x3, ninf, part_v, part_i, out2)
    argmax_parts[B.grid_for(jobs), B.block_for(chunks)](part_v, part_i, n, ninf, out2)
