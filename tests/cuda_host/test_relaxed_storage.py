"""The CUDA plan of a relaxed model, its float32 temporaries stored as float16 (the CUDA target's
relaxed_storage), on the host harness: the corpus' relaxed models with float32 temporaries pass
their relaxed tolerances, every kernel reading and writing float16 run and counted."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

from nngpu.backends.cuda import TARGET as CUDA
from nngpu.json_models import build_model
from nngpu.modelutil import as_model_1_3

from ..compiler.test_relaxed_storage import SAMPLE_EVERY, conv_chain, relaxed_cases_with_temporaries
from ..ops.test_shape_functions import case_inputs
from .host_backend import HostCudaBackend
from .run import record, run_on_host_cuda
from .test_corpus_host import corpus_problems
from .test_relaxed_gemm import EveryGemm

pytestmark = pytest.mark.skipif(not shutil.which("g++"), reason="no g++ on this machine")


def test_the_corpus_relaxed_models_with_float16_temporaries_on_host_cuda(request):
    assert CUDA.relaxed_storage and CUDA.gemm_half_inputs
    problems, kernels = [], []
    # half the OpenCL test's sample: the harness compiles each kernel with g++ (all 539 with --full-cts)
    for case in relaxed_cases_with_temporaries(request.config.getoption("--full-cts"), every=2 * SAMPLE_EVERY):
        model = as_model_1_3(build_model(case))
        run = run_on_host_cuda(model, case_inputs(case, model), HostCudaBackend())
        problems += [f"{case.name}: {p}" for p in corpus_problems(case, run.outputs)]
        kernels += run.kernels
    record(request, sorted(set(kernels)), "mismatched" if problems else "matched")
    assert not problems, "; ".join(problems)


def test_convolutions_through_float16_gemms_on_host_cuda(request):
    """Three convolutions, each a float16 patch matrix times float16 weights (kernels/gemm.cu,
    storing a float16 output), a max pool and a mean: within float16's precision of float32."""
    outputs, kernels = {}, []
    for relaxed in (False, True):
        model, x = conv_chain(relaxed, side=12)
        backend = EveryGemm()
        run = run_on_host_cuda(model, [x], backend)
        assert backend.half_calls == [relaxed] * 3   # the three convolutions' GEMMs
        outputs[relaxed], kernels = run.outputs[0], kernels + run.kernels
    record(request, sorted(set(kernels)), "matched")
    want = outputs[False]
    assert not np.array_equal(outputs[True], want)
    np.testing.assert_allclose(outputs[True], want, rtol=5e-3, atol=5e-3 * float(np.abs(want).max()))
