"""`nngpu run MODEL.tflite`: inputs, outputs by tensor name, latency, the burst path, and an
operator neither the driver nor TFLite's kernels have as one line with exit 2."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tflite", reason="the `tflite` flatbuffer package is not installed")

from nngpu.tflite import import_tflite  # noqa: E402

from .test_importer import _f32, _transpose_conv_model, _unsupported_model  # noqa: E402
from .tfl_util import run_nngpu  # noqa: E402
from .tflbuild import INT32, TFLModel, opt  # noqa: E402


def test_cli_run_unsupported_exits_2(tmp_path, capsys):
    from nngpu.cli import main

    path = tmp_path / "bad.tflite"
    path.write_bytes(_unsupported_model("MyCustomOp", custom=True))  # neither NNAPI nor TFLite has it
    assert main(["run", str(path), "--backend", "numpy"]) == 2
    err = capsys.readouterr().err
    assert "MyCustomOp" in err and "#1" in err


def test_cli_run_inputs_outputs_and_latency(tmp_path, capsys):
    from nngpu.cli import main

    path = tmp_path / "tc.tflite"
    path.write_bytes(_transpose_conv_model(False))
    x = _f32(1, 4, 4, 3)
    np.save(tmp_path / "x.npy", x)
    out_dir = tmp_path / "out"
    assert main(["run", str(path), "--backend", "numpy", "--repeat", "3", "--input", str(tmp_path / "x.npy"),
                 "--save-outputs", str(out_dir)]) == 0
    text = capsys.readouterr().out
    assert "p50" in text and "p90" in text and "p99" in text and "output y:" in text
    saved = np.load(out_dir / "y.npy")
    np.testing.assert_array_equal(saved, run_nngpu(import_tflite(path.read_bytes()), [x])[0])
    # wrong number of inputs: a usage error
    assert main(["run", str(path), "--backend", "numpy", "--input", str(tmp_path / "x.npy"),
                 "--input", str(tmp_path / "x.npy")]) == 2


def test_cli_run_burst(tmp_path, capsys):
    pytest.importorskip("nngpu.burst", reason="nngpu.burst is not available")
    from nngpu.cli import main

    path = tmp_path / "tc.tflite"
    path.write_bytes(_transpose_conv_model(False))
    assert main(["run", str(path), "--backend", "numpy", "--repeat", "2", "--burst"]) == 0
    assert "burst" in capsys.readouterr().out


@pytest.mark.parametrize("command", ["run", "profile"])
def test_an_execution_failure_prints_the_drivers_reason_on_one_line(tmp_path, capsys, command):
    from nngpu.cli import main

    m = TFLModel()
    x, idx, y = m.tensor("x", [4, 5]), m.tensor("idx", [2], INT32), m.tensor("y", [2, 5])
    m.op("GATHER", [x, idx], [y], "GatherOptions", lambda b: opt(b, "GatherOptions", Axis=0))
    path = tmp_path / "gather.tflite"
    path.write_bytes(m.build([x, idx], [y]))
    np.save(tmp_path / "x.npy", np.ones((4, 5), np.float32))
    np.save(tmp_path / "idx.npy", np.array([0, 9], np.int32))   # 9: past the 4 rows
    assert main([command, str(path), "--backend", "numpy", "--input", f"x={tmp_path / 'x.npy'}",
                 "--input", f"idx={tmp_path / 'idx.npy'}"]) == 1
    err = capsys.readouterr().err
    assert err == f"nngpu {command}: execution failed: GENERAL_FAILURE: operation 0 (GATHER): gather index out of [0, 4)\n"
