"""A row-major float32 GEMM as the one cublasGemmEx call that computes it, and that call run by
cuBLAS's definition with numpy.

cuBLAS reads matrices column-major, and a row-major [r, c] matrix read so is its transpose:
C = A @ B is computed as C^T = B^T @ A^T, with no copy. The call is plain data, so the host
harness (tests/cuda_host) runs the very call the GPU gets (`run_gemm_ex`): every GEMM of the
models it runs checks the mapping, the leading dimensions and the compute type."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

# cuBLAS's enum values (cublas_api.h, library_types.h)
OP_N, OP_T = 0, 1
R_32F = 0                   # cudaDataType CUDA_R_32F: A, B and C are float32
COMPUTE_32F = 68            # float32 products and sums
COMPUTE_32F_FAST_16F = 74   # inputs may be rounded to float16 (tensor cores); sums stay float32
GEMM_DEFAULT = -1           # cuBLAS picks the algorithm (tensor cores where the compute type allows)


@dataclass(frozen=True)
class GemmEx:
    """cublasGemmEx's arguments but the handle, scalars and types: C = op(A) @ op(B), op(A)
    [m, k], op(B) [k, n], C [m, n], each column-major with its leading dimension."""

    transa: int
    transb: int
    m: int
    n: int
    k: int
    a: Any
    lda: int
    b: Any
    ldb: int
    c: Any
    ldc: int
    compute: int


def row_major_gemm(a: Any, b: Any, c: Any, m: int, n: int, k: int, b_transposed: bool = False,
                   relaxed: bool = False) -> GemmEx:
    """The call storing row-major C[m, n] = A[m, k] @ B, B stored as [k, n] (or as [n, k] with
    b_transposed); `relaxed` (the model's relaxComputationFloat32toFloat16) lets cuBLAS multiply
    float16 inputs, which the spec allows then and only then."""
    compute = COMPUTE_32F_FAST_16F if relaxed else COMPUTE_32F
    if b_transposed:   # B stored [n, k], read column-major, is B itself [k, n]: op T gives B^T
        return GemmEx(OP_T, OP_N, n, m, k, b, k, a, k, c, n, compute)
    return GemmEx(OP_N, OP_N, n, m, k, b, n, a, k, c, n, compute)


def check_bounds(call: GemmEx, nbytes: Callable[[Any], int]) -> None:
    """ValueError where cuBLAS would refuse the call (an operation or leading dimension it does
    not take) or read or write past a buffer's end (`nbytes(buffer)` bytes): a plan's mistake
    stops here instead of reading what is past it."""
    for name, op in (("A", call.transa), ("B", call.transb)):
        if op not in (OP_N, OP_T):
            raise ValueError(f"{name}: operation {op} is neither OP_N nor OP_T")
    a_rows, a_cols = (call.m, call.k) if call.transa == OP_N else (call.k, call.m)
    b_rows, b_cols = (call.k, call.n) if call.transb == OP_N else (call.n, call.k)
    for name, buf, rows, cols, ld in (("A", call.a, a_rows, a_cols, call.lda), ("B", call.b, b_rows, b_cols, call.ldb),
                                      ("C", call.c, call.m, call.n, call.ldc)):
        if ld < max(1, rows):
            raise ValueError(f"{name}: leading dimension {ld} is below its {rows} rows")
        if rows and cols and ((cols - 1) * ld + rows) * 4 > nbytes(buf):
            raise ValueError(f"{name}: [{rows}, {cols}] with leading dimension {ld} ends past its buffer of "
                             f"{nbytes(buf)} bytes")


def run_gemm_ex(call: GemmEx, floats: Callable[[Any], np.ndarray]) -> None:
    """The call as cuBLAS defines it, on the float32 elements `floats(buffer)` gives; with
    COMPUTE_32F_FAST_16F the inputs rounded to float16, the coarsest that compute type allows.
    What check_bounds refuses raises ValueError."""
    check_bounds(call, lambda buf: floats(buf).nbytes)
    a = _operand(floats(call.a), call.transa, call.m, call.k, call.lda)
    b = _operand(floats(call.b), call.transb, call.k, call.n, call.ldb)
    if call.compute == COMPUTE_32F_FAST_16F:
        with np.errstate(over="ignore"):
            a, b = (x.astype(np.float16).astype(np.float32) for x in (a, b))
    elif call.compute != COMPUTE_32F:
        raise ValueError(f"compute type {call.compute} is neither COMPUTE_32F nor COMPUTE_32F_FAST_16F")
    c = _column_major(floats(call.c), call.m, call.n, call.ldc, writeable=True)
    c[...] = np.matmul(a, b, dtype=np.float32)


def _operand(flat: np.ndarray, op: int, rows: int, cols: int, ld: int) -> np.ndarray:
    """op(X) [rows, cols] of a column-major X: X itself with OP_N, X [cols, rows] transposed with OP_T."""
    return _column_major(flat, rows, cols, ld) if op == OP_N else _column_major(flat, cols, rows, ld).T


def _column_major(flat: np.ndarray, rows: int, cols: int, ld: int, writeable: bool = False) -> np.ndarray:
    """A view of [rows, cols] stored column by column, `ld` elements apart (check_bounds checked it fits)."""
    item = flat.itemsize
    return np.lib.stride_tricks.as_strided(flat, (rows, cols), (item, ld * item), writeable=writeable)
