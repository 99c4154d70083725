"""The CUDA plan with a relaxed model's float32 temporaries stored as float16 (the target's
relaxed_storage), on the host harness: the corpus' relaxed models with float32 temporaries pass
their relaxed tolerances, every kernel reading and writing float16 run and counted."""
from __future__ import annotations

import dataclasses
import shutil

import pytest

from nngpu.backends.cuda import TARGET as CUDA
from nngpu.json_models import build_model
from nngpu.modelutil import as_model_1_3

from ..compiler.test_relaxed_storage import relaxed_cases_with_temporaries
from ..ops.test_shape_functions import case_inputs
from .host_backend import HostCudaBackend
from .run import record, run_on_host_cuda
from .test_corpus_host import corpus_problems

pytestmark = pytest.mark.skipif(not shutil.which("g++"), reason="no g++ on this machine")


class _HalfTemporaries(HostCudaBackend):
    target = dataclasses.replace(CUDA, relaxed_storage=True)


def test_the_corpus_relaxed_models_with_float16_temporaries_on_host_cuda(request):
    problems, kernels = [], []
    for case in relaxed_cases_with_temporaries(request.config.getoption("--full-cts")):
        model = as_model_1_3(build_model(case))
        run = run_on_host_cuda(model, case_inputs(case, model), _HalfTemporaries())
        problems += [f"{case.name}: {p}" for p in corpus_problems(case, run.outputs)]
        kernels += run.kernels
    record(request, sorted(set(kernels)), "mismatched" if problems else "matched")
    assert not problems, "; ".join(problems)
