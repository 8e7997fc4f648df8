"""Dense layers: activation(x @ w + bias + residual) as one node where it can be.

Where cuBLAS is there (tracegraph.ops.matmul's engine), a float32 product is one cuBLASLt
node. Elsewhere (no cuBLAS: the simulator; other dtypes; TRACEGRAPH_MATMUL=kernel) a
product of at most four rows (a decode step's) is one GEMV kernel (gemv.py), with the
bias, residual and activation applied as it writes. On an H100 cuBLASLt's GEMV ran a
decode step's products faster than this kernel (docs/ops.md), so it goes first.

cuBLASLt computes D = epilogue(A @ B + beta * C): the residual is its C (beta = 1), the
bias and the activation (ReLU, or GELU's tanh approximation) its epilogue, so a
transformer's `x + gelu(h @ w1 + b1) @ w2 + b2` is two nodes. Elsewhere (no cuBLAS, other
dtypes or layouts) the same result is matmul, then add and the activation in place.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from .. import config
from ..trace import empty, library
from ..traced import Array
from . import _base as B
from .elementwise import add, copy, gelu, relu
from .gemv import gemv_linear
from .matmul import _cublas_engine, _cublas_operands, product

ACTIVATIONS = (None, "relu", "gelu")


def linear(x: Any, w: Any, bias: Any = None, *, activation: str | None = None,
           residual: Any = None, transpose_w: bool = False, out: Any = None) -> Array:
    """activation(x @ w + bias + residual) for a 2-D x (m, k), w (k, n) (NumPy's
    orientation; with transpose_w=True, w is (n, k), torch's orientation, and the product
    is x @ w.T without a copy: a tied embedding as the output layer), a 1-D bias (n,) or
    None, a residual (m, n) or None, and activation None, "relu" or "gelu" (the tanh
    approximation).

    One node where it can be: one cuBLASLt node where cuBLAS is there
    (tracegraph.ops.matmul's engine) and everything is float32; else a GEMV kernel for at
    most four rows of one float dtype (unless TRACEGRAPH_MATMUL=cublas); elsewhere matmul,
    then add and the activation in place on the result. GELU needs a floating-point result. `out`
    may be the residual itself (x = x + h @ w + b, in place).
    """
    op = "linear"
    x = B.require_array(op, x, "x")
    w = B.require_array(op, w, "w")
    if activation not in ACTIVATIONS:
        raise B.fail(op, f"unknown activation {activation!r}",
                     "pass activation=None, 'relu' or 'gelu'")
    if x.ndim != 2 or w.ndim != 2:
        raise B.fail(op, f"x {tuple(x.shape)} and w {tuple(w.shape)} must both be 2-D",
                     "reshape leading batch dimensions into the rows of x")
    if transpose_w:  # a view: the op only reads w (x.T on a traced array is a copy)
        w = B.view(w, w.shape[::-1], w.strides[::-1])
    if x.shape[1] != w.shape[0]:  # matmul would say so too, naming matmul
        raise B.fail(op, f"x {tuple(x.shape)} and w {tuple(w.shape)} are not aligned",
                     "x.shape[1] must equal w.shape[0]")
    shape = (x.shape[0], w.shape[1])
    if bias is not None:
        bias = B.require_array(op, bias, "bias")
        if bias.ndim != 1 or bias.shape[0] != shape[1]:
            raise B.fail(op, f"bias {tuple(bias.shape)} is not a vector of the "
                         f"{shape[1]} columns of w", "pass a 1-D bias of w.shape[1] elements")
    if residual is not None:
        residual = B.require_array(op, residual, "residual")
        if tuple(residual.shape) != shape:
            raise B.fail(op, f"residual {tuple(residual.shape)} is not the {shape} of x @ w",
                         "pass a residual of the result's shape")
    extra = tuple(a.dtype for a in (bias, residual) if a is not None)
    dtype = np.result_type(x.dtype, w.dtype, *extra)
    if activation == "gelu" and dtype.kind != "f":
        raise B.fail(op, f"activation='gelu' on a result of dtype {dtype}: GELU's values "
                     "are not integers", "pass floating-point x and w")
    given = out is not None
    if given:
        out = B.require_array(op, out, "out")
        if tuple(out.shape) != shape:
            raise B.fail(op, f"out has shape {tuple(out.shape)}, not the {shape} of x @ w",
                         "pass out of that shape")
        B.out_array(op, out, shape, dtype)  # dtype, distinct elements
        if B.must_copy(bias, out, in_place=False):
            bias = copy(bias)
    B.combines(op, x, x.shape[1])
    result = _cublaslt_linear(x, w, bias, residual, activation, out)
    if result is None and config.matmul_engine() != "cublas":
        result = gemv_linear(x, w, bias, residual, activation, out)
    if result is not None:
        return result
    if given and residual is not None and B.overlaps(residual, out):
        residual = copy(residual)  # matmul writes out before the residual is added
    result = product(x, w, out, combines=False)  # (recorded above, as linear)
    for addend in (bias, residual):
        if addend is not None:
            # an addend of a wider dtype widens a new result, as NumPy's x @ w + b
            result = add(result, addend, out=result if given or result.dtype == dtype else None)
    if activation == "relu":
        relu(result, out=result)
    elif activation == "gelu":
        gelu(result, out=result)
    return result


def _cublaslt_linear(x: Array, w: Array, bias: Array | None, residual: Array | None,
                     activation: str | None, out: Array | None) -> Array | None:
    """The result of act(x @ w + bias + residual) as one cuBLASLt node, or None where the
    engine, dtypes or layouts do not allow it."""
    from ..backends.cuda import cublas
    if not _cublas_engine():
        return None
    arrays = [a for a in (x, w, bias, residual, out) if a is not None]
    if any(a.dtype != np.float32 for a in arrays):
        return None
    if bias is not None and bias.strides[0] != bias.itemsize:
        return None
    m, k = x.shape
    n = w.shape[1]
    if m * n == 0:
        return None
    result = out if out is not None else empty((m, n), np.float32)
    if B.overlaps(x, result) or B.overlaps(w, result):
        return None
    if residual is not None and B.overlaps(residual, result) and \
            not B.same_elements(residual, result):
        return None
    operands = _cublas_operands(x, w, result)
    if operands is None:
        return None
    residual_ld = None
    if residual is not None:
        r = cublas.operand(tuple(residual.shape), tuple(residual.strides), 4)
        if r is None or r.trans:
            return None
        residual_ld = r.ld
    ox, ow, oc = operands
    workspace = empty((cublas.WORKSPACE_BYTES,), np.uint8)
    fn = cublas.gemm_epilogue(m, n, k, ox, ow, oc.ld, np.dtype(np.float32), bias is not None,
                              activation, residual_ld)
    extras = tuple(a for a in (bias, residual) if a is not None)
    reads = [x, w, *extras]

    def sim(*a: np.ndarray) -> None:
        r = np.matmul(a[0], a[1])
        for e in a[3:-1]:
            r += e
        if activation == "relu":
            r = np.maximum(r, 0)
        elif activation == "gelu":
            r = 0.5 * r * (1 + np.tanh(0.7978845608028654 * (r + 0.044715 * r * r * r)))
        a[2][...] = r
    library(fn, x, w, result, *extras, workspace, reads=reads, writes=[result, workspace],
            sim=sim, name="cublaslt_linear")
    return result
