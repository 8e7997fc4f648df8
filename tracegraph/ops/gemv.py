"""Products of a few rows: act(x @ w + bias + residual) for x of at most ROWS rows, as one
kernel that reads w once. A decode step at batch 1 is such products: their time is w's
bytes over the memory bandwidth, and a GEMM library tuned for many rows leaves it idle.

Two kernels, by which of w's axes is contiguous:

- `gemv_rows` (w's rows contiguous, NumPy's orientation): a block owns COLS consecutive
  columns, lanes over them (coalesced), its SLICES warps over the k rows; the grid splits
  k further over `splits` blocks so that a small matrix still has every SM reading. Each
  block writes its partial sums; the last block of a column tile to finish (a ticket
  counter that a memset node zeroes on every replay) adds them in split order and applies
  bias, residual and the activation. The order of every sum is fixed: each replay gives
  the same bits.
- `gemv_cols` (w's columns contiguous, torch's orientation: transpose_w=True, a tied
  embedding as the output layer): a warp per column, lanes over k (coalesced), a shuffle
  sum.
"""
from __future__ import annotations

import math

import numpy as np
from numba import cuda

from ..trace import access, empty, zeros
from ..traced import Array
from . import _base as B
from . import _warp as W
from ._elementwise_kernels import _gelu, _relu

ROWS = 4                                   # the most rows of x a GEMV product takes
COLS = 4 if B.SIMULATOR else 32            # columns of a gemv_rows block (its lanes)
SLICES = 2 if B.SIMULATOR else 8           # warps of a gemv_rows block, over k
_TARGET_BLOCKS = 4 if B.SIMULATOR else 1056  # blocks a split launch aims for (8 an SM)
_MIN_PER_THREAD = 2 if B.SIMULATOR else 4  # k rows a thread reads at least, when split
_COLS_PER_BLOCK = 1 if B.SIMULATOR else 8  # warps (columns) of a gemv_cols block

# flags: which of bias, residual, relu, gelu apply
BIAS, RESIDUAL, RELU, GELU = 1, 2, 4, 8


@cuda.jit(device=True)
def _finish(t, r, j, bias, residual, flags):
    """act(t + bias[j] + residual[r, j]), each where flags say (as linear's fallback)."""
    if flags & BIAS:
        t += bias[j]
    if flags & RESIDUAL:
        t += residual[r, j]
    if flags & RELU:
        t = _relu(t)
    if flags & GELU:
        t = _gelu(t)
    return t


@cuda.jit(device=True)
def _acc_rows(x, w, j, k, stop, step, m, acc):
    """acc[r] += x[r, i] * w[i, j] for i = k, k + step, ... below stop and r < m, four
    loads of w in flight."""
    while k + 3 * step < stop:
        w0 = w[k, j]
        w1 = w[k + step, j]
        w2 = w[k + 2 * step, j]
        w3 = w[k + 3 * step, j]
        for r in range(ROWS):
            if r < m:
                acc[r] += x[r, k] * w0
                acc[r] += x[r, k + step] * w1
                acc[r] += x[r, k + 2 * step] * w2
                acc[r] += x[r, k + 3 * step] * w3
        k += 4 * step
    while k < stop:
        w0 = w[k, j]
        for r in range(ROWS):
            if r < m:
                acc[r] += x[r, k] * w0
        k += step


_ENV = {"__name__": __name__, "acc_rows": _acc_rows, "cuda": cuda, "math": math,
        "ROWS": ROWS, "COLS": COLS, "SLICES": SLICES, "MAX_BLOCK": B.MAX_BLOCK, "WARP": W.WARP,
        "warp_sum": W.warp_sum, "_finish": _finish, "int32": np.int32}

_GEMV_ROWS = '''
def {name}(x, w, bias, residual, flags, zero, partial, tickets, out):
    """out (m, n) = act(x (m, k) @ w (k, n) + ...): block (tile, split) sums rows
    [split * chunk, (split + 1) * chunk) of k for columns [tile * COLS, (tile + 1) * COLS)."""
    sums = cuda.shared.array((SLICES, ROWS, COLS), out.dtype)
    last = cuda.shared.array(1, int32)
    acc = cuda.local.array(ROWS, out.dtype)
    tid = cuda.threadIdx.x
    c = tid % COLS
    sl = tid // COLS
    m = x.shape[0]
    kk = w.shape[0]
    n = w.shape[1]
    j = cuda.blockIdx.x * COLS + c
    splits = cuda.gridDim.y
    chunk = (kk + splits - 1) // splits
    k0 = cuda.blockIdx.y * chunk
    k1 = min(k0 + chunk, kk)
    for r in range(ROWS):
        acc[r] = zero
    if j < n:
        acc_rows(x, w, j, k0 + sl, k1, SLICES, m, acc)
    for r in range(ROWS):
        sums[sl, r, c] = acc[r]
    cuda.syncthreads()
    if sl == 0 and j < n:
        for r in range(m):
            t = sums[0, r, c]
            for s in range(1, SLICES):
                t += sums[s, r, c]
            if splits == 1:
                out[r, j] = _finish(t, r, j, bias, residual, flags)
            else:
                partial[cuda.blockIdx.y, r, j] = t
    if splits == 1:
        return
    cuda.threadfence()  # this block's partials are visible before its ticket is
    cuda.syncthreads()
    if tid == 0:
        last[0] = cuda.atomic.add(tickets, cuda.blockIdx.x, 1) == splits - 1
        # acquire: the other blocks' partials, not lines this SM's L1 holds from before
        cuda.threadfence()
    cuda.syncthreads()
    if last[0] and sl == 0 and j < n:
        for r in range(m):
            t = partial[0, r, j]
            for s in range(1, splits):
                t += partial[s, r, j]
            out[r, j] = _finish(t, r, j, bias, residual, flags)
'''

_GEMV_COLS = '''
def {name}(x, w, bias, residual, flags, zero, out):
    """out (m, n) = act(x (m, k) @ w (k, n) + ...): a warp per column j, lanes over k."""
    scratch = cuda.shared.array(MAX_BLOCK, out.dtype)
    acc = cuda.local.array(ROWS, out.dtype)
    lanes = min(WARP, cuda.blockDim.x)
    tid = cuda.threadIdx.x
    lane = tid % lanes
    per_block = cuda.blockDim.x // lanes
    m = x.shape[0]
    kk = w.shape[0]
    n = w.shape[1]
    for first in range(cuda.blockIdx.x * per_block, n, cuda.gridDim.x * per_block):
        j = first + tid // lanes
        for r in range(ROWS):
            acc[r] = zero
        if j < n:
            acc_rows(x, w, j, lane, kk, lanes, m, acc)
        for r in range(ROWS):  # every thread of the block, outside the branches
            acc[r] = warp_sum(acc[r], scratch)
        for r in range(ROWS):  # (a constant range: acc stays in registers)
            if r < m and lane == 0 and j < n:
                out[r, j] = _finish(acc[r], r, j, bias, residual, flags)
'''

gemv_rows = access(B.make_kernel("gemv_rows", _GEMV_ROWS, _ENV),
                   reads=["x", "w", "bias", "residual", "partial", "tickets"],
                   writes=["partial", "tickets", "out"])
gemv_cols = access(B.make_kernel("gemv_cols", _GEMV_COLS, _ENV),
                   reads=["x", "w", "bias", "residual"], writes=["out"])


def split_plan(k: int, n: int) -> tuple[int, int]:
    """(tiles, splits) of a gemv_rows launch: COLS columns a tile, k split so that
    tiles * splits blocks fill the GPU while each thread still reads a few rows."""
    tiles = -(-n // COLS)
    most = max(1, k // (SLICES * _MIN_PER_THREAD))
    return tiles, max(1, min(-(-_TARGET_BLOCKS // tiles), most))


def gemv_linear(x: Array, w: Array, bias: Array | None, residual: Array | None,
                activation: str | None, out: Array | None) -> Array | None:
    """act(x @ w + bias + residual) as one GEMV kernel (two nodes with the memset of its
    tickets when k is split), or None where it does not apply: more than ROWS rows, not
    one float dtype throughout, no unit stride along either axis of w, or a result that
    overlaps x or w."""
    m, k = x.shape
    n = w.shape[1]
    operands = [a for a in (x, w, bias, residual, out) if a is not None]
    dtype = x.dtype
    if not 0 < m <= ROWS or k == 0 or n == 0 or dtype not in B.FLOATS or \
            any(a.dtype != dtype for a in operands):
        return None
    item = dtype.itemsize
    by_rows = w.strides[1] == item
    if not by_rows and w.strides[0] != item:
        return None
    result = out if out is not None else empty((m, n), dtype)
    if B.overlaps(x, result) or B.overlaps(w, result):
        return None
    if residual is not None and B.overlaps(residual, result) and \
            not B.same_elements(residual, result):
        return None
    flags = (BIAS if bias is not None else 0) | (RESIDUAL if residual is not None else 0) | \
        {None: 0, "relu": RELU, "gelu": GELU}[activation]
    bias = bias if bias is not None else B.view(x, (n,), (0,))
    residual = residual if residual is not None else B.view(x, (m, n), (0, 0))
    scalars = (flags, B.scalar_of(0, dtype))
    if not by_rows:
        per_block = _COLS_PER_BLOCK
        lanes = W.WARP if not B.SIMULATOR else 8
        grid = max(1, min(-(-n // per_block), 65535))
        gemv_cols[grid, per_block * lanes](x, w, bias, residual, *scalars, result)
        return result
    tiles, splits = split_plan(k, n)
    if splits == 1:
        placeholder = B.view(result, (1, m, n), (0, *result.strides))
        gemv_rows[(tiles, 1), COLS * SLICES](x, w, bias, residual, *scalars, placeholder,
                                             B.view(result, (tiles,), (0,), dtype=np.int32),
                                             result)
        return result
    partial = empty((splits, m, n), dtype)
    tickets = zeros((tiles,), np.int32)
    gemv_rows[(tiles, splits), COLS * SLICES](x, w, bias, residual, *scalars, partial,
                                              tickets, result)
    return result
