"""ci/model_latency.py (a step of ci/gpu-check.sh): one line per MediaPipe model, written as it
is measured, with the launches one execution makes (0 on the numpy plan, which launches none)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from nngpu.tflite.models import MODELS, find_model

SCRIPT = Path(__file__).resolve().parents[1] / "ci" / "model_latency.py"


def _script():
    spec = importlib.util.spec_from_file_location("model_latency", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_line_per_model(capsys):
    assert _script().main(["--backend", "numpy", "--repeat", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["model", "p50", "ms"]
    for name, line in zip(sorted(MODELS), lines[1:], strict=True):
        fields = line.split()
        assert fields[0] == name
        if find_model(name) is None:
            assert "not cached" in line
        else:
            assert float(fields[1]) > 0 and fields[2] == "0"
            assert line.endswith("float32 (relaxed too: the numpy reference computes float32)")


def test_repeat_below_one_is_refused(capsys):
    with pytest.raises(SystemExit) as e:
        _script().main(["--repeat", "0"])
    assert e.value.code == 2 and "--repeat: 0 is below 1" in capsys.readouterr().err
