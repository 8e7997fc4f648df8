"""Array operations as Numba kernels with declared accesses (see docs/ops.md).

Call them inside a `@tg.compile` function on traced arrays: each launches one or more
kernels (recorded like any user launch) and returns a new graph-owned array, or writes
the optional `out=`. `tg.Array` operators (+ - * / @, unary -, abs, < <= > >=) call them.
"""
from .elementwise import (abs, absolute, add, astype, clip, copy, divide, equal, exp,
                          greater, greater_equal, less, less_equal, log, maximum, minimum,
                          multiply, negative, not_equal, relu, sigmoid, sqrt, subtract, tanh,
                          where)
from .matmul import matmul
from .nn import layer_norm, log_softmax, softmax
from .reduce import amax, amin, max, mean, min, sum
from .shape import broadcast_to, fill, full, full_like, ones_like, reshape, transpose

__all__ = [
    # elementwise
    "abs", "absolute", "add", "astype", "clip", "copy", "divide", "equal", "exp", "greater",
    "greater_equal", "less", "less_equal", "log", "maximum", "minimum", "multiply",
    "negative", "not_equal", "relu", "sigmoid", "sqrt", "subtract", "tanh", "where",
    # reductions
    "amax", "amin", "max", "mean", "min", "sum",
    # linear algebra and nn
    "layer_norm", "log_softmax", "matmul", "softmax",
    # layout
    "broadcast_to", "fill", "full", "full_like", "ones_like", "reshape", "transpose",
]
