"""Array operations as Numba kernels with declared accesses (see docs/ops.md).

Call them inside a `@tg.compile` function on traced arrays: each launches one or more
kernels (recorded like any user launch) and returns a new graph-owned array, or writes
the optional `out=`. `tg.Array` operators (+ - * / @, unary -, abs, < <= > >=) call them.

- elementwise (broadcasting, scalar operands): add subtract multiply divide maximum
  minimum less less_equal greater greater_equal equal not_equal negative abs exp log
  sqrt tanh sigmoid relu where clip copy astype
- reductions (all elements or one axis): sum mean max min
- linear algebra and nn: matmul linear softmax log_softmax layer_norm gelu
  decode_attention argmax
- layout and filling: transpose reshape broadcast_to fill full full_like ones_like
"""
from .. import traced as _traced
from .argmax import argmax
from .attention import decode_attention
from .elementwise import (
    abs,
    absolute,
    add,
    astype,
    clip,
    copy,
    divide,
    equal,
    exp,
    gelu,
    greater,
    greater_equal,
    less,
    less_equal,
    log,
    maximum,
    minimum,
    multiply,
    negative,
    not_equal,
    relu,
    sigmoid,
    sqrt,
    subtract,
    tanh,
    where,
)
from .linear import linear
from .matmul import matmul
from .nn import layer_norm, log_softmax, softmax
from .reduce import amax, amin, max, mean, min, sum
from .shape import broadcast_to, fill, full, full_like, ones_like, reshape, transpose

__all__ = [
    "abs", "absolute", "add", "amax", "amin", "argmax", "astype", "broadcast_to", "clip",
    "copy", "decode_attention", "divide", "equal", "exp", "fill", "full", "full_like",
    "gelu", "greater", "greater_equal",
    "layer_norm", "less", "less_equal", "linear", "log", "log_softmax", "matmul", "max", "maximum",
    "mean", "min", "minimum", "multiply", "negative", "not_equal", "ones_like", "relu",
    "reshape", "sigmoid", "softmax", "sqrt", "subtract", "sum", "tanh", "transpose", "where",
]

# the operators of tg.Array, and NumPy ufuncs on traced arrays, call these
_traced.install_operators({name: globals()[name] for name in __all__})
