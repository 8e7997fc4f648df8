"""Reductions over all elements or one axis: sum, mean, max, min.

The input is seen as a 3-D view (outer, n, inner) reduced along n, so two kernels per
reduction serve every axis and layout (any n, not only powers of two):

- rows (inner == 1, e.g. the last axis or all elements): a block reduces one row; its
  threads stride over n, then combine through shared memory in a tree;
- columns (inner > 1): a thread reduces one (outer, inner) pair serially, so
  neighbouring threads read neighbouring elements.

When there are few outputs but n is long, a first launch reduces chunks of n into
partial results with many blocks, and a second launch of the same kernel reduces the
partials.
"""
from __future__ import annotations

import builtins
import math
from collections.abc import Callable
from typing import Any

import numpy as np
from numba import cuda

from ..trace import access, empty
from ..traced import Array
from . import _base as B
from ._elementwise_kernels import _max2, _min2
from .elementwise import copy

_REDUCE = '''
def {name}(x, out, chunk, scale, init):
    smem = cuda.shared.array(MAX_BLOCK, out.dtype)
    tid = cuda.threadIdx.x
    nt = cuda.blockDim.x
    n_outer = x.shape[0]
    n = x.shape[1]
    n_inner = x.shape[2]
    p = cuda.blockIdx.y
    lo = p * chunk
    hi = lo + chunk
    if hi > n:
        hi = n
    for job in range(cuda.blockIdx.x, n_outer * n_inner, cuda.gridDim.x):
        m = job // n_inner
        k = job - m * n_inner
        acc = init
        for j in range(lo + tid, hi, nt):
            v = x[m, j, k]
            acc = {combine_acc}
        smem[tid] = acc
        cuda.syncthreads()
        s = nt // 2
        while s > 0:
            if tid < s:
                u = smem[tid]
                v = smem[tid + s]
                smem[tid] = {combine}
            cuda.syncthreads()
            s //= 2
        if tid == 0:
            out[m, p, k] = smem[0]{finish}
        cuda.syncthreads()
'''

_REDUCE_COLUMNS = '''
def {name}(x, out, chunk, scale, init):
    n_outer = x.shape[0]
    n = x.shape[1]
    n_inner = x.shape[2]
    p = cuda.blockIdx.y
    lo = p * chunk
    hi = lo + chunk
    if hi > n:
        hi = n
    start = cuda.blockIdx.x * cuda.blockDim.x + cuda.threadIdx.x
    for job in range(start, n_outer * n_inner, cuda.gridDim.x * cuda.blockDim.x):
        m = job // n_inner
        k = job - m * n_inner
        acc = init
        for j in range(lo, hi):
            v = x[m, j, k]
            acc = {combine_acc}
        out[m, p, k] = acc{finish}
'''

_ENV = {"__name__": __name__, "cuda": cuda, "MAX_BLOCK": B.MAX_BLOCK, "_max2": _max2,
        "_min2": _min2}

_COMBINE = {"sum": ("{} + {}", " * scale"), "max": ("_max2({}, {})", ""),
            "min": ("_min2({}, {})", "")}
KERNELS = {
    (kind, template_name): access(
        B.make_kernel(kind + suffix, template, _ENV, combine_acc=f.format("acc", "v"),
                      combine=f.format("u", "v"), finish=finish),
        reads=["x"], writes=["out"])
    for kind, (f, finish) in _COMBINE.items()
    for template_name, template, suffix in (("rows", _REDUCE, ""),
                                            ("columns", _REDUCE_COLUMNS, "_columns"))
}

# n is split into chunks (two launches) when there are fewer outputs than this...
_FEW_OUTPUTS = {"rows": 4 if B.SIMULATOR else 512, "columns": 64 if B.SIMULATOR else 16384}
# ...of this many elements; the simulator gets short chunks so that its tests exercise
# the two-launch path
_CHUNK = {"rows": 64 if B.SIMULATOR else 4096, "columns": 16 if B.SIMULATOR else 256}


def _identity(kind: str, dtype: np.dtype) -> Any:
    if kind == "sum":
        return B.scalar_of(0, dtype)
    if dtype == B.BOOL:
        return np.bool_(kind == "min")
    if dtype.kind == "f":
        return B.scalar_of(-math.inf if kind == "max" else math.inf, dtype)
    info = np.iinfo(dtype)
    return B.scalar_of(info.min if kind == "max" else info.max, dtype)


def _fold(a: Array, dims: tuple[int, ...]) -> tuple[int, int] | None:
    """(size, stride) of `a`'s dimensions `dims` merged into one, or None."""
    shape = tuple(a.shape[d] for d in dims)
    strides = tuple(a.strides[d] for d in dims)
    s, st = B.collapse(shape, [strides])
    if len(s) > 1:
        return None
    return (s[0], st[0][0]) if s else (1, 0)


def _as_3d(x: Array, axis: int | None) -> tuple[Array, tuple[tuple[int, int], ...]]:
    """x as a (outer, n, inner) view, copying x first if its layout does not fold."""
    for _attempt in range(2):
        if axis is None:
            whole = _fold(x, tuple(range(x.ndim)))
            parts = None if whole is None else ((1, 0), whole, (1, 0))
        else:
            outer = _fold(x, tuple(range(axis)))
            inner = _fold(x, tuple(range(axis + 1, x.ndim)))
            parts = (None if outer is None or inner is None
                     else (outer, (int(x.shape[axis]), int(x.strides[axis])), inner))
        if parts is not None:
            return B.view(x, [p[0] for p in parts], [p[1] for p in parts]), parts
        x = copy(x)
    raise AssertionError("a contiguous copy always folds")


def reduce(op: str, kind: str, x: Any, axis: Any, keepdims: bool, out: Any,
           rule: Callable) -> Array:
    x = B.require_array(op, x)
    B.check_dtype(op, x.dtype)
    with np.errstate(all="ignore"):
        dtype = B.check_dtype(op, rule(np.ones(1, x.dtype)).dtype, B.SUPPORTED, "the result")
    if axis is not None:
        axis = B.normalize_axis(op, axis, x.ndim)
        if x.ndim == 0:
            axis = None
    if axis is None:
        out_shape = (1,) * x.ndim if keepdims else ()
    else:
        out_shape = tuple(1 if d == axis else n for d, n in enumerate(x.shape)
                          if keepdims or d != axis)
    x3, (_, (n, _), _) = _as_3d(x, axis)
    B.combines(op, x, n)
    if n == 0 and kind != "sum":
        raise B.fail(op, f"zero-size reduction of an array of shape {x.shape}: {kind} has no "
                     "identity", "reduce a non-empty axis")
    result, _ = B.out_array(op, out, out_shape, dtype)
    if result.size == 0:
        return B.launched_nothing(result)
    target, out3 = _result_3d(result, axis, keepdims, dtype)
    _reduce_3d(op, kind, x3, out3, dtype)
    if target is not result:
        copy(target, out=result)
    return result


def _result_3d(result: Array, axis: int | None, keepdims: bool, dtype: np.dtype
               ) -> tuple[Array, Array]:
    """(target, target as an (outer, 1, inner) view): target is `result`, or a new array
    of `dtype` when a user's out does not fold (the caller copies it into `result`)."""
    res_dims = tuple(range(result.ndim))
    split = (res_dims[:axis], res_dims[axis + 1:] if keepdims else res_dims[axis:]) \
        if axis is not None else ((), ())
    target = result
    folded = (_fold(result, split[0]), _fold(result, split[1]))
    if folded[0] is None or folded[1] is None:
        target = empty(tuple(result.shape), dtype)
        folded = (_fold(target, split[0]), _fold(target, split[1]))
    outer, inner = folded
    assert outer is not None and inner is not None  # a new array always folds
    (mo, so), (ko, sk) = outer, inner
    return target, B.view(target, (mo, 1, ko), (so, 0, sk))


def _reduce_3d(op: str, kind: str, x3: Array, out3: Array, dtype: np.dtype) -> None:
    """out3 (m, 1, k) = the reduction of x3 (m, n, k) along n: one launch, or two (chunks
    into partials, then the partials) when there are few outputs of a long axis."""
    m, n, k = x3.shape
    init = _identity(kind, dtype)
    one = B.scalar_of(1, dtype)
    scale = B.scalar_of(1.0 / n if n else math.nan, dtype) if op == "mean" else one
    how = "rows" if k == 1 else "columns"
    kernel = KERNELS[kind, how]
    parts = -(-n // _CHUNK[how]) if m * k < _FEW_OUTPUTS[how] else 1
    parts = builtins.min(parts, 65535)
    if parts > 1:
        # the first launch reads all of x3 and writes only partials; the second reads only
        # them: an out that overlaps x3 is written after x3 is read
        chunk = -(-n // parts)
        partial = empty((m, parts, k), dtype)
        _launch(kernel, how, m * k, chunk, parts)(x3, partial, chunk, one, init)
        x3, n = partial, parts
    elif B.must_copy(x3, out3):
        # one launch would read x3 while writing out3 (a block of one output reads what
        # another has written): NumPy's answer needs the input as it was. Exactly in
        # place (n == 1, out3 the same elements) reads each element before writing it.
        x3 = copy(x3)
    _launch(kernel, how, m * k, n, 1)(x3, out3, builtins.max(n, 1), scale, init)


def _launch(kernel: Any, how: str, jobs: int, n: int, parts: int) -> Any:
    if how == "rows":
        return kernel[(B.grid_for(jobs), parts), B.block_for(n)]
    grid, block = B.launch_1d(jobs)
    return kernel[(grid, parts), block]


def sum(x: Any, axis: Any = None, *, keepdims: bool = False, out: Any = None) -> Array:
    """Sum over all elements (axis=None) or one axis; ints and bools sum to int64."""
    return reduce("sum", "sum", x, axis, keepdims, out, np.sum)


def mean(x: Any, axis: Any = None, *, keepdims: bool = False, out: Any = None) -> Array:
    """Mean over all elements or one axis; ints give float64."""
    return reduce("mean", "sum", x, axis, keepdims, out, np.mean)


def max(x: Any, axis: Any = None, *, keepdims: bool = False, out: Any = None) -> Array:
    """Maximum over all elements or one axis (NaN propagates)."""
    return reduce("max", "max", x, axis, keepdims, out, np.max)


def min(x: Any, axis: Any = None, *, keepdims: bool = False, out: Any = None) -> Array:
    """Minimum over all elements or one axis (NaN propagates)."""
    return reduce("min", "min", x, axis, keepdims, out, np.min)


amax, amin = max, min
