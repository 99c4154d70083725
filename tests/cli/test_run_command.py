"""`nngpu run` honours every flag for every model kind: the demo, a corpus .json file and (in
tests/tflite) a .tflite file."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from nngpu.cli import main
from nngpu.json_models import load_file

DEMO = Path(__file__).resolve().parents[2] / "nngpu" / "data" / "demo_cnn.json"
DEMO_SHAPE = (1, 8, 8, 3)


def test_demo_inputs_by_name_and_outputs_by_name(capsys, tmp_path):
    case = load_file(DEMO)[0]
    np.savez(tmp_path / "in.npz", input0=np.full(DEMO_SHAPE, 0.5, np.float32))
    out_dir = tmp_path / "outs"
    assert main(["run", str(DEMO), "--backend", "numpy", "--repeat", "2", "--input", str(tmp_path / "in.npz"),
                 "--save-outputs", str(out_dir), "--json", str(tmp_path / "report.json"), "--threads", "1"]) == 0
    assert sorted(p.name for p in out_dir.iterdir()) == ["output0.npy"]
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["steady"]["count"] == 2 and report["prepare_ms"] > 0 and report["first_run_ms"] > 0
    assert 10 < report["peak_rss_mb"] < 100_000   # MiB, this process's own
    n = len(case.raw["main"]["operations"])
    assert report["placement"]["device_operations"] + report["placement"]["host_operations"] == n
    assert report["placement"]["partitions"] == f"{n} operations: 1 partition on numpy ({n})"
    assert report["placement"]["launches_per_run"] == 0   # the numpy plan launches nothing
    assert f"placement: {n} operations: 1 partition on numpy ({n})" in capsys.readouterr().out


def test_device_launches_a_run_are_the_plans_kernels_and_gemms(capsys, tmp_path):
    from nngpu.backends import device_backends
    from nngpu.compiler.steps import GemmStep, KernelStep, TemplateStep
    from nngpu.session import Session

    if "opencl" not in device_backends():
        pytest.skip("no OpenCL device here")
    assert main(["run", str(DEMO), "--backend", "opencl", "--repeat", "1", "--json", str(tmp_path / "r.json")]) == 0
    launches = json.loads((tmp_path / "r.json").read_text())["placement"]["launches_per_run"]
    assert f"; {launches} device launches (kernels and GEMMs) a run" in capsys.readouterr().out
    with Session(DEMO, "opencl") as session:
        session.run(session.named.example_inputs)
        steps = [s for seg in session.prepared.executor._last for s in seg.spec.steps]
        assert launches == session.device_launches() == sum(
            isinstance(s, (KernelStep, TemplateStep, GemmStep)) for s in steps) > 0


@pytest.mark.parametrize("model", [None, DEMO])
def test_burst_and_warmup(capsys, model):
    pytest.importorskip("nngpu.burst")
    argv = ["run", *([str(model)] if model else []), "--backend", "numpy", "--burst", "--warmup", "0",
            "--repeat", "2"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "; burst" in out and "over 2 runs after 0 warm-up" in out


def test_same_outputs_positional_and_by_name(capsys, tmp_path):
    x = np.random.default_rng(1).uniform(size=DEMO_SHAPE).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    for k, spec in enumerate([str(tmp_path / "x.npy"), f"input0={tmp_path / 'x.npy'}"]):
        assert main(["run", "--backend", "numpy", "--repeat", "1", "--input", spec,
                     "--save-outputs", str(tmp_path / str(k))]) == 0
    np.testing.assert_array_equal(np.load(tmp_path / "0" / "output0.npy"), np.load(tmp_path / "1" / "output0.npy"))


@pytest.mark.parametrize("command", ["run", "profile"])
def test_relaxed_prepares_the_model_relaxed_and_says_what_the_backend_makes_of_it(command, capsys, tmp_path, caplog):
    import logging

    json_args = ["--json", str(tmp_path / "r.json")] if command == "run" else []
    with caplog.at_level(logging.INFO, logger="nngpu.device"):
        assert main([command, str(DEMO), "--backend", "numpy", "--repeat", "1", "--relaxed", *json_args]) == 0
    out = capsys.readouterr().out.splitlines()
    device_line = next(i for i, line in enumerate(out) if line.startswith("device: "))
    assert out[device_line + 1] == "relaxed: all float32: the numpy reference computes float32"
    assert [r.getMessage() for r in caplog.records if "relaxComputationFloat32toFloat16" in r.getMessage()] == \
        ["relaxComputationFloat32toFloat16 on numpy: all float32: the numpy reference computes float32"]
    if command == "run":
        assert json.loads((tmp_path / "r.json").read_text())["relaxed"] is True
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="nngpu.device"):
        assert main([command, str(DEMO), "--backend", "numpy", "--repeat", "1", *json_args]) == 0
    assert not any(line.startswith("relaxed") for line in capsys.readouterr().out.splitlines())
    assert not [r for r in caplog.records if "relaxComputationFloat32toFloat16" in r.getMessage()]
