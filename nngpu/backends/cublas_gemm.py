"""A row-major GEMM of float32 (or float16) matrices into float32 as the one cublasGemmEx call
that computes it, and that call run by cuBLAS's definition with numpy.

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
R_32F = 0                   # cudaDataType CUDA_R_32F: float32 elements
R_16F = 2                   # cudaDataType CUDA_R_16F: float16 elements (A and B only here)
COMPUTE_32F = 68            # float32 products and sums
COMPUTE_32F_FAST_16F = 74   # inputs may be rounded to float16 (tensor cores); sums stay float32
GEMM_DEFAULT = -1           # cuBLAS picks the algorithm (tensor cores where the compute type allows)


@dataclass(frozen=True)
class GemmEx:
    """cublasGemmEx's arguments but the handle, scalars and C's type (float32): C = op(A) @ op(B),
    op(A) [m, k], op(B) [k, n], C [m, n], each column-major with its leading dimension; A and B
    of `ab_type`."""

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
    ab_type: int = R_32F


def row_major_gemm(a: Any, b: Any, c: Any, m: int, n: int, k: int, b_transposed: bool = False,
                   relaxed: bool = False, half: bool = False) -> GemmEx:
    """The call storing row-major C[m, n] = A[m, k] @ B, B stored as [k, n] (or as [n, k] with
    b_transposed), C float32. A and B are float32, or float16 with `half` (a relaxed model's
    float16 temporary times its weights rounded so; float32 sums). `relaxed` (the model's
    relaxComputationFloat32toFloat16) lets cuBLAS multiply float32 inputs as float16, which the
    spec allows then and only then."""
    compute = COMPUTE_32F_FAST_16F if relaxed and not half else COMPUTE_32F
    ab_type = R_16F if half else R_32F
    if b_transposed:   # B stored [n, k], read column-major, is B itself [k, n]: op T gives B^T
        return GemmEx(OP_T, OP_N, n, m, k, b, k, a, k, c, n, compute, ab_type)
    return GemmEx(OP_N, OP_N, n, m, k, b, n, a, k, c, n, compute, ab_type)


def check_bounds(call: GemmEx, nbytes: Callable[[Any], int]) -> None:
    """ValueError where cuBLAS would refuse the call (an operation or leading dimension it does
    not take) or read or write past a buffer's end (`nbytes(buffer)` bytes): a plan's mistake
    stops here instead of reading what is past it."""
    for name, op in (("A", call.transa), ("B", call.transb)):
        if op not in (OP_N, OP_T):
            raise ValueError(f"{name}: operation {op} is neither OP_N nor OP_T")
    a_rows, a_cols = (call.m, call.k) if call.transa == OP_N else (call.k, call.m)
    b_rows, b_cols = (call.k, call.n) if call.transb == OP_N else (call.n, call.k)
    if (call.ab_type, call.compute) not in _SUPPORTED:
        raise ValueError(f"A and B of type {call.ab_type} with compute type {call.compute}: not a combination "
                         "cuBLAS takes into a float32 C")
    item = _DTYPE[call.ab_type].itemsize
    for name, buf, rows, cols, ld, size in (("A", call.a, a_rows, a_cols, call.lda, item),
                                            ("B", call.b, b_rows, b_cols, call.ldb, item),
                                            ("C", call.c, call.m, call.n, call.ldc, 4)):
        if ld < max(1, rows):
            raise ValueError(f"{name}: leading dimension {ld} is below its {rows} rows")
        if rows and cols and ((cols - 1) * ld + rows) * size > nbytes(buf):
            raise ValueError(f"{name}: [{rows}, {cols}] with leading dimension {ld} ends past its buffer of "
                             f"{nbytes(buf)} bytes")


def run_gemm_ex(call: GemmEx, memory: Callable[[Any], np.ndarray]) -> None:
    """The call as cuBLAS defines it, on the elements of the arrays `memory(buffer)` gives (the
    buffers' bytes, read as each matrix's type); with COMPUTE_32F_FAST_16F the inputs rounded to
    float16, the coarsest that compute type allows. What check_bounds refuses raises ValueError."""
    check_bounds(call, lambda buf: memory(buf).nbytes)
    ab = _DTYPE[call.ab_type]
    a = _operand(_elements(memory(call.a), ab), call.transa, call.m, call.k, call.lda)
    b = _operand(_elements(memory(call.b), ab), call.transb, call.k, call.n, call.ldb)
    if call.compute == COMPUTE_32F_FAST_16F:
        with np.errstate(over="ignore"):
            a, b = (x.astype(np.float16) for x in (a, b))
    c = _column_major(_elements(memory(call.c), np.dtype(np.float32)), call.m, call.n, call.ldc, writeable=True)
    c[...] = np.matmul(a.astype(np.float32), b.astype(np.float32))


_DTYPE = {R_32F: np.dtype(np.float32), R_16F: np.dtype(np.float16)}
# (A and B's type, compute type) cuBLAS takes with a float32 C
_SUPPORTED = {(R_32F, COMPUTE_32F), (R_32F, COMPUTE_32F_FAST_16F), (R_16F, COMPUTE_32F)}


def _elements(memory: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """A buffer's bytes as whole elements of `dtype`."""
    raw = memory.reshape(-1).view(np.uint8)
    return raw[: raw.size // dtype.itemsize * dtype.itemsize].view(dtype)


def _operand(flat: np.ndarray, op: int, rows: int, cols: int, ld: int) -> np.ndarray:
    """op(X) [rows, cols] of a column-major X: X itself with OP_N, X [cols, rows] transposed with OP_T."""
    return _column_major(flat, rows, cols, ld) if op == OP_N else _column_major(flat, cols, rows, ld).T


def _column_major(flat: np.ndarray, rows: int, cols: int, ld: int, writeable: bool = False) -> np.ndarray:
    """A view of [rows, cols] stored column by column, `ld` elements apart (check_bounds checked it fits)."""
    item = flat.itemsize
    return np.lib.stride_tricks.as_strided(flat, (rows, cols), (item, ld * item), writeable=writeable)
