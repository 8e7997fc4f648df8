"""Decode attention: one new query per row and head over a KV cache, reading only the
positions 0..pos, with `pos` a Python int or a dynamic scalar (patched on every call).

Flash-decoding's plan: the cached positions are split into chunks, one block per (chunk,
head, row). A block scores its chunk's keys (a warp per four keys, lanes over the head
dimension, a shuffle sum each), takes the chunk's softmax (max, exp, sum) and its share of
the context (groups of threads over positions, lanes over the head dimension). With one
chunk a row the block writes the result; with several, each writes (max, sum, unnormalized
context), and the last block of a (row, head) to finish (a ticket counter that a memset
node zeroes on every replay) combines them in chunk order, rescaling each by
exp(max - overall max): one launch either way. Blocks whose chunk starts after pos return
at once, so a step reads what it attends to.

With `k` and `v` the op also appends: the block holding pos first writes this step's k and
v into the caches at pos, for the first `rows` rows (tg.length() in a bucketed function:
padding rows never write a slot).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import cuda

from ..trace import access, empty, zeros
from ..traced import Array, DynamicScalar
from . import _base as B
from . import _warp as W
from .elementwise import copy

MAX_D = 256          # head dimensions a block keeps in shared memory
MAX_CHUNK = 1024     # positions a block scores
_MIN_CHUNK = 4 if B.SIMULATOR else 32
_TARGET_BLOCKS = 8 if B.SIMULATOR else 256   # blocks a launch should give the GPU
_THREADS = 8 if B.SIMULATOR else 128


def launch_plan(rows: int, heads: int, max_len: int) -> tuple[int, int, int]:
    """(threads, chunk, splits): positions per block, chosen so that rows * heads * splits
    blocks fill the GPU, at least _MIN_CHUNK positions a chunk, at most MAX_CHUNK. The
    kernels take the chunk as ceil(max_len / splits) (no longer than this one)."""
    wanted = -(-_TARGET_BLOCKS // max(rows * heads, 1))
    chunk = max(_MIN_CHUNK, min(MAX_CHUNK, -(-max_len // wanted)))
    splits = -(-max_len // chunk)
    return _THREADS, -(-max_len // splits), splits


_SPLIT = '''
def {name}(q, k, v, kc, vc, pos, rows, scale, zero, ninf, nan, part_m, part_l, part_o,
           tickets, out):
    """Block (s, h, b): row b, head h, positions [s * chunk, (s + 1) * chunk) up to pos,
    for gridDim.x chunks of the cache (one: the result directly, else partials that the
    last block of (b, h) to finish combines)."""
    last = cuda.shared.array(1, int32)
    scratch = cuda.shared.array(MAX_BLOCK, out.dtype)
    partials = cuda.shared.array(MAX_WARPS, out.dtype)
    qs = cuda.shared.array(MAX_D, out.dtype)
    p = cuda.shared.array(MAX_CHUNK, out.dtype)
    ctx = cuda.shared.array(MAX_BLOCK, out.dtype)
    s = cuda.blockIdx.x
    h = cuda.blockIdx.y
    b = cuda.blockIdx.z
    tid = cuda.threadIdx.x
    nt = cuda.blockDim.x
    max_len = kc.shape[2]
    d = kc.shape[3]
    final = cuda.gridDim.x == 1
    chunk = (max_len + cuda.gridDim.x - 1) // cuda.gridDim.x
    start = s * chunk
    if pos < 0 or pos >= max_len or b >= kc.shape[0]:  # nothing to attend: NaN, no write
        if s == 0:
            for e in range(tid, d, nt):
                out[b, h, e] = nan
        return
    if start > pos:  # this chunk is past pos: the combine does not read it
        return
    end = min(start + chunk, pos + 1)
    count = end - start
    if {append} and b < rows and pos < start + chunk:
        for e in range(tid, d, nt):
            kc[b, h, pos, e] = k[b, h, e]
            vc[b, h, pos, e] = v[b, h, e]
    for e in range(tid, d, nt):
        qs[e] = q[b, h, e] * scale
    cuda.syncthreads()

    # scores: each warp four keys at a time, its lanes over the head dimension
    ws = min(WARP, nt)
    warp = tid // ws
    lane = tid - warp * ws
    for t0 in range(start, end, 4 * (nt // ws)):
        t = t0 + 4 * warp
        d0 = zero
        d1 = zero
        d2 = zero
        d3 = zero
        for e in range(lane, d, ws):
            qe = qs[e]
            if t < end:
                d0 += qe * kc[b, h, t, e]
            if t + 1 < end:
                d1 += qe * kc[b, h, t + 1, e]
            if t + 2 < end:
                d2 += qe * kc[b, h, t + 2, e]
            if t + 3 < end:
                d3 += qe * kc[b, h, t + 3, e]
        d0 = warp_sum(d0, scratch)
        d1 = warp_sum(d1, scratch)
        d2 = warp_sum(d2, scratch)
        d3 = warp_sum(d3, scratch)
        if lane == 0:
            if t < end:
                p[t - start] = d0
            if t + 1 < end:
                p[t + 1 - start] = d1
            if t + 2 < end:
                p[t + 2 - start] = d2
            if t + 3 < end:
                p[t + 3 - start] = d3
    cuda.syncthreads()

    # the chunk's softmax: its max, the exponentials (kept in p) and their sum
    mx = ninf
    for i in range(tid, count, nt):
        mx = _max2(mx, p[i])
    mx = group_max(mx, nt, scratch, partials)
    total = zero
    for i in range(tid, count, nt):
        w = math.exp(p[i] - mx)
        p[i] = w
        total += w
    total = group_sum(total, nt, scratch, partials)
    cuda.syncthreads()

    # context: groups of d threads over positions i = g, g + groups, ...; then the groups'
    # partial sums in group order
    groups = nt // d
    for e0 in range(0, d, nt):
        g = tid // d if groups > 0 else 0
        e = tid - g * d + e0 if groups > 0 else tid + e0
        step = groups if groups > 0 else 1
        acc = zero
        if g < step and e < d:
            i = g
            while i + 3 * step < count:  # four loads in flight
                v0 = vc[b, h, start + i, e]
                v1 = vc[b, h, start + i + step, e]
                v2 = vc[b, h, start + i + 2 * step, e]
                v3 = vc[b, h, start + i + 3 * step, e]
                acc += p[i] * v0
                acc += p[i + step] * v1
                acc += p[i + 2 * step] * v2
                acc += p[i + 3 * step] * v3
                i += 4 * step
            while i < count:
                acc += p[i] * vc[b, h, start + i, e]
                i += step
        ctx[tid] = acc
        cuda.syncthreads()
        if tid < d and tid < nt:
            e = tid + e0
            a = ctx[tid]
            for gg in range(1, step):
                a += ctx[gg * d + tid]
            if e < d:
                if final:
                    out[b, h, e] = a / total
                else:
                    part_o[b, h, s, e] = a
        cuda.syncthreads()
    if final:
        return
    if tid == 0:
        part_m[b, h, s] = mx
        part_l[b, h, s] = total
    # the last of the pos // chunk + 1 blocks of (b, h) to get here combines the chunks,
    # rescaling each by exp(its max - the overall max), in chunk order
    cuda.threadfence()
    cuda.syncthreads()
    chunks = pos // chunk + 1
    if tid == 0:
        last[0] = cuda.atomic.add(tickets, (b, h), 1) == chunks - 1
        # acquire: the other blocks' parts, not lines this SM's L1 holds from before
        cuda.threadfence()
    cuda.syncthreads()
    if not last[0]:
        return
    mx = part_m[b, h, 0]
    for c in range(1, chunks):
        mx = _max2(mx, part_m[b, h, c])
    for e in range(tid, d, nt):
        total = zero
        acc = zero
        for c in range(chunks):
            w = math.exp(part_m[b, h, c] - mx)
            total += w * part_l[b, h, c]
            acc += w * part_o[b, h, c, e]
        out[b, h, e] = acc / total
'''

_ENV = {"__name__": __name__, "cuda": cuda, "math": math, "MAX_BLOCK": B.MAX_BLOCK,
        "MAX_WARPS": B.MAX_BLOCK // W.WARP, "MAX_D": MAX_D, "MAX_CHUNK": MAX_CHUNK,
        "WARP": W.WARP, "_max2": W._max2, "warp_sum": W.warp_sum,
        "group_max": W.group_max, "group_sum": W.group_sum, "int32": np.int32}

_PARTS = ["part_m", "part_l", "part_o", "tickets"]
attend = access(B.make_kernel("decode_attention", _SPLIT, _ENV, append="False"),
                reads=["q", "kc", "vc", *_PARTS], writes=[*_PARTS, "out"])
append_attend = access(B.make_kernel("decode_attention_append", _SPLIT, _ENV, append="True"),
                       reads=["q", "k", "v", "kc", "vc", *_PARTS],
                       writes=["kc", "vc", *_PARTS, "out"])


def decode_attention(q: Any, k_cache: Any, v_cache: Any, pos: Any, *, k: Any = None,
                     v: Any = None, rows: Any = None, scale: float | None = None,
                     out: Any = None) -> Array:
    """softmax(q . k_cache[:, :, :pos+1] * scale) @ v_cache[:, :, :pos+1] per row and head.

    q (B, H, D); k_cache, v_cache (S, H, T, D): row b attends cache slot b; result
    (B, H, D). `pos` is a Python int or a dynamic scalar (tg.compile(dynamic={"pos":
    "value"})). With `k` and `v` (B, H, D), they are first written into the caches at pos
    for the first `rows` rows (default all; tg.length() in a bucketed function), so the
    step attends to itself. Where there is nothing to attend, a pos outside [0, T) or a row
    at or past the S slots, the result is NaN and nothing is written (a bucketed function
    is also traced at lengths above its largest bucket). `scale` defaults to 1 / sqrt(D).
    float32 or float64.
    """
    op = "decode_attention"
    q = B.require_array(op, q, "q")
    k_cache = B.require_array(op, k_cache, "k_cache")
    v_cache = B.require_array(op, v_cache, "v_cache")
    if q.ndim != 3 or k_cache.ndim != 4 or tuple(v_cache.shape) != tuple(k_cache.shape) or \
            (k_cache.shape[1], k_cache.shape[3]) != tuple(q.shape[1:]):
        raise B.fail(op, f"q {tuple(q.shape)}, k_cache {tuple(k_cache.shape)} and v_cache "
                     f"{tuple(v_cache.shape)} do not fit (rows, heads, dim) and "
                     "(slots, heads, max_len, dim)",
                     "pass one layer's caches (k_cache[layer]) and view q as "
                     "(rows, heads, dim)")
    slots, heads, max_len, dim = k_cache.shape
    rows_ = q.shape[0]
    if dim > MAX_D or max_len == 0:
        raise B.fail(op, f"a head dimension of {dim} over {max_len} positions",
                     f"use heads of at most {MAX_D} dimensions and a non-empty cache")
    B.combines(op, q, max_len)  # over the cache's positions (a dynamic T is refused)
    B.combines(op, q, dim)
    arrays = [q, k_cache, v_cache]
    append = k is not None or v is not None
    if append:
        if k is None or v is None:
            raise B.fail(op, "k and v must be given together", "pass both, or neither")
        k = B.require_array(op, k, "k")
        v = B.require_array(op, v, "v")
        for x, name in ((k, "k"), (v, "v")):
            if tuple(x.shape) != tuple(q.shape):
                raise B.fail(op, f"{name} has shape {tuple(x.shape)}, q {tuple(q.shape)}",
                             f"pass this step's {name} as (rows, heads, dim), like q")
        arrays += [k, v]
    dtype = q.dtype
    for x in arrays:
        B.check_dtype(op, x.dtype, (np.dtype(np.float32), np.dtype(np.float64)))
        if x.dtype != dtype:
            raise B.fail(op, f"mixed dtypes {dtype} and {x.dtype}",
                         "convert every operand to one float dtype (tg.ops.astype)")
    _check_scalar(op, pos, "pos", max_len)
    if rows is not None:
        _check_scalar(op, rows, "rows", None)
    result, given = B.out_array(op, out, tuple(q.shape), dtype)
    for cache in (k_cache, v_cache):
        if given and B.overlaps(result, cache):
            raise B.fail(op, "out overlaps a cache", "write the result to another array")
    written = (k_cache, v_cache) if append else ()
    q, k, v = (_apart(x, result, written) for x in (q, k, v))
    if result.size == 0:
        return B.launched_nothing(result)
    threads, _, splits = launch_plan(rows_, heads, max_len)
    args = _scalars(dtype, pos, slots if rows is None else rows, scale, dim)
    kernel = append_attend if append else attend
    kv = (k, v) if append else (q, q)
    grid = (splits, heads, rows_)
    if splits == 1:  # the partials are not written: views of the result stand in for them
        o4 = B.view(result, (rows_, heads, 1, dim),
                    (result.strides[0], result.strides[1], 0, result.strides[2]))
        none = B.view(result, (rows_, heads), (0, 0), dtype=np.int32)
        kernel[grid, threads](q, *kv, k_cache, v_cache, *args, result, result, o4, none,
                              result)
        return result
    part_m = empty((rows_, heads, splits), dtype)
    part_l = empty((rows_, heads, splits), dtype)
    part_o = empty((rows_, heads, splits, dim), dtype)
    tickets = zeros((rows_, heads), np.int32)  # a memset node, beside the chain
    kernel[grid, threads](q, *kv, k_cache, v_cache, *args, part_m, part_l, part_o, tickets,
                          result)
    return result


def _check_scalar(op: str, x: Any, name: str, bound: int | None) -> None:
    """An int (below `bound` if given) or a dynamic scalar (checked in the kernel)."""
    if isinstance(x, DynamicScalar):
        return
    if not isinstance(x, (int, np.integer)) or isinstance(x, bool) or x < 0 or \
            (bound is not None and x >= bound):
        limit = f" below {bound}" if bound is not None else ""
        raise B.fail(op, f"{name} must be an int from 0{limit} or a dynamic scalar, got {x!r}",
                     f"pass {name} as a Python int, or declare it dynamic "
                     f'(tg.compile(dynamic={{"{name}": "value"}}))')


def _apart(x: Array | None, result: Array, written: tuple[Array, ...]) -> Array | None:
    """x, or a copy of it where it overlaps what the launch writes (NumPy's answer)."""
    if x is None:
        return None
    if B.must_copy(x, result, in_place=False) or any(B.overlaps(x, c) for c in written):
        return copy(x)
    return x


def _scalars(dtype: np.dtype, pos: Any, rows: Any, scale: float | None, dim: int) -> tuple:
    """pos, rows, scale, zero, -inf, NaN: the split kernel's scalars (none follows the
    rows: the chunk length comes from the grid, in the kernel)."""
    return (pos, rows, B.scalar_of(dim ** -0.5 if scale is None else scale, dtype),
            B.scalar_of(0, dtype), B.scalar_of(-math.inf, dtype), B.scalar_of(math.nan, dtype))
