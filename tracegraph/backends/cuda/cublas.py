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


_handles: dict[tuple[str, int], Any] = {}  # (library, CUDA context) -> its handle


def _handle(library: str = "cublas") -> Any:
    """cuBLAS's (or cuBLASLt's) handle for the current context, made once."""
    from cuda.bindings import driver
    _, ctx = driver.cuCtxGetCurrent()
    key = (library, int(ctx) if ctx is not None else 0)
    if key not in _handles:
        if library == "cublas":
            from nvmath.bindings import cublas
            _handles[key] = cublas.create()
        else:
            from nvmath.bindings import cublasLt
            _handles[key] = cublasLt.create()
    return _handles[key]


def gemm_epilogue(m: int, n: int, k: int, a: Operand, b: Operand, ldc: int, dtype: np.dtype,
                  bias: bool, activation: str | None,
                  residual_ld: int | None = None) -> Callable[..., None]:
    """fn(stream, A, B, D, [bias,] [residual,] workspace) enqueueing
    D = act(A @ B + bias + residual) (row-major) as one cuBLASLt matmul: the residual is
    cuBLASLt's C (beta = 1, its own leading dimension; it may be D itself), the bias (of
    length n) and the activation ("relu" or "gelu", the tanh approximation) its epilogue.

    In cuBLAS's column-major terms D^T (n x m) = B^T A^T: the bias runs along D^T's rows,
    which is what cuBLASLt's bias epilogue broadcasts. The descriptors and the algorithm
    are made on the first (uncaptured) call; each call sets only the bias pointer.
    """
    dtype = np.dtype(dtype)
    one = _ONE[dtype]
    beta = _ONE[dtype] if residual_ld is not None else _ZERO[dtype]
    state: dict[str, Any] = {}  # desc, layouts, found (the algorithm), keep (what they point at)

    def cublaslt_gemm(stream: Any, *arrays: Any) -> None:
        from nvmath.bindings import cublasLt as L
        if not state:
            state.update(_lt_plan(m, n, k, a, b, ldc, dtype, bias, activation, residual_ld))
        A_, B_, D_ = arrays[:3]
        workspace = arrays[-1]
        if bias:
            state["keep"][3][0] = _ptr(arrays[3])
            L.matmul_desc_set_attribute(state["desc"], L.MatmulDescAttribute.BIAS_POINTER,
                                        state["keep"][3].ctypes.data, 8)
        la, lb, lc, ld = state["layouts"]
        d = _ptr(D_)
        c = _ptr(arrays[4 if bias else 3]) if residual_ld is not None else d
        L.matmul(_handle("cublasLt"), state["desc"], one.ctypes.data, _ptr(B_), la, _ptr(A_), lb,
                 beta.ctypes.data, c, lc, d, ld, state["found"].ctypes.data, _ptr(workspace),
                 WORKSPACE_BYTES, int(stream.handle))
    return cublaslt_gemm


_EPILOGUES = {(False, None): "DEFAULT", (True, None): "BIAS", (False, "relu"): "RELU",
              (True, "relu"): "RELU_BIAS", (False, "gelu"): "GELU", (True, "gelu"): "GELU_BIAS"}


def _lt_plan(m: int, n: int, k: int, a: Operand, b: Operand, ldc: int, dtype: np.dtype,
             bias: bool, activation: str | None, residual_ld: int | None) -> dict[str, Any]:
    """cuBLASLt's descriptors, layouts and chosen algorithm for one product (the arrays
    their attributes point at are kept with them)."""
    from nvmath.bindings import cublas
    from nvmath.bindings import cublasLt as L
    real = 0 if dtype == np.float32 else 1  # CUDA_R_32F, CUDA_R_64F
    compute = cublas.ComputeType.COMPUTE_32F if dtype == np.float32 else \
        cublas.ComputeType.COMPUTE_64F
    desc = L.matmul_desc_create(int(compute), real)
    epilogue = L.Epilogue[_EPILOGUES[bool(bias), activation]]
    keep: list[np.ndarray] = [np.array([b.trans], np.int32), np.array([a.trans], np.int32),
                              np.array([int(epilogue)], np.uint32), np.zeros(1, np.int64),
                              np.array([WORKSPACE_BYTES], np.uint64)]
    A = L.MatmulDescAttribute
    L.matmul_desc_set_attribute(desc, A.TRANSA, keep[0].ctypes.data, 4)
    L.matmul_desc_set_attribute(desc, A.TRANSB, keep[1].ctypes.data, 4)
    L.matmul_desc_set_attribute(desc, A.EPILOGUE, keep[2].ctypes.data, 4)
    # cuBLASLt's A is B^T (n x k) and its B is A^T (k x m), each as stored
    la = L.matrix_layout_create(real, *((n, k) if b.trans == 0 else (k, n)), b.ld)
    lb = L.matrix_layout_create(real, *((k, m) if a.trans == 0 else (m, k)), a.ld)
    ld = L.matrix_layout_create(real, n, m, ldc)
    lc = ld if residual_ld is None else L.matrix_layout_create(real, n, m, residual_ld)
    pref = L.matmul_preference_create()
    L.matmul_preference_set_attribute(pref, L.MatmulPreferenceAttribute.MAX_WORKSPACE_BYTES,
                                      keep[4].ctypes.data, 8)
    found = np.zeros(1, L.matmul_heuristic_result_dtype)
    count = np.zeros(1, np.int32)
    L.matmul_algo_get_heuristic(_handle("cublasLt"), desc, la, lb, lc, ld, pref, 1,
                                found.ctypes.data, count.ctypes.data)
    if count[0] < 1:
        raise RuntimeError(f"cuBLASLt has no algorithm for a {m}x{k} @ {k}x{n} "
                           f"{dtype} product with epilogue {epilogue.name}")
    return {"desc": desc, "layouts": (la, lb, lc, ld), "pref": pref, "found": found,
            "keep": keep}

