"""Neural-network ops over one axis: softmax, log_softmax (any axis) and layer_norm (last).

layer_norm gives a row of up to 1,024 elements one warp that holds it in registers (one
read of x, w and b; shuffle sums). Elsewhere a group of threads handles one row (one
position of the other axes): a warp for rows of up to about 128 elements, up to a block
of 256 threads for longer ones, several rows a block when rows are short
(`_warp.row_groups`). Its threads stride over the row; the max/sum reductions go through
warp shuffles, then the group's warps through shared memory (_warp.py). Rows of any
length.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
from numba import cuda

from ..trace import access, empty
from ..traced import Array
from . import _base as B
from . import _warp as W
from .elementwise import copy
from .reduce import _as_3d, _fold

MAX_BLOCK = B.MAX_BLOCK

_SOFTMAX = '''
def {name}(x, out, ninf, zero, group):
    """Along axis 1 of 3-D views x, out (outer, n, inner): a group of threads per row."""
    scratch = cuda.shared.array(MAX_BLOCK, out.dtype)
    partials = cuda.shared.array(MAX_WARPS, out.dtype)
    tid = cuda.threadIdx.x
    t = tid % group
    per_block = cuda.blockDim.x // group
    n_outer = x.shape[0]
    n = x.shape[1]
    n_inner = x.shape[2]
    jobs = n_outer * n_inner
    for first in range(cuda.blockIdx.x * per_block, jobs, cuda.gridDim.x * per_block):
        job = first + tid // group
        m = job // n_inner
        k = job - m * n_inner
        here = job < jobs
        mx = ninf
        if here:
            for j in range(t, n, group):
                mx = _max2(mx, x[m, j, k])
        mx = group_max(mx, group, scratch, partials)
        s = zero
        if here:
            for j in range(t, n, group):
                s += math.exp(x[m, j, k] - mx)
        s = group_sum(s, group, scratch, partials)
        if here:
            for j in range(t, n, group):
                out[m, j, k] = {result}
'''

_ENV = {"__name__": __name__, "cuda": cuda, "math": math, "MAX_BLOCK": B.MAX_BLOCK,
        "MAX_WARPS": B.MAX_BLOCK // W.WARP, "_max2": W._max2, "group_max": W.group_max,
        "group_sum": W.group_sum}

softmax_rows = access(B.make_kernel("softmax", _SOFTMAX, _ENV,
                                    result="math.exp(x[m, j, k] - mx) / s"),
                      reads=["x"], writes=["out"])
log_softmax_rows = access(B.make_kernel("log_softmax", _SOFTMAX, _ENV,
                                        result="x[m, j, k] - mx - math.log(s)"),
                          reads=["x"], writes=["out"])

_LAYER_NORM = '''
def {name}(x, w, b, flags, inv_n, eps, zero, group, out):
    """Normalize rows of 2-D views x, out (rows, n); scale by w[n], shift by b[n] when
    flags has bit 1, bit 2. A group of threads per row; biased variance, like PyTorch."""
    scratch = cuda.shared.array(MAX_BLOCK, out.dtype)
    partials = cuda.shared.array(MAX_WARPS, out.dtype)
    tid = cuda.threadIdx.x
    t = tid % group
    per_block = cuda.blockDim.x // group
    rows = x.shape[0]
    n = x.shape[1]
    for first in range(cuda.blockIdx.x * per_block, rows, cuda.gridDim.x * per_block):
        r = first + tid // group
        here = r < rows
        s = zero
        if here:
            for j in range(t, n, group):
                s += x[r, j]
        mean = group_sum(s, group, scratch, partials) * inv_n
        q = zero
        if here:
            for j in range(t, n, group):
                d = x[r, j] - mean
                q += d * d
        sd = math.sqrt(group_sum(q, group, scratch, partials) * inv_n + eps)
        if here:
            for j in range(t, n, group):
                y = (x[r, j] - mean) / sd
                if flags & 1:
                    y = y * w[j]
                if flags & 2:
                    y = y + b[j]
                out[r, j] = y
'''

layer_norm_rows = access(B.make_kernel("layer_norm", _LAYER_NORM, _ENV),
                         reads=["x", "w", "b"], writes=["out"])

# A warp a row, the row in registers: each lane loads its PER elements of x, w and b at
# once (one trip to memory), then both sums are shuffles.
_LAYER_NORM_WARP = '''
def {name}(x, w, b, flags, inv_n, eps, zero, out):
    """As layer_norm, a warp (lanes = min(WARP, blockDim.x)) per row of at most
    lanes * {per} elements."""
    scratch = cuda.shared.array(MAX_BLOCK, out.dtype)
    v = cuda.local.array({per}, out.dtype)
    g = cuda.local.array({per}, out.dtype)
    h = cuda.local.array({per}, out.dtype)
    lanes = min(WARP, cuda.blockDim.x)
    tid = cuda.threadIdx.x
    lane = tid % lanes
    per_block = cuda.blockDim.x // lanes
    rows = x.shape[0]
    n = x.shape[1]
    for first in range(cuda.blockIdx.x * per_block, rows, cuda.gridDim.x * per_block):
        r = first + tid // lanes
        here = r < rows
        s = zero
        for i in range({per}):
            j = lane + i * lanes
            v[i] = zero
            g[i] = zero
            h[i] = zero
            if here and j < n:
                v[i] = x[r, j]
                if flags & 1:
                    g[i] = w[j]
                if flags & 2:
                    h[i] = b[j]
        for i in range({per}):
            s += v[i]
        mean = warp_sum(s, scratch) * inv_n
        q = zero
        for i in range({per}):
            if lane + i * lanes < n:
                d = v[i] - mean
                q += d * d
        sd = math.sqrt(warp_sum(q, scratch) * inv_n + eps)
        for i in range({per}):
            j = lane + i * lanes
            if here and j < n:
                y = (v[i] - mean) / sd
                if flags & 1:
                    y = y * g[i]
                if flags & 2:
                    y = y + h[i]
                out[r, j] = y
'''

_WARP_PER = (1, 2, 4, 8, 16, 32)  # elements a lane holds: rows of up to 32 lanes' worth
_layer_norm_warp = {
    per: access(B.make_kernel(f"layer_norm_warp{per}", _LAYER_NORM_WARP,
                              {**_ENV, "WARP": W.WARP, "warp_sum": W.warp_sum}, per=str(per)),
                reads=["x", "w", "b"], writes=["out"])
    for per in _WARP_PER}


def _warp_launch(n: int, rows: int) -> tuple[int, int, int] | None:
    """(per, block, grid) of the register kernel for rows of n, or None where a row is too
    long for one warp's registers: four rows a block (the simulator: one row of 8)."""
    lanes = 8 if B.SIMULATOR else W.WARP
    per = next((p for p in _WARP_PER if p * lanes >= n), None)
    if per is None:
        return None
    per_block = 1 if B.SIMULATOR else 4
    return per, lanes * per_block, max(1, min(-(-rows // per_block), 65535))


def _softmax(op: str, kernel: Any, x: Any, axis: Any, out: Any) -> Array:
    x = B.require_array(op, x)
    B.check_dtype(op, x.dtype, B.NUMERIC)
    if x.ndim == 0:
        raise B.fail(op, "needs at least one dimension", "pass an array, not a 0-d value")
    axis = B.normalize_axis(op, axis, x.ndim)
    dtype = np.result_type(x.dtype, np.float32)
    result, given = B.out_array(op, out, tuple(x.shape), dtype)
    if result.size == 0:
        return B.launched_nothing(result)
    if given and B.must_copy(x, result):  # in place is fine: a row is read, then written
        x = copy(x)
    x3, ((m, _), (n, _), (k, _)) = _as_3d(x, axis)
    B.combines(op, x, n)
    target = result
    folded = (_fold(result, tuple(range(axis))), _fold(result, tuple(range(axis + 1, x.ndim))))
    if folded[0] is None or folded[1] is None or result.dtype != dtype:  # (the kernel
        # computes in its output's dtype: a narrower out= gets the result, then a cast)
        target = empty(tuple(x.shape), dtype)
        folded = (_fold(target, tuple(range(axis))),
                  _fold(target, tuple(range(axis + 1, x.ndim))))
    outer, inner = folded
    assert outer is not None and inner is not None  # a new array always folds
    (_, so), (_, sk) = outer, inner
    out3 = B.view(target, (m, n, k), (so, target.strides[axis], sk))
    group, block, grid = W.row_groups(n, m * k)
    kernel[grid, block](x3, out3, B.scalar_of(-math.inf, dtype), B.scalar_of(0, dtype), group)
    if target is not result:
        copy(target, out=result)
    return result


def softmax(x: Any, axis: int = -1, *, out: Any = None) -> Array:
    """exp(x - max) / sum(exp(x - max)) along `axis` (the last by default)."""
    return _softmax("softmax", softmax_rows, x, axis, out)


def log_softmax(x: Any, axis: int = -1, *, out: Any = None) -> Array:
    """x - max - log(sum(exp(x - max))) along `axis` (the last by default)."""
    return _softmax("log_softmax", log_softmax_rows, x, axis, out)


def layer_norm(x: Any, weight: Any = None, bias: Any = None, eps: float = 1e-5, *,
               out: Any = None) -> Array:
    """(x - mean) / sqrt(var + eps) * weight + bias over the last axis (biased variance).

    weight and bias are 1-D arrays of the last axis' length, or None.
    """
    op = "layer_norm"
    x = B.require_array(op, x)
    B.check_dtype(op, x.dtype, B.NUMERIC)
    if x.ndim == 0:
        raise B.fail(op, "needs at least one dimension", "pass an array, not a 0-d value")
    n = x.shape[-1]
    B.combines(op, x, n)
    params = []
    for p, name in ((weight, "weight"), (bias, "bias")):
        if p is not None:
            p = B.require_array(op, p, name)
            B.check_dtype(op, p.dtype, B.NUMERIC, name)
            if tuple(p.shape) != (n,):
                raise B.fail(op, f"{name} has shape {tuple(p.shape)}, expected ({n},) for "
                             f"input of shape {tuple(x.shape)}",
                             "pass a 1-D array as long as the last axis")
        params.append(p)
    dtype = np.result_type(x.dtype, np.float32, *[p.dtype for p in params if p is not None])
    result, given = B.out_array(op, out, tuple(x.shape), dtype)
    if result.size == 0:
        return B.launched_nothing(result)
    if given:
        x = copy(x) if B.must_copy(x, result) else x
        params = [copy(p) if B.must_copy(p, result, in_place=False) else p for p in params]
    rows = x.size // n
    x2 = B.view(*_as_rows(x))
    target = result
    if _fold(result, tuple(range(x.ndim - 1))) is None or result.dtype != dtype:
        target = empty(tuple(x.shape), dtype)  # (as softmax's: computed in dtype, then cast)
    out2 = B.view(*_as_rows(target))
    placeholder = B.view(x2, (n,), (0,))
    flags = (1 if params[0] is not None else 0) | (2 if params[1] is not None else 0)
    w = params[0] if params[0] is not None else placeholder
    b = params[1] if params[1] is not None else placeholder
    scalars = (B.scalar_of(1.0 / n, dtype), B.scalar_of(eps, dtype), B.scalar_of(0, dtype))
    warp = _warp_launch(n, rows)
    if warp is not None:
        per, block, grid = warp
        _layer_norm_warp[per][grid, block](x2, w, b, flags, *scalars, out2)
    else:
        group, block, grid = W.row_groups(n, rows)
        layer_norm_rows[grid, block](x2, w, b, flags, *scalars[:2], scalars[2], group, out2)
    if target is not result:
        copy(target, out=result)
    return result


def _as_rows(a: Array) -> tuple[Array, tuple[int, int], tuple[int, int]]:
    """(a, shape, strides) of `a` as (rows, last axis); `a` must fold (else copy first)."""
    folded = _fold(a, tuple(range(a.ndim - 1)))
    if folded is None:
        a = copy(a)
        folded = _fold(a, tuple(range(a.ndim - 1)))
    assert folded is not None  # a contiguous copy always folds
    return a, (folded[0], a.shape[-1]), (folded[1], a.strides[-1])
