"""Every CUDA kernel the compiler generates for the corpus compiles to sm_90 with NVRTC, so the
CUDA dialect cannot rot on machines without a GPU. Kernels are deduplicated and compiled in
batches (one translation unit per batch, the prelude once)."""
from __future__ import annotations

import re
import warnings
from pathlib import Path

import numpy as np
import pytest

from nngpu.compiler.lower import lower
from nngpu.compiler.render import CUDA
from nngpu.cts.loader import build_model, load_cases
from nngpu.compiler.interpreter import GraphRunner
from nngpu.modelutil import as_model_1_3

cupy = pytest.importorskip("cupy", reason="CuPy + NVRTC (extra 'cuda') are not installed")
from cupy.cuda import nvrtc  # noqa: E402

CORPUS = Path(__file__).resolve().parents[1] / "data" / "nnapi-cts"
BATCH = 150


def corpus_cuda_kernels() -> dict[str, str]:
    """source → the first case that generated it."""
    kernels: dict[str, str] = {}
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        for case in load_cases(CORPUS):
            if case.expect_failure:
                continue
            try:
                spec = lower(GraphRunner(as_model_1_3(build_model(case))), "cuda")
            except Exception:
                continue  # a model the driver rejects generates nothing
            for step in spec.kernels if spec else []:
                kernels.setdefault(step.source, case.name)
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


def _strip(source: str, n: int) -> str:
    body = source.replace(CUDA.prelude, "", 1)
    return re.sub(r'extern "C" __global__ void (\w+)\(', f'extern "C" __global__ void k{n}_\\1(', body, count=1)


def test_every_generated_cuda_kernel_compiles_for_sm_90():
    kernels = corpus_cuda_kernels()
    assert len(kernels) > 100, "the corpus should generate many kernels"
    sources = list(kernels)
    failures = []
    for start in range(0, len(sources), BATCH):
        batch = sources[start : start + BATCH]
        unit = CUDA.prelude + "\n".join(_strip(s, start + i) for i, s in enumerate(batch))
        if _compile(unit, f"batch{start}") is None:
            continue
        for s in batch:  # find the culprit
            log = _compile(s, "single")
            if log is not None:
                failures.append(f"{kernels[s]}: {log[:400]}")
    assert not failures, f"{len(failures)} kernels fail: " + "\n".join(failures[:5])
