"""Elementwise ops with NumPy broadcasting and scalar operands.

One kernel per op (_elementwise_kernels.py). Every operand reaches the kernel as a 4-D
strided view of the output's shape (stride 0 where it is broadcast), so the same kernel
serves every shape, broadcast and layout; a Python/NumPy scalar operand is passed by
value, with a flag bit telling the kernel not to read that operand's array slot (which
holds another operand as a placeholder).

Result dtypes follow NumPy (Python scalars are weak: float32 array + 2.0 is float32).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..traced import Array
from . import _base as B
from ._elementwise_kernels import BINARY, KERNELS, UNARY

# ---------------------------------------------------------------------------
# the driver

def _result_dtype(op: str, rule: Callable, operands: list, accepted: tuple) -> np.dtype:
    samples = []
    for k, x in enumerate(operands):
        if isinstance(x, Array):
            B.check_dtype(op, x.dtype, accepted, _operand_name(op, k, len(operands)))
            samples.append(np.ones(1, x.dtype))
        else:
            samples.append(x)
    try:
        with np.errstate(all="ignore"):
            dtype = np.asarray(rule(*samples)).dtype
    except (TypeError, ValueError, OverflowError) as exc:
        kinds = ", ".join(str(x.dtype) if isinstance(x, Array) else repr(x) for x in operands)
        raise B.fail(op, f"NumPy refuses these operands ({kinds}): {exc}",
                     "convert the operands first (tg.ops.astype) or use another op") from None
    return B.check_dtype(op, dtype, B.SUPPORTED, "the result")


def _operand_name(op: str, k: int, n: int) -> str:
    if op == "where":
        return ("condition", "x", "y")[k]
    if op == "clip":
        return ("x", "a_min", "a_max")[k]
    return "x" if n == 1 else ("x1", "x2")[k]


def elementwise(op: str, operands: list, out: Any, dtype: np.dtype,
                scalar_dtype: np.dtype | None = None) -> Array:
    """Launch op's kernel over the broadcast shape of `operands` into `out` (or a new array).

    Scalars are passed as `scalar_dtype` (default: the result dtype).
    """
    kernel = KERNELS[op]
    arrays = [x for x in operands if isinstance(x, Array)]
    if not arrays:
        raise B.fail(op, "needs at least one traced array operand (all were scalars)",
                     "compute scalar expressions in Python, outside the ops")
    shape = B.broadcast_shapes(op, [tuple(x.shape) for x in arrays])
    result, given = B.out_array(op, out, shape, dtype)
    if given:  # NumPy semantics: an input that overlaps out other than exactly is copied
        operands = [copy(x) if B.must_copy(x, result) else x for x in operands]
        arrays = [x for x in operands if isinstance(x, Array)]
    if result.size == 0:
        return B.launched_nothing(result)
    strides = [tuple(result.strides)] + [B.broadcast_strides(x, shape) for x in arrays]
    cshape, cstrides = B.collapse(shape, strides)
    if len(cshape) > B.RANK:
        raise B.fail(op, f"the operands' layouts leave {len(cshape)} dimensions that do not "
                     f"merge; elementwise kernels take at most {B.RANK}",
                     "make an operand contiguous first with tg.ops.copy")
    out4 = B.as_rank(result, cshape, cstrides[0])
    views = [B.as_rank(x, cshape, s) for x, s in zip(arrays, cstrides[1:])]
    grid, block = B.launch_1d(result.size)
    if len(operands) == 1:
        kernel[grid, block](views[0], out4)
        return result
    scalar_dtype = np.dtype(scalar_dtype or dtype)
    args: list[Any] = []
    flags = 0
    it = iter(views)
    for k, x in enumerate(operands):
        if isinstance(x, Array):
            args += [next(it), B.scalar_of(0, x.dtype)]
        else:
            args += [views[0], _cast_scalar(op, x, scalar_dtype)]
            flags |= 1 << k
    kernel[grid, block](*args, flags, out4)
    return result


def _cast_scalar(op: str, x: Any, dtype: np.dtype) -> Any:
    try:
        with np.errstate(all="raise"):
            return B.scalar_of(x, dtype)
    except (OverflowError, FloatingPointError, ValueError):
        raise B.fail(op, f"the scalar {x!r} does not fit the operation's dtype {dtype}",
                     "use a scalar in range, or convert the array (tg.ops.astype)") from None


def _unary(op: str, x: Any, out: Any) -> Array:
    _, rule, accepted = UNARY[op]
    x = B.require_array(op, x)
    return elementwise(op, [x], out, _result_dtype(op, rule, [x], accepted))


def _binary(op: str, a: Any, b: Any, out: Any) -> Array:
    _, rule, accepted = BINARY[op]
    a = B.require_operand(op, a, "x1")
    b = B.require_operand(op, b, "x2")
    dtype = _result_dtype(op, rule, [a, b], accepted)
    return elementwise(op, [a, b], out, dtype, _value_dtype([a, b]))


def _value_dtype(values: list) -> np.dtype:
    """The dtype NumPy computes in for these operands (scalars are weak)."""
    return np.result_type(*[x.dtype if isinstance(x, Array) else x for x in values])


# ---------------------------------------------------------------------------
# public ops

def negative(x: Any, *, out: Any = None) -> Array:
    """-x."""
    return _unary("negative", x, out)


def abs(x: Any, *, out: Any = None) -> Array:
    """|x|."""
    return _unary("abs", x, out)


absolute = abs


def exp(x: Any, *, out: Any = None) -> Array:
    """e**x (integers give float64)."""
    return _unary("exp", x, out)


def log(x: Any, *, out: Any = None) -> Array:
    """Natural log (-inf at 0, NaN below)."""
    return _unary("log", x, out)


def sqrt(x: Any, *, out: Any = None) -> Array:
    """Square root (NaN below 0)."""
    return _unary("sqrt", x, out)


def tanh(x: Any, *, out: Any = None) -> Array:
    return _unary("tanh", x, out)


def sigmoid(x: Any, *, out: Any = None) -> Array:
    """1 / (1 + exp(-x)), computed without overflow."""
    return _unary("sigmoid", x, out)


def relu(x: Any, *, out: Any = None) -> Array:
    """max(x, 0), keeping x's dtype."""
    return _unary("relu", x, out)


def gelu(x: Any, *, out: Any = None) -> Array:
    """0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))): GELU's tanh approximation, as
    GPT-2 and cuBLASLt's GELU epilogue compute it (integers give float64)."""
    return _unary("gelu", x, out)


def copy(x: Any, *, out: Any = None) -> Array:
    """A contiguous copy of x (any view), or x written into `out` (any view, any dtype
    of the same kind)."""
    x = B.require_array("copy", x)
    if out is None:
        return elementwise("copy", [x], None, x.dtype)
    out = B.require_array("copy", out, "out")
    if tuple(out.shape) != tuple(x.shape):
        x = B.broadcast_to(x, tuple(out.shape)) if _broadcastable(x, out) else x
    return elementwise("copy", [x], out, x.dtype)


def _broadcastable(x: Array, out: Array) -> bool:
    try:
        return np.broadcast_shapes(tuple(x.shape), tuple(out.shape)) == tuple(out.shape)
    except ValueError:
        return False


def astype(x: Any, dtype: Any, *, out: Any = None) -> Array:
    """x converted to `dtype` (float to int truncates toward zero, like NumPy)."""
    x = B.require_array("astype", x)
    dtype = B.check_dtype("astype", np.dtype(dtype), B.SUPPORTED, "the target dtype")
    if out is not None:
        out = B.require_array("astype", out, "out")
        if out.dtype != dtype:
            raise B.fail("astype", f"out has dtype {out.dtype}, not {dtype}",
                         f"pass an out array of dtype {dtype}")
    return elementwise("copy", [x], out, dtype)


def add(x1: Any, x2: Any, *, out: Any = None) -> Array:
    return _binary("add", x1, x2, out)


def subtract(x1: Any, x2: Any, *, out: Any = None) -> Array:
    return _binary("subtract", x1, x2, out)


def multiply(x1: Any, x2: Any, *, out: Any = None) -> Array:
    return _binary("multiply", x1, x2, out)


def divide(x1: Any, x2: Any, *, out: Any = None) -> Array:
    """True division (integers give float64)."""
    return _binary("divide", x1, x2, out)


def maximum(x1: Any, x2: Any, *, out: Any = None) -> Array:
    """Elementwise max; NaN propagates (NumPy's maximum)."""
    return _binary("maximum", x1, x2, out)


def minimum(x1: Any, x2: Any, *, out: Any = None) -> Array:
    """Elementwise min; NaN propagates (NumPy's minimum)."""
    return _binary("minimum", x1, x2, out)


def less(x1: Any, x2: Any, *, out: Any = None) -> Array:
    return _binary("less", x1, x2, out)


def less_equal(x1: Any, x2: Any, *, out: Any = None) -> Array:
    return _binary("less_equal", x1, x2, out)


def greater(x1: Any, x2: Any, *, out: Any = None) -> Array:
    return _binary("greater", x1, x2, out)


def greater_equal(x1: Any, x2: Any, *, out: Any = None) -> Array:
    return _binary("greater_equal", x1, x2, out)


def equal(x1: Any, x2: Any, *, out: Any = None) -> Array:
    return _binary("equal", x1, x2, out)


def not_equal(x1: Any, x2: Any, *, out: Any = None) -> Array:
    return _binary("not_equal", x1, x2, out)


def where(condition: Any, x: Any, y: Any, *, out: Any = None) -> Array:
    """x where condition is true, else y (each an array or a scalar; broadcast)."""
    operands = [B.require_operand("where", v, n)
                for v, n in ((condition, "condition"), (x, "x"), (y, "y"))]
    dtype = _result_dtype("where", np.where, operands, B.SUPPORTED)
    return elementwise("where", operands, out, dtype, _value_dtype(operands[1:]))


def clip(x: Any, a_min: Any, a_max: Any, *, out: Any = None) -> Array:
    """minimum(maximum(x, a_min), a_max); a_min or a_max may be None (not both)."""
    x = B.require_array("clip", x)
    if a_min is None and a_max is None:
        raise B.fail("clip", "a_min and a_max are both None",
                     "give at least one bound (use tg.ops.copy to just copy)")
    if a_min is None:
        return minimum(x, a_max, out=out)
    if a_max is None:
        return maximum(x, a_min, out=out)
    operands = [x, B.require_operand("clip", a_min, "a_min"),
                B.require_operand("clip", a_max, "a_max")]
    dtype = _result_dtype("clip", np.clip, operands, B.NUMERIC)
    return elementwise("clip", operands, out, dtype, _value_dtype(operands))
