"""The committed zoo (tests/data/zoo, made by zoo/generate.py with TensorFlow's converter): every
model imports and matches the TFLite interpreter on numpy and on OpenCL, by the rule of
nngpu/tflite/compare.py (float: 1e-4 of the output's range or TFLite's own XNNPACK-vs-reference
spread; quantized: one step).

KNOWN_GAPS lists what fails today, as strict xfails: an entry must go once its model passes. A key
is a model name (every backend) or "model@backend"."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tflite", reason="the `tflite` flatbuffer package is not installed")
pytest.importorskip("ai_edge_litert.interpreter", reason="ai-edge-litert is not installed")

from nngpu.tflite.compare import QUANT_STEPS, REL_TOL, check_output, compare
from zoo.generate import COMMITTED

ZOO = Path(__file__).resolve().parents[1] / "data" / "zoo"
MODELS = sorted(p.stem for p in ZOO.glob("*.tflite"))
BACKENDS = ("numpy", "opencl")

KNOWN_GAPS: dict[str, str] = {}


def _opencl_available() -> bool:
    from nngpu.driver.device import Device

    try:
        Device("opencl")
    except Exception:  # no pyopencl or no OpenCL device
        return False
    return True


def _cases() -> list:
    cases = []
    for name in MODELS:
        for backend in BACKENDS:
            reason = KNOWN_GAPS.get(f"{name}@{backend}", KNOWN_GAPS.get(name))
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            cases.append(pytest.param(name, backend, marks=marks, id=f"{name}-{backend}"))
    return cases


def test_committed_selection():
    assert MODELS == sorted(COMMITTED), "tests/data/zoo differs from zoo/generate.py's COMMITTED"
    assert sum(p.stat().st_size for p in ZOO.glob("*.tflite")) < 5_000_000
    assert all(k.split("@")[0] in MODELS for k in KNOWN_GAPS), "a KNOWN_GAPS entry names no committed model"


@pytest.mark.parametrize("name,backend", _cases())
def test_matches_tflite(name: str, backend: str):
    if backend == "opencl" and not _opencl_available():
        pytest.skip("no OpenCL device")
    outcome = compare(ZOO / f"{name}.tflite", backend)
    assert not outcome.import_error, f"{name} does not import: {outcome.import_error}"
    assert not outcome.run_error, f"{name} on {backend}: {outcome.run_error}"
    bad = [c for c in outcome.checks if not c.ok]
    assert outcome.checks and not bad, "; ".join(
        f"{c.name}: {c.note or f'error {c.error:.3g} > tolerance {c.tolerance:.3g}'}" for c in bad)


def test_rule_float_range_and_spread():
    ref = np.linspace(0, 10, 50, dtype=np.float32)
    near = ref + np.float32(REL_TOL * 10 * 0.5)
    assert check_output("y", ref, ref, near, 0.0).ok
    far = ref + np.float32(REL_TOL * 10 * 4)
    assert not check_output("y", ref, ref, far, 0.0).ok
    assert check_output("y", ref, far, far, 0.0).ok   # as far off as TFLite's own two kernels
    assert not check_output("y", ref, ref, ref.astype(np.float16), 0.0).ok   # dtype mismatch


def test_rule_quantized_one_step():
    ref = np.array([0, 100, 255], np.uint8)
    assert check_output("q", ref, ref, ref + np.uint8(QUANT_STEPS) * (ref < 255), 0.5).ok
    assert not check_output("q", ref, ref, np.array([2, 100, 255], np.uint8), 0.5).ok
    idx = np.array([3, 1], np.int32)   # not quantized: exact
    assert not check_output("i", idx, idx, np.array([3, 2], np.int32), 0.0).ok
