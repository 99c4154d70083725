"""The cublasGemmEx call the CUDA backend makes for a row-major GEMM (nngpu/backends/cublas_gemm.py),
run here with numpy by cuBLAS's column-major definition, as the host harness runs every GEMM of
the models: the call computes A @ B for every shape and layout, float16 inputs only where relaxed,
float16 matrices into float32; leading dimensions, types and compute types cuBLAS refuses and
matrices past a buffer's end are caught."""
from __future__ import annotations

import numpy as np
import pytest

from nngpu.backends import cublas_gemm as cg

rng = np.random.default_rng(7)   # each test draws from its start (tests/conftest.py)


# float32 sums of up to 300 standard-normal products (about +-17) are off the exact sum by up to
# 2e-5 past rtol 1e-5 (1.7e-5 the most over 300 seeds): 1e-4 holds, and float16 inputs in place
# of float32 ones are off by 1e-2 or more
F32_SUMS_ATOL = 1e-4


def _exact(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """A @ B in float64: the float32 product's rounding is the tolerance's, not the reference's."""
    return a.astype(np.float64) @ b.astype(np.float64)


def _floats(buf: np.ndarray) -> np.ndarray:
    return buf.reshape(-1)


def test_the_definition_reads_column_major_with_leading_dimensions():
    """op(A) = A [2, 3] stored with lda 4 (two rows of padding), op(B) = S^T of S [2, 3] stored
    with ldb 2, C [2, 2] column-major."""
    a = np.float32([1, 2, -1, -1, 3, 4, -1, -1, 5, 6, -1, -1])   # A = [[1, 3, 5], [2, 4, 6]]
    b = np.float32([1, 0, 0, 1, 1, 1])                             # S = [[1, 0, 1], [0, 1, 1]]
    c = np.full(4, np.nan, np.float32)
    cg.run_gemm_ex(cg.GemmEx(cg.OP_N, cg.OP_T, 2, 2, 3, a, 4, b, 2, c, 2, cg.COMPUTE_32F), _floats)
    np.testing.assert_array_equal(c, [6, 8, 8, 10])                # [[6, 8], [8, 10]] column by column


@pytest.mark.parametrize("b_transposed", [False, True])
@pytest.mark.parametrize("m, n, k", [(1, 1, 1), (1, 7, 5), (6, 1, 3), (5, 4, 1), (33, 17, 65), (64, 96, 128)])
def test_the_call_computes_the_row_major_product(m, n, k, b_transposed):
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    stored_b = np.ascontiguousarray(b.T) if b_transposed else b
    c = np.full(m * n + 3, np.nan, np.float32)     # past C's end: nothing is written there
    cg.run_gemm_ex(cg.row_major_gemm(a.reshape(-1), stored_b.reshape(-1), c, m, n, k, b_transposed), _floats)
    np.testing.assert_allclose(c[: m * n].reshape(m, n), _exact(a, b), rtol=1e-5, atol=F32_SUMS_ATOL)
    assert np.isnan(c[m * n:]).all()


@pytest.mark.parametrize("b_transposed", [False, True])
def test_relaxed_asks_for_float16_inputs_and_only_then(b_transposed):
    m, n, k = 16, 24, 300
    a = rng.standard_normal((m, k), dtype=np.float32)
    b = rng.standard_normal((k, n), dtype=np.float32)
    stored_b = (np.ascontiguousarray(b.T) if b_transposed else b).reshape(-1)
    strict = cg.row_major_gemm(a.reshape(-1), stored_b, np.empty(m * n, np.float32), m, n, k, b_transposed)
    relaxed = cg.row_major_gemm(a.reshape(-1), stored_b, np.empty(m * n, np.float32), m, n, k, b_transposed,
                                relaxed=True)
    assert (strict.compute, relaxed.compute) == (cg.COMPUTE_32F, cg.COMPUTE_32F_FAST_16F)
    for call in (strict, relaxed):
        cg.run_gemm_ex(call, _floats)
    half = lambda x: x.astype(np.float16).astype(np.float32)   # noqa: E731
    np.testing.assert_allclose(relaxed.c.reshape(m, n), _exact(half(a), half(b)), rtol=1e-5, atol=F32_SUMS_ATOL)
    np.testing.assert_allclose(strict.c.reshape(m, n), _exact(a, b), rtol=1e-5, atol=F32_SUMS_ATOL)
    assert not np.array_equal(relaxed.c, strict.c)
    np.testing.assert_allclose(relaxed.c, strict.c, rtol=0, atol=5e-3 * np.sqrt(k))   # float16's precision


@pytest.mark.parametrize("b_transposed", [False, True])
def test_float16_matrices_multiply_into_float32(b_transposed):
    m, n, k = 9, 20, 130
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    stored_b = (np.ascontiguousarray(b.T) if b_transposed else b).reshape(-1)
    c = np.full(m * n, np.nan, np.float32)
    call = cg.row_major_gemm(a.reshape(-1), stored_b, c, m, n, k, b_transposed, relaxed=True, half=True)
    assert (call.ab_type, call.compute) == (cg.R_16F, cg.COMPUTE_32F)   # float32 sums
    cg.run_gemm_ex(call, _floats)
    np.testing.assert_allclose(c.reshape(m, n), _exact(a, b), rtol=1e-5, atol=F32_SUMS_ATOL)
    sizes = {"A": 2 * m * k, "B": 2 * n * k, "C": 4 * m * n}   # two bytes an element of A and B
    named = cg.row_major_gemm("A", "B", "C", m, n, k, b_transposed, half=True)
    cg.check_bounds(named, sizes.__getitem__)
    for short in ("A", "B"):
        with pytest.raises(ValueError, match="ends past its buffer"):
            cg.check_bounds(named, lambda name: sizes[name] - 2 * (name == short))


def test_what_cublas_would_refuse_or_overrun_raises():
    a, b, c = np.zeros(6, np.float32), np.zeros(6, np.float32), np.zeros(4, np.float32)
    with pytest.raises(ValueError, match="A: leading dimension 1 is below its 2 rows"):
        cg.run_gemm_ex(cg.GemmEx(cg.OP_N, cg.OP_N, 2, 2, 3, a, 1, b, 3, c, 2, cg.COMPUTE_32F), _floats)
    with pytest.raises(ValueError, match="C: .2, 2. with leading dimension 2 ends past its buffer of 12 bytes"):
        cg.run_gemm_ex(cg.GemmEx(cg.OP_N, cg.OP_N, 2, 2, 3, a, 2, b, 3, c[:3], 2, cg.COMPUTE_32F), _floats)
    with pytest.raises(ValueError, match="B: operation 2 is neither"):
        cg.run_gemm_ex(cg.GemmEx(cg.OP_N, 2, 2, 2, 3, a, 2, b, 3, c, 2, cg.COMPUTE_32F), _floats)
    with pytest.raises(ValueError, match="compute type 77"):
        cg.run_gemm_ex(cg.GemmEx(cg.OP_N, cg.OP_N, 2, 2, 3, a, 2, b, 3, c, 2, 77), _floats)
    with pytest.raises(ValueError, match="type 2 with compute type 74"):   # FAST_16F takes float32 matrices
        cg.run_gemm_ex(cg.GemmEx(cg.OP_N, cg.OP_N, 2, 2, 3, a, 2, b, 3, c, 2, cg.COMPUTE_32F_FAST_16F, cg.R_16F),
                       _floats)


@pytest.mark.parametrize("b_transposed", [False, True])
def test_the_row_major_call_fits_its_buffers_exactly(b_transposed):
    """The check the CUDA backend makes before each call (it gives cuBLAS pointers): a call for
    buffers of exactly the matrices' bytes passes, one element fewer of any of them does not."""
    m, n, k = 5, 3, 7
    sizes = {"A": 4 * m * k, "B": 4 * n * k, "C": 4 * m * n}
    call = cg.row_major_gemm("A", "B", "C", m, n, k, b_transposed)
    cg.check_bounds(call, sizes.__getitem__)
    for short in sizes:
        with pytest.raises(ValueError, match="ends past its buffer"):
            cg.check_bounds(call, lambda name: sizes[name] - 4 * (name == short))


def test_the_enum_values_are_cublas_own():
    cublas = pytest.importorskip("cupy_backends.cuda.libs.cublas", exc_type=ImportError)   # needs libcublas
    runtime = pytest.importorskip("cupy_backends.cuda.api.runtime", exc_type=ImportError)
    assert (cg.OP_N, cg.OP_T) == (cublas.CUBLAS_OP_N, cublas.CUBLAS_OP_T)
    assert (cg.COMPUTE_32F, cg.COMPUTE_32F_FAST_16F) == (cublas.CUBLAS_COMPUTE_32F, cublas.CUBLAS_COMPUTE_32F_FAST_16F)
    assert cg.GEMM_DEFAULT == cublas.CUBLAS_GEMM_DEFAULT
    assert (cg.R_32F, cg.R_16F) == (runtime.CUDA_R_32F, runtime.CUDA_R_16F)
