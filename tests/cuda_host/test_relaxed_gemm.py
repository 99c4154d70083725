"""A relaxed model's GEMM on the host CUDA backend: the cublasGemmEx call the GPU gets, run by
cuBLAS's definition, takes float16 inputs (COMPUTE_32F_FAST_16F) and the layer still matches the
exact product within float16's precision; the same model not relaxed gets float32 inputs. Where
A is a float16 temporary (the CUDA target's relaxed storage), the call multiplies float16
matrices, the weights stored so. The corpus' relaxed convolutions and fully connected layers,
every one a GEMM, pass its relaxed tolerances so."""
from __future__ import annotations

import dataclasses
import shutil

import numpy as np
import pytest

from nngpu.backends.cuda import TARGET as CUDA
from nngpu.json_models import build_model, load_cases
from nngpu.modelutil import as_model_1_3
from nngpu.hal import OperandType as T
from nngpu.hal.types import OperationType as Op
from nngpu.testing import output, scalar, single_op_model, tensor

from ..compiler.model_builder import ModelBuilder
from ..cts.test_corpus import BUNDLED_CORPUS
from ..ops.test_shape_functions import case_inputs
from .host_backend import HostCudaBackend
from .run import run_on_host_cuda
from .test_corpus_host import corpus_problems

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


def _shifted_fully_connected(relaxed: bool):
    """t = x + 0.5, then the fully connected layer of t: A is a temporary."""
    rng = np.random.default_rng(6)
    x = rng.standard_normal((BATCH, K), dtype=np.float32)
    w = rng.standard_normal((UNITS, K), dtype=np.float32) * 0.1
    b = rng.standard_normal(UNITS, dtype=np.float32)
    mb = ModelBuilder()
    none = mb.constant(T.INT32, 0)
    t = mb.op(Op.ADD, [mb.input(T.TENSOR_FLOAT32, [BATCH, K]), mb.constant(T.TENSOR_FLOAT32, np.float32([0.5])), none],
              T.TENSOR_FLOAT32, [BATCH, K])
    mb.output(mb.op(Op.FULLY_CONNECTED, [t, mb.constant(T.TENSOR_FLOAT32, w), mb.constant(T.TENSOR_FLOAT32, b), none],
                    T.TENSOR_FLOAT32, [BATCH, UNITS]))
    model = mb.build()
    model.relaxComputationFloat32toFloat16 = relaxed
    return model, x, w, b


def test_a_float16_temporary_times_float16_weights():
    half = lambda v: v.astype(np.float16).astype(np.float32)   # noqa: E731
    for relaxed in (False, True):
        model, x, w, b = _shifted_fully_connected(relaxed)
        backend = EveryGemm()
        out = run_on_host_cuda(model, [x], backend).outputs[0]
        assert backend.half_calls == [relaxed]
        if relaxed:   # A stored float16, B rounded so at prepare, float32 sums
            np.testing.assert_allclose(out, half(x + 0.5) @ half(w).T + b, rtol=1e-4, atol=1e-4)
        else:
            np.testing.assert_allclose(out, (x + 0.5) @ w.T + b, rtol=1e-4, atol=1e-4)


class EveryGemm(HostCudaBackend):
    """The host harness with the CUDA target's GEMM threshold at one multiply-add: every float
    convolution and fully connected layer with constant weights is the cuBLAS call. Records
    whether each call it runs was relaxed, and whether it multiplied float16 matrices."""

    target = dataclasses.replace(CUDA, gemm_min_work=1)

    def __init__(self) -> None:
        super().__init__()
        self.relaxed_calls: list[bool] = []
        self.half_calls: list[bool] = []

    def gemm(self, a, b, c, m: int, n: int, k: int, b_transposed: bool = False, relaxed: bool = False,
             half: bool = False) -> None:
        self.relaxed_calls.append(relaxed)
        self.half_calls.append(half)
        super().gemm(a, b, c, m, n, k, b_transposed, relaxed, half)


def test_the_corpus_relaxed_convolutions_and_layers_as_float16_gemms(request):
    """Every 8th such case (--full-cts: all 111), judged by the corpus' relaxed tolerances."""
    cases = [c for c in load_cases(BUNDLED_CORPUS) if c.relaxed and not c.expect_failure
             and {o["type"] for o in c.raw["main"]["operations"]} & {"CONV_2D", "FULLY_CONNECTED"}]
    cases = cases if request.config.getoption("--full-cts") else cases[::8]
    problems, with_gemms = [], 0
    for case in cases:
        model = as_model_1_3(build_model(case))
        backend = EveryGemm()
        outputs = run_on_host_cuda(model, case_inputs(case, model), backend).outputs
        problems += [f"{case.name}: {p}" for p in corpus_problems(case, outputs)]
        assert all(backend.relaxed_calls), case.name
        with_gemms += bool(backend.relaxed_calls)
    assert not problems, "; ".join(problems)
    assert with_gemms >= len(cases) // 4, f"{with_gemms} of {len(cases)} cases ran a GEMM"   # 40 of 111
