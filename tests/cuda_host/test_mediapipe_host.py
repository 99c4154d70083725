"""The CUDA kernels of the five MediaPipe models, run on the CPU by the host harness through the
real Plan and compared with the numpy reference on the same random inputs (max abs error within
the TFLite tests' bound: 1e-4 x each output's range). This proves the CUDA rendering, not the
CuPy glue. A model that ci/fetch-models.sh has not cached skips with the reason."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

from nngpu.runtime.interpreter import GraphRunner
from nngpu.modelutil import as_model_1_3
from nngpu.session import random_inputs
from nngpu.tflite.models import MODELS, candidate_dirs, find_model

from ..tflite.tfl_util import max_error_ratio
from .host_backend import HostCudaBackend, HostUnsupported
from .run import kernel_ids, record, run_on_host_cuda

pytest.importorskip("tflite", reason="the `tflite` flatbuffer package is not installed")
pytestmark = pytest.mark.skipif(not shutil.which("g++"), reason="no g++ on this machine")

REL_TOL = 1e-4  # as tests/tflite/test_models.py


@pytest.mark.parametrize("name", sorted(MODELS))
def test_cuda_rendering_on_host_matches_reference_mediapipe(name, request):
    from nngpu.tflite import load_tflite

    path = find_model(name)
    if path is None:
        pytest.skip(f"model {name} not cached in {', '.join(map(str, candidate_dirs()))}: run ci/fetch-models.sh")
    imported = load_tflite(path)
    model = as_model_1_3(imported.model)
    inputs = random_inputs(imported.inputs, seed=0)
    backend = HostCudaBackend()
    try:
        run = run_on_host_cuda(model, inputs, backend)
    except HostUnsupported as e:
        record(request, kernel_ids(backend.refused), "skipped", str(e))
        pytest.skip(f"CUDA kernel not runnable on the host: {e}")
    with np.errstate(all="ignore"):
        ref = GraphRunner(model).run(inputs)
    problems = []
    for k, (r, g) in enumerate(zip(ref, run.outputs)):
        if g.shape != r.shape or g.dtype != r.dtype:
            problems.append(f"output {k}: {g.dtype}{list(g.shape)}, reference {r.dtype}{list(r.shape)}")
        elif (ratio := max_error_ratio(r, g)) > REL_TOL or not np.isfinite(g).all():
            problems.append(f"output {k} ({imported.outputs[k].name}): max abs error {ratio:.3g} x range")
    record(request, run.kernels, "mismatched" if problems else "matched", idle=run.idle)
    assert run.kernels, "the models run in CUDA kernels"
    assert len(ref) == len(run.outputs) and not problems, "; ".join(problems)
