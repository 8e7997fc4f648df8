"""Matrix products: 2-D, batched 3-D (with batch broadcasting) and 1-D vectors, any M, N, K.

One kernel: a block computes a TILE x TILE tile of the output, stepping over K one
tile at a time through shared memory (cuda.shared.array + cuda.syncthreads). Edge tiles
are padded with zeros, so M, N and K need not be multiples of TILE. Operands are 3-D
strided views (a 2-D operand is a batch of one with batch stride 0), so slices and
broadcast batches need no copy.
"""
from __future__ import annotations

from typing import Any

import numpy as np
from numba import cuda

from .. import config
from ..trace import access, empty, library
from ..traced import Array
from . import _base as B
from .elementwise import copy

# 16 x 16 = 256 threads on a GPU; the simulator runs a thread per Python thread, so it
# gets small tiles (which also exercise the edge handling more)
TILE = 4 if B.SIMULATOR else 16


@cuda.jit
def matmul_tiled(a, b, out, zero):
    """out[z] = a[z] @ b[z] for 3-D views a (Z, M, K), b (Z, K, N), out (Z, M, N)."""
    sa = cuda.shared.array((TILE, TILE), out.dtype)
    sb = cuda.shared.array((TILE, TILE), out.dtype)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    nz = out.shape[0]
    m = out.shape[1]
    n = out.shape[2]
    kk = a.shape[2]
    col = cuda.blockIdx.x * TILE + tx
    for z in range(cuda.blockIdx.z, nz, cuda.gridDim.z):
        for tile_m in range(cuda.blockIdx.y, (m + TILE - 1) // TILE, cuda.gridDim.y):
            row = tile_m * TILE + ty
            acc = zero
            for k0 in range(0, kk, TILE):
                if row < m and k0 + tx < kk:
                    sa[ty, tx] = a[z, row, k0 + tx]
                else:
                    sa[ty, tx] = zero
                if k0 + ty < kk and col < n:
                    sb[ty, tx] = b[z, k0 + ty, col]
                else:
                    sb[ty, tx] = zero
                cuda.syncthreads()
                for t in range(TILE):
                    acc += sa[ty, t] * sb[t, tx]
                cuda.syncthreads()
            if row < m and col < n:
                out[z, row, col] = acc


access(matmul_tiled, reads=["a", "b"], writes=["out"])


def _as3(x: Array, z: int, batch: bool, rows: bool, cols: bool) -> Array:
    """x as a (Z, rows, cols) view; missing dims get size 1, a broadcast batch stride 0."""
    shape, strides = list(x.shape), list(x.strides)
    if not cols:
        shape.append(1)
        strides.append(0)
    if not rows:
        shape.insert(len(shape) - 1, 1)
        strides.insert(len(strides) - 1, 0)
    if not batch:
        shape.insert(0, 1)
        strides.insert(0, 0)
    if shape[0] == 1 and z != 1:
        shape[0], strides[0] = z, 0
    return B.view(x, shape, strides)


def _cublas_matmul(a: Array, b: Array, out: Array) -> bool:
    """out = a @ b as a cuBLAS library node, when the engine and the layouts allow it."""
    from ..backends.cuda import cublas
    if not _cublas_engine():
        return False
    dtype = np.dtype(out.dtype)
    if dtype not in (np.float32, np.float64) or a.dtype != dtype or b.dtype != dtype:
        return False
    operands = _cublas_operands(a, b, out)
    if operands is None:
        return False
    oa, ob, oc = operands
    m, k = a.shape
    n = b.shape[1]
    workspace = empty((cublas.WORKSPACE_BYTES,), np.uint8)
    library(cublas.gemm(m, n, k, oa, ob, oc.ld, dtype), a, b, out, workspace,
            reads=[a, b], writes=[out, workspace], sim=_numpy_matmul, name="cublas_gemm")
    return True


def _cublas_engine() -> bool:
    """Products go to cuBLAS (TRACEGRAPH_MATMUL, docs/api.md)."""
    from ..backends.cuda import cublas
    engine = config.matmul_engine()
    return engine == "cublas" or (engine == "auto" and cublas.available())


def _cublas_operands(a: Array, b: Array, out: Array) -> tuple | None:
    """How cuBLAS reads a, b and writes out (row-major), or None where a copy is needed."""
    from ..backends.cuda import cublas
    item = np.dtype(out.dtype).itemsize
    oa, ob, oc = (cublas.operand(tuple(x.shape), tuple(x.strides), item) for x in (a, b, out))
    if oa is None or ob is None or oc is None or oc.trans:
        return None
    return oa, ob, oc


def _numpy_matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray,
                  workspace: np.ndarray) -> None:  # noqa: ARG001 - cuBLAS's own, unused here
    np.matmul(a, b, out=out)


def matmul(a: Any, b: Any, *, out: Any = None) -> Array:
    """a @ b with NumPy's matmul shapes, for operands of 1 to 3 dimensions."""
    return product(a, b, out, combines=True)


def product(a: Any, b: Any, out: Any, combines: bool) -> Array:
    """matmul's work; `combines`: record the elements it combines (dynamic_results.py),
    False where the op the user called (linear) recorded them itself."""
    a = B.require_array("matmul", a, "a")
    b = B.require_array("matmul", b, "b")
    for x, name in ((a, "a"), (b, "b")):
        B.check_dtype("matmul", x.dtype, B.NUMERIC, name)
        if not 1 <= x.ndim <= 3:
            raise B.fail("matmul", f"{name} has {x.ndim} dimensions {tuple(x.shape)}; "
                         "matmul takes 1-D vectors, 2-D matrices and 3-D batches",
                         "reshape leading batch dimensions into one")
    ka = a.shape[-1]
    kb = b.shape[0] if b.ndim == 1 else b.shape[-2]
    if ka != kb:
        raise B.fail("matmul", f"shapes {tuple(a.shape)} and {tuple(b.shape)} are not "
                     f"aligned: a has {ka} columns, b has {kb} rows",
                     "the last dimension of a must equal the second-to-last of b "
                     "(transpose with .T if needed)")
    za = a.shape[0] if a.ndim == 3 else 1
    zb = b.shape[0] if b.ndim == 3 else 1
    if za != zb and 1 not in (za, zb):
        raise B.fail("matmul", f"batch sizes {za} and {zb} of shapes {tuple(a.shape)} and "
                     f"{tuple(b.shape)} do not broadcast", "use equal batch sizes, or 1")
    if combines:
        B.combines("matmul", a, ka)
    z = max(za, zb)
    batch = a.ndim == 3 or b.ndim == 3
    m = a.shape[-2] if a.ndim >= 2 else 1
    n = b.shape[-1] if b.ndim >= 2 else 1
    shape = ((z,) if batch else ()) + ((m,) if a.ndim >= 2 else ()) + \
        ((n,) if b.ndim >= 2 else ())
    dtype = np.result_type(a.dtype, b.dtype)
    result, given = B.out_array("matmul", out, shape, dtype)
    if given:
        a = copy(a) if B.must_copy(a, result, in_place=False) else a
        b = copy(b) if B.must_copy(b, result, in_place=False) else b
        if result.dtype != dtype:  # the kernel sums in its output's dtype: dtype, then cast
            return copy(product(a, b, None, combines=False), out=result)
    if result.size == 0:
        return B.launched_nothing(result)
    if a.ndim == 2 and b.ndim == 2 and _cublas_matmul(a, b, result):
        return result
    a3 = _as3(a, z, a.ndim == 3, a.ndim >= 2, True)
    b3 = _as3(b, z, b.ndim == 3, True, b.ndim >= 2)
    out3 = _as3(result, z, batch, a.ndim >= 2, b.ndim >= 2)
    grid = (-(-n // TILE), min(-(-m // TILE), 65535), min(z, 65535))
    matmul_tiled[grid, (TILE, TILE)](a3, b3, out3, B.scalar_of(0, dtype))
    return result
