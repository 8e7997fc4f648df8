"""Layout and filling: transpose, reshape, broadcast_to, fill, full, full_like.

`copy` and `astype` (elementwise) materialize any view. Views (slices, `.T`,
`broadcast_to`, `reshape` of a contiguous array) cost nothing: they become kernel
arguments with other shapes and strides.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numba import cuda

from ..trace import access, empty
from ..traced import Array, view_of
from . import _base as B
from ._elementwise_kernels import _unravel
from .elementwise import copy

_FILL = '''
def {name}(out, value):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        i0, i1, i2, i3 = _unravel(i, out.shape)
        out[i0, i1, i2, i3] = value
'''

fill_kernel = access(B.make_kernel("fill", _FILL, {"__name__": __name__, "cuda": cuda,
                                                   "_unravel": _unravel}),
                     writes=["out"])

broadcast_to = B.broadcast_to


def transpose(x: Any, axes: Sequence[int] | None = None, *, out: Any = None) -> Array:
    """x with its axes permuted (reversed by default), copied into a contiguous array
    (or `out`); `x.T` and `x.transpose()` call it, as Numba's device arrays copy."""
    x = B.require_array("transpose", x)
    if axes is None:
        axes = tuple(reversed(range(x.ndim)))
    axes = tuple(int(a) % max(x.ndim, 1) if isinstance(a, (int, np.integer)) else a
                 for a in axes)
    if sorted(axes) != list(range(x.ndim)):
        raise B.fail("transpose", f"axes {tuple(axes)} are not a permutation of the "
                     f"{x.ndim} axes of an array of shape {tuple(x.shape)}",
                     f"pass each of 0..{x.ndim - 1} once")
    permuted = B.view(x, [x.shape[a] for a in axes], [x.strides[a] for a in axes])
    return copy(permuted, out=out)


def reshape(x: Any, shape: Any) -> Array:
    """x with a new shape (one entry may be -1): a view when x is contiguous, else a
    contiguous copy first."""
    x = B.require_array("reshape", x)
    if not view_of(x).is_c_contiguous():
        x = copy(x)
    return x.reshape(shape)


def fill(a: Any, value: Any) -> Array:
    """Set every element of `a` (any view) to `value`, in place; returns `a`."""
    a = B.require_array("fill", a, "a")
    B.check_dtype("fill", a.dtype, B.SUPPORTED, "a")
    if not B.is_scalar(value):
        raise B.fail("fill", f"value must be a scalar, got {type(value).__name__}",
                     "use tg.ops.copy(src, out=a) to copy an array into a")
    if a.size == 0:
        return B.launched_nothing(a)
    shape, (strides,) = B.collapse(tuple(a.shape), [tuple(a.strides)])
    if len(shape) > B.RANK:
        raise B.fail("fill", f"the view's layout leaves {len(shape)} dimensions that do not "
                     f"merge; fill takes at most {B.RANK}", "fill a contiguous array")
    grid, block = B.launch_1d(a.size)
    try:
        scalar = B.scalar_of(value, a.dtype)
    except (OverflowError, ValueError):
        raise B.fail("fill", f"value {value!r} does not fit dtype {a.dtype}",
                     "pass a value in range") from None
    fill_kernel[grid, block](B.as_rank(a, shape, strides), scalar)
    return a


def full(shape: Any, value: Any, dtype: Any = None) -> Array:
    """A new array of `shape` with every element `value` (dtype from value by default:
    Python float -> float64, int -> int64, bool -> bool)."""
    if not B.is_scalar(value):
        raise B.fail("full", f"value must be a scalar, got {type(value).__name__}",
                     "pass a Python or NumPy scalar")
    dtype = np.dtype(dtype) if dtype is not None else np.result_type(value)
    B.check_dtype("full", dtype, B.SUPPORTED, "dtype")
    return fill(empty(shape, dtype), value)


def full_like(x: Any, value: Any, dtype: Any = None) -> Array:
    x = B.require_array("full_like", x)
    return full(tuple(x.shape), value, dtype if dtype is not None else x.dtype)


def ones_like(x: Any, dtype: Any = None) -> Array:
    return full_like(x, 1, dtype)
