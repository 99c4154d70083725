"""A relaxed model's GEMM on the host CUDA backend: the cublasGemmEx call the GPU gets, run by
cuBLAS's definition, takes float16 inputs (COMPUTE_32F_FAST_16F) and the layer still matches the
exact product within float16's precision; the same model not relaxed gets float32 inputs."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

from nngpu.hal import OperandType as T
from nngpu.hal.types import OperationType as Op
from nngpu.testing import output, scalar, single_op_model, tensor

from .run import run_on_host_cuda

pytestmark = pytest.mark.skipif(not shutil.which("g++"), reason="no g++ on this machine")

BATCH, K, UNITS = 64, 512, 256   # 2^23 multiply-adds: the CUDA target's GEMM path (cuBLAS)


def _fully_connected(relaxed: bool):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((BATCH, K), dtype=np.float32)
    w = rng.standard_normal((UNITS, K), dtype=np.float32) * 0.1
    b = rng.standard_normal(UNITS, dtype=np.float32)
    ins = [tensor(T.TENSOR_FLOAT32, x), tensor(T.TENSOR_FLOAT32, w, const=True),
           tensor(T.TENSOR_FLOAT32, b, const=True), scalar(T.INT32, 0)]
    return single_op_model(Op.FULLY_CONNECTED, ins, [output(T.TENSOR_FLOAT32, [BATCH, UNITS])], relaxed), x, w, b


def test_a_relaxed_gemm_takes_float16_inputs_and_stays_within_their_precision():
    outputs = {}
    for relaxed in (False, True):
        model, x, w, b = _fully_connected(relaxed)
        outputs[relaxed] = run_on_host_cuda(model, [x]).outputs[0]
    half = lambda v: v.astype(np.float16).astype(np.float32)   # noqa: E731
    np.testing.assert_allclose(outputs[False], x @ w.T + b, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(outputs[True], half(x) @ half(w).T + b, rtol=1e-4, atol=1e-4)
    assert not np.array_equal(outputs[True], outputs[False])
    exact = x.astype(np.float64) @ w.T.astype(np.float64) + b
    np.testing.assert_allclose(outputs[True], exact, rtol=1e-2, atol=2e-3 * np.sqrt(K))
