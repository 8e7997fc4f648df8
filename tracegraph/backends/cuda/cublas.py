"""Matrix products through cuBLAS (nvmath-python's bindings), as a library call captured
into the graph: tracegraph.ops.matmul records one where cuBLAS is there.

Row-major C = A @ B is column-major C^T = B^T A^T, so cuBLAS gets B first; an operand
stored column-major (a transposed view) is passed with its transpose flag instead of
being copied. One handle per device; each call sets its stream and its own workspace (a
graph buffer, so two products on parallel branches never share one).
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

WORKSPACE_BYTES = 4 << 20  # cuBLAS's recommendation for Hopper
_ONE: dict[np.dtype, np.ndarray] = {np.dtype(t): np.ones(1, t) for t in (np.float32, np.float64)}
_ZERO: dict[np.dtype, np.ndarray] = {t: np.zeros(1, t) for t in _ONE}


@functools.cache
def available() -> bool:
    """nvmath-python's cuBLAS bindings import and a GPU answers."""
    from ... import _numba
    if _numba.SIMULATOR:
        return False
    try:
        from nvmath.bindings import cublas  # noqa: F401
    except Exception:
        return False
    from .. import gpu_usable
    return bool(gpu_usable())


@dataclass(frozen=True)
class Operand:
    """How cuBLAS reads one operand: transposed or not, and its leading dimension."""
    trans: int  # 0: CUBLAS_OP_N, 1: CUBLAS_OP_T
    ld: int


def operand(shape: tuple[int, int], strides: tuple[int, int], itemsize: int) -> Operand | None:
    """Row-major operand X (rows, cols) as cuBLAS's column-major X^T: as it is when its rows
    are contiguous, transposed when its columns are; None when neither (a copy is needed)."""
    rows, cols = shape
    s0, s1 = strides
    if s0 % itemsize or s1 % itemsize or s0 < 0 or s1 < 0:
        return None
    if s1 == itemsize or cols == 1:
        ld = s0 // itemsize if rows > 1 else cols
        return Operand(0, ld) if ld >= max(cols, 1) else None
    if s0 == itemsize or rows == 1:
        ld = s1 // itemsize if cols > 1 else rows
        return Operand(1, ld) if ld >= max(rows, 1) else None
    return None


def gemm(m: int, n: int, k: int, a: Operand, b: Operand, ldc: int,
         dtype: np.dtype) -> Callable[..., None]:
    """fn(stream, A, B, C, workspace) enqueueing C = A @ B (row-major, m x k times k x n)."""
    dtype = np.dtype(dtype)
    one, zero = _ONE[dtype], _ZERO[dtype]

    def cublas_gemm(stream: Any, A: Any, B: Any, C: Any, workspace: Any) -> None:
        from nvmath.bindings import cublas
        handle = _handle()
        cublas.set_stream(handle, int(stream.handle))
        cublas.set_workspace(handle, _ptr(workspace), WORKSPACE_BYTES)
        run = cublas.sgemm if dtype == np.float32 else cublas.dgemm
        run(handle, b.trans, a.trans, n, m, k, one.ctypes.data, _ptr(B), b.ld, _ptr(A), a.ld,
            zero.ctypes.data, _ptr(C), ldc)
    return cublas_gemm


def _ptr(array: Any) -> int:
    return int(array.__cuda_array_interface__["data"][0])


_handles: dict[int, Any] = {}


def _handle() -> Any:
    from cuda.bindings import driver
    from nvmath.bindings import cublas
    _, ctx = driver.cuCtxGetCurrent()
    key = int(ctx) if ctx is not None else 0
    if key not in _handles:
        _handles[key] = cublas.create()
    return _handles[key]
