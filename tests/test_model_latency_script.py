"""ci/model_latency.py (a step of ci/gpu-check.sh): two lines per MediaPipe model, float32 and
relaxed, written as they are measured, with the launches one execution makes (0 on the numpy plan,
which launches none) and how far relaxed moves the outputs (not at all where float32 is kept)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from nngpu.tflite.models import MODELS, find_model

SCRIPT = Path(__file__).resolve().parents[1] / "ci" / "model_latency.py"


def _script():
    spec = importlib.util.spec_from_file_location("model_latency", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_two_lines_per_model(capsys):
    assert _script().main(["--backend", "numpy", "--repeat", "1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["model", "precision", "p50", "ms", "launches/run", "change"]
    rows = iter(lines[1:])
    for name in sorted(MODELS):
        if find_model(name) is None:
            line = next(rows)
            assert line.split()[0] == name and "not cached" in line
            continue
        for precision in ("float32", "relaxed"):
            fields = next(rows).split()
            assert fields[:2] == [name, precision]
            assert float(fields[2]) > 0 and fields[3] == "0"
            assert fields[4] == ("-" if precision == "float32" else "0.0e+00")
    assert next(rows).startswith("relaxed on numpy: all float32: the numpy reference computes float32; change: ")
    assert next(rows, None) is None


def test_the_change_is_in_units_of_the_largest_magnitude():
    change = _script().largest_change([np.float32([1, 2]), np.float32([0, 0])],
                                      [np.float32([1, 4]), np.float32([0, 0])])
    assert change == 0.5


def test_repeat_below_one_is_refused(capsys):
    with pytest.raises(SystemExit) as e:
        _script().main(["--repeat", "0"])
    assert e.value.code == 2 and "--repeat: 0 is below 1" in capsys.readouterr().err
