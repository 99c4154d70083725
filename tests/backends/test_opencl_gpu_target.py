"""The OpenCL GPU target's schedules run somewhere in CI: PoCL runs a plan lowered for a GPU
(GEMMs tiled in local memory, B as [K, N] and transposed, with the bias-and-clamp epilogue, a
folded consumer or A's columns scaled; the depthwise template with a folded consumer; a slice's
statistic in a work-group; the driver's work-groups for the rest) and it matches the reference;
a relaxed MediaPipe model stores its temporaries as float16 there and matches float32 within
float16's precision (with --full-cts). How fast it runs on a CPU says nothing; that it is right does."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import nngpu
from nngpu import backends
from nngpu.backends.opencl import TARGET as GPU
from nngpu.compiler.lower import device_plan
from nngpu.compiler.steps import GemmStep
from nngpu.json_models import build_model, load_file
from nngpu.modelutil import as_model_1_3
from nngpu.runtime.interpreter import GraphRunner

from ..compiler.test_block_reduce import CASES as REDUCTIONS
from ..compiler.test_gemm import CASES as GEMMS
from ..compiler.test_scale_fold import excite
from ..compiler.test_then_fold import block as then_block
from ..ops.test_shape_functions import case_inputs

pytestmark = pytest.mark.skipif("opencl" not in backends.device_backends(), reason="no OpenCL device here")
DEMO = Path(nngpu.__file__).resolve().parent / "data" / "demo_cnn.json"


def _demo():
    case = load_file(DEMO)[0]
    model = as_model_1_3(build_model(case))
    return model, case_inputs(case, model)


def _one_input(make):
    def model_and_inputs():
        model, x = make()
        return model, [x]
    return model_and_inputs


def _folded(consumer: str, producer: str):
    """A GEMM's or the depthwise template's consumer folded in (compiler/gemm_fold.py)."""
    def model_and_inputs():
        model, _, _ = then_block(consumer, producer)
        rng = np.random.default_rng(4)
        return model, [rng.standard_normal(model.main.operands[k].dimensions).astype(np.float32)
                       for k in model.main.inputIndexes]
    return model_and_inputs


def _excite():
    model, _, _ = excite()
    x = np.random.default_rng(5).standard_normal(model.main.operands[model.main.inputIndexes[0]].dimensions)
    return model, [x.astype(np.float32)]


MODELS = {**{f"gemm-{k}": _one_input(f) for k, f in GEMMS.items()},
          "softmax-1000": REDUCTIONS["softmax-1000"], "mean-4096": REDUCTIONS["mean-4096"], "demo": _demo,
          **{f"then-{c}-{p}": _folded(c, p) for c in ("hard-swish", "pad-add") for p in ("conv", "depthwise")},
          "scaled-a": _excite}


@pytest.fixture(scope="module")
def gpu_on_pocl():
    backend = backends.create("opencl")
    backend.target = GPU
    return backend


@pytest.mark.parametrize("name", MODELS)
def test_a_plan_for_a_gpu_matches_the_reference(gpu_on_pocl, name):
    model, inputs = MODELS[name]()
    plan = device_plan(GraphRunner(as_model_1_3(model)), gpu_on_pocl)
    with np.errstate(all="ignore"):
        got = plan.execute(list(inputs))
        want = plan.reference.run(list(inputs))
    steps = [s for seg in plan._last for s in seg.spec.steps]
    if name.startswith("gemm-"):
        assert any(isinstance(s, GemmStep) for s in steps)
    if name.startswith("then-"):
        assert any(getattr(s, "then", None) or "#define THEN\n" in getattr(s, "source", "") for s in steps)
    if name == "scaled-a":
        assert any(isinstance(s, GemmStep) and s.scale_a for s in steps)
    for g, w in zip(got, want):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=2e-5, atol=5e-5)


def test_a_relaxed_mediapipe_model_stores_float16_and_folds_as_float32(gpu_on_pocl, request):
    """The face detector relaxed on the GPU target: its temporaries float16 (half the bytes), as
    many launches as float32 (every fold made), its outputs within float16's precision of them.
    With --full-cts only: its kernels take PoCL 40 s to compile."""
    if not request.config.getoption("--full-cts"):
        pytest.skip("compiles the face detector twice for a GPU (40 s on PoCL): run with --full-cts")
    from nngpu.modelutil import relaxed_model
    from nngpu.session import random_inputs
    from nngpu.tflite import load_tflite
    from nngpu.tflite.models import find_model

    path = find_model("face_detection_short_range")
    if path is None:
        pytest.skip("the face detector is not cached: run ci/fetch-models.sh")
    imported = load_tflite(path)
    inputs = random_inputs(imported.inputs, seed=0)
    runs = {}
    for relaxed in (False, True):
        plan = device_plan(GraphRunner(as_model_1_3(relaxed_model(imported.model) if relaxed else imported.model)),
                           gpu_on_pocl)
        with np.errstate(all="ignore"):
            outputs = [np.asarray(o) for o in plan.execute(list(inputs))]
        (spec,) = [seg.spec for seg in plan._last]
        temporaries = sum(t.nbytes for t in spec.tensors.values() if not t.pinned)
        runs[relaxed] = outputs, spec, temporaries
    (want, float_spec, float_bytes), (got, spec, half_bytes) = runs[False], runs[True]
    assert len(spec.known.half) > 50 and half_bytes < 0.6 * float_bytes
    assert len(spec.steps) == len(float_spec.steps)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=0, atol=5e-3 * float(np.abs(w).max()))
