"""End-to-end: the five MediaPipe models on nngpu vs the TFLite interpreter (ai-edge-litert).

The models come from `ci/fetch-models.sh` (python -m nngpu.tflite.models); nothing is downloaded
here: a missing model or a missing ai-edge-litert skips with the reason. Every output is compared
on a random, a constant and a gradient image: max abs error <= 1e-4 x the output's range
(floored at 1e-3: see tfl_util.max_error_ratio)."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tflite", reason="the `tflite` flatbuffer package is not installed")

from .tfl_util import max_error_ratio, reference_interpreter  # noqa: E402

from nngpu.tflite import load_tflite  # noqa: E402
from nngpu.tflite.models import MODELS, candidate_dirs, find_model  # noqa: E402
from nngpu.session import Session, random_inputs  # noqa: E402

REL_TOL = 1e-4
# HAL version each model needs (1.3: RESIZE_BILINEAR half_pixel_centers, HARD_SWISH).
EXPECTED_VERSION = {"face_detection_short_range": 12, "palm_detection_lite": 13, "hand_landmark_lite": 12,
                    "selfie_segmentation": 13, "pose_detection": 13}


def _backends() -> list[str]:
    from nngpu.driver.device import Device

    names = ["numpy"]
    for name in ("opencl", "cuda"):
        try:
            Device(name)
            names.append(name)
        except Exception:  # no pyopencl / CuPy, no device: not that one
            pass
    return names


BACKENDS = _backends()


def _structured(imported, kind: str) -> list[np.ndarray]:
    out = []
    for t in imported.inputs:
        if kind == "random":
            return random_inputs(imported.inputs, seed=0)
        if kind == "constant":
            out.append(np.full(t.shape, 0.5, t.dtype))
        else:  # gradient: a ramp over H in [-1, 1] plus one over W, per channel phase
            n, h, w, c = t.shape
            ys = np.linspace(-1, 1, h, dtype=np.float64)[:, None, None]
            xs = np.linspace(-1, 1, w, dtype=np.float64)[None, :, None]
            ch = np.arange(c, dtype=np.float64)[None, None, :] / max(c, 1)
            img = np.clip(0.6 * ys + 0.4 * xs - 0.3 * ch, -1, 1)
            out.append(np.broadcast_to(img, (n, h, w, c)).astype(t.dtype))
    return out


@pytest.fixture(scope="module", params=sorted(MODELS))
def model(request):
    path = find_model(request.param)
    if path is None:
        pytest.skip(f"model {request.param} not cached in {', '.join(map(str, candidate_dirs()))}: "
                    f"run ci/fetch-models.sh")
    imported = load_tflite(path)
    Interpreter = reference_interpreter()
    it = Interpreter(model_path=str(path), num_threads=1)
    it.allocate_tensors()
    refs = {}
    for kind in ("random", "constant", "gradient"):
        inputs = _structured(imported, kind)
        for d, a in zip(it.get_input_details(), inputs):
            it.set_tensor(d["index"], a)
        it.invoke()
        refs[kind] = (inputs, [it.get_tensor(d["index"]).copy() for d in it.get_output_details()])
    return request.param, imported, refs


def test_import_structure(model):
    name, imported, _ = model
    assert imported.version == EXPECTED_VERSION[name]
    assert imported.folded > 0  # float16 weights (and pose_detection's sparse ones) are folded
    assert not imported.warnings
    assert [t.dtype for t in imported.inputs] == [np.float32]


@pytest.mark.parametrize("backend", BACKENDS)
def test_matches_tflite(model, backend):
    name, imported, refs = model
    with Session(imported, backend) as session:
        for kind, (inputs, ref) in refs.items():
            got = list(session.run(inputs).values())
            assert len(got) == len(ref)
            for k, (r, g) in enumerate(zip(ref, got)):
                assert g.shape == r.shape and g.dtype == r.dtype
                assert np.isfinite(g).all(), f"{name} {kind} output {k}: non-finite values"
                ratio = max_error_ratio(r, g)
                assert ratio <= REL_TOL, (f"{name} on {backend}, {kind} input, output {k} "
                                          f"({imported.outputs[k].name}): max abs error {ratio:.3g} x range")
