"""The elementwise kernels: the device functions they call, their three templates
(unary, binary, ternary) and one kernel per op, made once at import. elementwise.py
launches them.

Every operand reaches a kernel as a 4-D strided view of the output's shape (stride 0
where it is broadcast); a scalar operand is passed by value, with a flag bit telling the
kernel not to read that operand's array slot.
"""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
from numba import cuda

from ..trace import access
from . import _base as B

_INF = math.inf
_NAN = math.nan


# ---------------------------------------------------------------------------
# device functions the kernels call (module globals, so the simulator can swap them)

@cuda.jit(device=True)
def _unravel(i, shape):
    """Flat index -> 4-D index over `shape` (fast path when only the last dim is > 1)."""
    if shape[0] == 1 and shape[1] == 1 and shape[2] == 1:
        return 0, 0, 0, i
    i3 = i % shape[3]
    i = i // shape[3]
    i2 = i % shape[2]
    i = i // shape[2]
    return i // shape[1], i % shape[1], i2, i3


@cuda.jit(device=True)
def _max2(x, y):
    """NumPy's maximum: NaN wins."""
    return x if (x > y or x != x) else y


@cuda.jit(device=True)
def _min2(x, y):
    """NumPy's minimum: NaN wins."""
    return x if (x < y or x != x) else y


@cuda.jit(device=True)
def _exp(v):
    if v > 709.0:  # the simulator's math.exp raises where the GPU returns inf
        return _INF
    return math.exp(v)


@cuda.jit(device=True)
def _log(v):
    if v > 0:
        return math.log(v)
    if v == 0:
        return -_INF
    return _NAN


@cuda.jit(device=True)
def _sqrt(v):
    if v >= 0:
        return math.sqrt(v)
    return _NAN


@cuda.jit(device=True)
def _sigmoid(v):
    if v >= 0:
        return 1.0 / (1.0 + math.exp(-v))
    z = math.exp(v)
    return z / (1.0 + z)


@cuda.jit(device=True)
def _relu(v):
    # not max(v, 0): NaN must stay NaN, and the result keeps v's type
    return 0 if v < 0 else v


@cuda.jit(device=True)
def _gelu(v):
    """GELU, the tanh approximation (GPT-2's; cuBLASLt's GELU epilogue)."""
    return 0.5 * v * (1.0 + math.tanh(0.7978845608028654 * (v + 0.044715 * v * v * v)))


_ENV = {"__name__": __name__, "cuda": cuda, "math": math, "_unravel": _unravel,
        "_max2": _max2, "_min2": _min2, "_exp": _exp, "_log": _log, "_sqrt": _sqrt,
        "_sigmoid": _sigmoid, "_relu": _relu, "_gelu": _gelu}

# ---------------------------------------------------------------------------
# templates: grid-stride loops over the output's elements

_UNARY = '''
def {name}(x, out):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        i0, i1, i2, i3 = _unravel(i, out.shape)
        v = x[i0, i1, i2, i3]
        out[i0, i1, i2, i3] = {expr}
'''

_BINARY = '''
def {name}(a, sa, b, sb, flags, out):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        i0, i1, i2, i3 = _unravel(i, out.shape)
        x = sa if flags & 1 else a[i0, i1, i2, i3]
        y = sb if flags & 2 else b[i0, i1, i2, i3]
        out[i0, i1, i2, i3] = {expr}
'''

_TERNARY = '''
def {name}(a, sa, b, sb, c, sc, flags, out):
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        i0, i1, i2, i3 = _unravel(i, out.shape)
        x = sa if flags & 1 else a[i0, i1, i2, i3]
        y = sb if flags & 2 else b[i0, i1, i2, i3]
        z = sc if flags & 4 else c[i0, i1, i2, i3]
        out[i0, i1, i2, i3] = {expr}
'''

# name: (expression, NumPy function giving the result dtype, accepted input dtypes)
UNARY: dict[str, tuple[str, Callable, tuple]] = {
    "negative": ("-v", np.negative, B.NUMERIC),
    "abs": ("abs(v)", np.absolute, B.NUMERIC),
    "exp": ("_exp(v)", np.exp, B.NUMERIC),
    "log": ("_log(v)", np.log, B.NUMERIC),
    "sqrt": ("_sqrt(v)", np.sqrt, B.NUMERIC),
    "tanh": ("math.tanh(v)", np.tanh, B.NUMERIC),
    "sigmoid": ("_sigmoid(v)", np.exp, B.NUMERIC),
    "relu": ("_relu(v)", lambda x: np.maximum(x, 0), B.NUMERIC),
    "gelu": ("_gelu(v)", np.tanh, B.NUMERIC),
    "copy": ("v", lambda x: x, B.SUPPORTED),
}
BINARY: dict[str, tuple[str, Callable, tuple]] = {
    "add": ("x + y", np.add, B.SUPPORTED),
    "subtract": ("x - y", np.subtract, B.NUMERIC),
    "multiply": ("x * y", np.multiply, B.SUPPORTED),
    "divide": ("x / y", np.divide, B.NUMERIC),
    "maximum": ("_max2(x, y)", np.maximum, B.SUPPORTED),
    "minimum": ("_min2(x, y)", np.minimum, B.SUPPORTED),
    "less": ("x < y", np.less, B.SUPPORTED),
    "less_equal": ("x <= y", np.less_equal, B.SUPPORTED),
    "greater": ("x > y", np.greater, B.SUPPORTED),
    "greater_equal": ("x >= y", np.greater_equal, B.SUPPORTED),
    "equal": ("x == y", np.equal, B.SUPPORTED),
    "not_equal": ("x != y", np.not_equal, B.SUPPORTED),
}
TERNARY: dict[str, tuple[str, Callable, tuple]] = {
    "where": ("y if x else z", np.where, B.SUPPORTED),
    "clip": ("_min2(_max2(x, y), z)", np.clip, B.NUMERIC),
}

KERNELS: dict[str, Any] = {}
# kernel -> (expression, operands): what fusion (ops/fused.py) reads of a launch
EXPRESSIONS: dict[Any, tuple[str, int]] = {}
for _table, _template, _params in ((UNARY, _UNARY, ["x"]), (BINARY, _BINARY, ["a", "b"]),
                                   (TERNARY, _TERNARY, ["a", "b", "c"])):
    for _name, (_expr, *_rest) in _table.items():
        KERNELS[_name] = access(B.make_kernel(_name, _template, _ENV, expr=_expr),
                                reads=_params, writes=["out"])
        EXPRESSIONS[KERNELS[_name]] = (_expr, len(_params))
