"""The corpus sample's CUDA kernels, run on the CPU by the host harness through the real Plan
and judged by the corpus' own accuracy criteria. This proves the CUDA rendering (indexing,
types, float16), not the CuPy glue. The sample is the device backends' default one
(tests/cts/test_corpus.py); --full-cts runs every case."""
from __future__ import annotations

import shutil

import pytest

from nngpu.cts.compare import check_multinomial, compare_output
from nngpu.json_models import build_model, load_cases
from nngpu.modelutil import as_model_1_3

from ..cts.test_corpus import BUNDLED_CORPUS, in_device_sample
from ..ops.test_shape_functions import case_inputs
from .host_backend import HostCudaBackend, HostUnsupported
from .run import kernel_ids, record, run_on_host_cuda

pytestmark = pytest.mark.skipif(not shutil.which("g++"), reason="no g++ on this machine")


def pytest_generate_tests(metafunc):
    if "host_case" in metafunc.fixturenames:
        full = metafunc.config.getoption("--full-cts")
        cases = [c for c in load_cases(BUNDLED_CORPUS) if not c.expect_failure and (full or in_device_sample(c))]
        metafunc.parametrize("host_case", cases, ids=[f"{c.version}/{c.name}" for c in cases])


def corpus_problems(case, outputs) -> list[str]:
    main = case.raw["main"]
    if case.multinomial_tolerance > 0:
        problem = check_multinomial(case, outputs[0])
        return [problem] if problem else []
    problems = []
    for k, idx in enumerate(main["outputIndexes"]):
        operand = main["operands"][idx]
        if operand["isIgnored"]:
            continue
        if list(outputs[k].shape) != list(operand["dimensions"]):
            problems.append(f"output {k}: shape {list(outputs[k].shape)}, expected {operand['dimensions']}")
            continue
        problem = compare_output(case, operand, outputs[k])
        if problem:
            problems.append(f"output {k}: {problem}")
    return problems


def test_cuda_rendering_on_host_matches_corpus(host_case, request):
    model = as_model_1_3(build_model(host_case))
    backend = HostCudaBackend()
    try:
        run = run_on_host_cuda(model, case_inputs(host_case, model), backend)
    except HostUnsupported as e:
        record(request, kernel_ids(backend.refused), "skipped", str(e))
        pytest.skip(f"CUDA kernel not runnable on the host: {e}")
    problems = corpus_problems(host_case, run.outputs)
    if not run.kernels:
        record(request, [], "host-only", idle=run.idle)
        assert not problems, "; ".join(problems)
        pytest.skip("no CUDA kernel launched: the plan runs this case on the host reference")
    record(request, run.kernels, "mismatched" if problems else "matched", idle=run.idle)
    assert not problems, "; ".join(problems)
