"""`nngpu compare MODEL.tflite`: nngpu against TFLite per output (and per operator with --per-op),
the JSON report, and one-line refusals with exit 2."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tflite", reason="the `tflite` flatbuffer package is not installed")
pytest.importorskip("ai_edge_litert.interpreter", reason="ai-edge-litert is not installed")

from nngpu.cli import main  # noqa: E402
from nngpu.tflite.compare import OutputCheck, make_inputs  # noqa: E402
from nngpu.tflite.compare_ops import OperatorCheck, first_failure  # noqa: E402

ZOO = Path(__file__).resolve().parents[2] / "tests" / "data" / "zoo"


def test_an_int8_model_per_output_and_per_operator(tmp_path, capsys):
    model = ZOO / "mobilenet_v2_int8_u8.tflite"
    assert main(["compare", str(model), "--backend", "numpy", "--per-op", "--json", str(tmp_path / "r.json")]) == 0
    out = capsys.readouterr().out
    assert "PartitionedCall:0" in out and "0 steps" in out and "all outputs within tolerance" in out
    assert "per operator: " in out and ", 0 past their tolerance" in out
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["ok"] and report["outputs"][0]["quantized"] and report["outputs"][0]["error"] == 0
    ops = report["operators"]
    assert len(ops) > 50 and all(op["ok"] for op in ops) and report["first_failing_operator"] is None
    assert {"CONV_2D", "DEPTHWISE_CONV_2D", "ADD"} <= {op["op"] for op in ops}


def test_given_inputs_are_the_ones_compared(tmp_path, capsys):
    model = ZOO / "unet_upsampling.tflite"
    np.save(tmp_path / "x.npy", make_inputs(model, seed=3)[0])
    assert main(["compare", str(model), "--backend", "numpy", "--input", str(tmp_path / "x.npy"), "--json", "-"]) == 0
    given = json.loads(capsys.readouterr().out)
    assert main(["compare", str(model), "--backend", "numpy", "--seed", "3", "--json", "-"]) == 0
    seeded = json.loads(capsys.readouterr().out)
    assert given["inputs"] == "--input" and seeded["inputs"] == "random, seed 3"
    assert given["outputs"] == seeded["outputs"]
    assert 0 < given["outputs"][0]["range"] and given["outputs"][0]["error"] <= given["outputs"][0]["tolerance"]


@pytest.mark.parametrize("argv, needle", [
    (["compare", "missing.tflite"], "missing.tflite: no such file"),
    (["compare", "README.md"], "takes a .tflite model"),
    (["compare", str(ZOO / "lstm_keras3.tflite"), "--backend", "numpy", "--per-op"], "needs a model the driver runs whole"),
    (["compare", str(ZOO / "unet_small.tflite"), "--backend", "vulkan"], "unknown backend 'vulkan'"),
])
def test_bad_input_is_one_line_and_exit_2(capsys, argv, needle):
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1 and needle in err


def _check(ok: bool, name: str = "t") -> OutputCheck:
    return OutputCheck(name, 0.0 if ok else 3.0, 1.0, True)


def test_the_first_failing_operator_is_the_earliest():
    ops = [OperatorCheck(0, "CONV_2D", [_check(True)]), OperatorCheck(1, "ADD", [_check(False, "a")], [_check(True)]),
           OperatorCheck(2, "MEAN", [_check(False, "m")])]
    assert first_failure(ops).index == 1
    assert first_failure(ops[:1]) is None
