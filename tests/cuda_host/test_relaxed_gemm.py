"""A relaxed model's GEMM on the host CUDA backend. A layer's GEMM (a stored bias: an epilogue) is
kernels/gemm.cu's: float32 inputs are multiplied as float32, as the relaxed flag allows and
never requires, and where A is a float16 temporary (the CUDA target's relaxed storage) it
multiplies float16 matrices, the weights stored so, with float32 sums. A bare GEMM is the
cublasGemmEx call the GPU gets, run by cuBLAS's definition: relaxed, it takes float16 inputs
(COMPUTE_32F_FAST_16F) and still matches the exact product within float16's precision. The
corpus' relaxed convolutions and fully connected layers, every one a GEMM, pass its relaxed
tolerances so."""
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

BATCH, K, UNITS = 64, 512, 256   # 2^23 multiply-adds: the CUDA target's GEMM path


def _fully_connected(relaxed: bool):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((BATCH, K), dtype=np.float32)
    w = rng.standard_normal((UNITS, K), dtype=np.float32) * 0.1
    b = rng.standard_normal(UNITS, dtype=np.float32)
    ins = [tensor(T.TENSOR_FLOAT32, x), tensor(T.TENSOR_FLOAT32, w, const=True),
           tensor(T.TENSOR_FLOAT32, b, const=True), scalar(T.INT32, 0)]
    return single_op_model(Op.FULLY_CONNECTED, ins, [output(T.TENSOR_FLOAT32, [BATCH, UNITS])], relaxed), x, w, b


def test_a_relaxed_layer_of_float32_inputs_multiplies_them_as_float32():
    outputs = {}
    for relaxed in (False, True):
        model, x, w, b = _fully_connected(relaxed)
        backend = EveryGemm()
        outputs[relaxed] = run_on_host_cuda(model, [x], backend).outputs[0]
        assert backend.relaxed_calls == [relaxed] and backend.launches == 1   # one kernel, the epilogue in it
    np.testing.assert_allclose(outputs[False], x @ w.T + b, rtol=1e-4, atol=1e-4)
    assert np.array_equal(outputs[True], outputs[False])


def test_a_bare_relaxed_gemm_takes_float16_inputs_and_stays_within_their_precision():
    """cuBLAS's call, bound as the CUDA backend binds a GEMM without an epilogue."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((BATCH, K), dtype=np.float32)
    w = rng.standard_normal((UNITS, K), dtype=np.float32) * 0.1
    backend = HostCudaBackend()
    a, b, c = backend.alloc(x.nbytes), backend.alloc(w.nbytes), backend.alloc(BATCH * UNITS * 4)
    backend.upload(a, x)
    backend.upload(b, w)
    outputs = {}
    for relaxed in (False, True):
        backend.bind_gemm(a, b, c, BATCH, UNITS, K, b_transposed=True, relaxed=relaxed)()
        outputs[relaxed] = np.empty((BATCH, UNITS), np.float32)
        backend.download(c, outputs[relaxed])
    assert backend.launches == 0
    half = lambda v: v.astype(np.float16).astype(np.float32)   # noqa: E731
    np.testing.assert_allclose(outputs[False], x @ w.T, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(outputs[True], half(x) @ half(w).T, rtol=1e-4, atol=1e-4)
    assert not np.array_equal(outputs[True], outputs[False])
    exact = x.astype(np.float64) @ w.T.astype(np.float64)
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
    convolution and fully connected layer with constant weights is a GEMM. Records whether
    each GEMM it binds is relaxed, and whether it multiplies float16 matrices."""

    target = dataclasses.replace(CUDA, gemm_min_work=1)

    def __init__(self) -> None:
        super().__init__()
        self.relaxed_calls: list[bool] = []
        self.half_calls: list[bool] = []

    def bind_gemm(self, a, b, c, m: int, n: int, k: int, b_transposed: bool = False, epilogue=None, then=None,
                  ldb=None, scale=None, relaxed: bool = False, half: bool = False, half_c: bool = False,
                  half_scale: bool = False):
        self.relaxed_calls.append(relaxed)
        self.half_calls.append(half)
        return super().bind_gemm(a, b, c, m, n, k, b_transposed, epilogue, then, ldb, scale, relaxed, half, half_c,
                                 half_scale)


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
