"""Every CUDA kernel the compiler generates for the corpus compiles to sm_90 with NVRTC, so the
CUDA dialect cannot rot on machines without a GPU. Each case's plan is lowered for its own
inputs (every barrier answered from a reference run, as the plan answers it at run time); the
kernels are deduplicated and compiled in batches, one translation unit each."""
from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path

import numpy as np
import pytest

from nngpu.runtime.interpreter import GraphRunner
from nngpu.compiler.lower import trace_segments
from nngpu.json_models import build_model, load_cases
from nngpu.modelutil import as_model_1_3
from nngpu.backends.cuda import TARGET as CUDA

from ..ops.test_shape_functions import case_inputs

cupy = pytest.importorskip("cupy", reason="CuPy + NVRTC (extra 'cuda') are not installed")
from cupy.cuda import nvrtc  # noqa: E402

CORPUS = Path(__file__).resolve().parents[1] / "data" / "nnapi-cts"
BATCH = 150


def corpus_cuda_kernels() -> dict[str, tuple]:
    """source → (the kernel, the first case that generated it)."""
    kernels: dict[str, tuple] = {}
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        for case in load_cases(CORPUS):
            if case.expect_failure:
                continue
            try:
                model = as_model_1_3(build_model(case))
                runner = GraphRunner(model)
                segments = trace_segments(runner, runner.trace(case_inputs(case, model)), CUDA)
            except Exception:
                continue  # a model the reference rejects generates nothing
            for seg in segments:
                for step in seg.kernels:
                    kernels.setdefault(step.source, (step.kernel, case.name))
    return kernels


def _compile(source: str, name: str) -> str | None:
    prog = nvrtc.createProgram(source, f"{name}.cu", [], [])
    try:
        nvrtc.compileProgram(prog, ["--gpu-architecture=sm_90", "--std=c++17"])
        assert nvrtc.getCUBIN(prog)[:4] == b"\x7fELF"
        return None
    except nvrtc.NVRTCError:
        return nvrtc.getProgramLog(prog)
    finally:
        nvrtc.destroyProgram(prog)


def test_every_generated_cuda_kernel_compiles_for_sm_90():
    kernels = corpus_cuda_kernels()
    assert len(kernels) > 100, "the corpus should generate many kernels"
    items = list(kernels.items())
    failures = []
    for start in range(0, len(items), BATCH):
        batch = items[start:start + BATCH]
        unit = CUDA.renderer.render_unit([dataclasses.replace(k, name=f"k{start + n}_{k.name}")
                                 for n, (_, (k, _)) in enumerate(batch)])
        if _compile(unit, f"batch{start}") is None:
            continue
        for source, (_, case) in batch:  # find the culprit
            log = _compile(source, "single")
            if log is not None:
                failures.append(f"{case}: {log[:400]}")
    assert not failures, f"{len(failures)} kernels fail: " + "\n".join(failures[:5])
