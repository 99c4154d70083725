"""Every failure of every subcommand is one line on stderr, a non-zero exit and no traceback;
output paths are checked before the work starts."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from nngpu.cli import main

DEMO = Path(__file__).resolve().parents[2] / "nngpu" / "data" / "demo_cnn.json"
DEMO_SHAPE = (1, 8, 8, 3)


def fails(capsys, argv: list[str], *needles: str) -> str:
    """Run `nngpu argv`; assert a non-zero exit and one line on stderr holding `needles`."""
    try:
        rc = main(argv)
    except SystemExit as e:  # argparse usage errors
        rc = e.code
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert rc not in (0, None), f"exit {rc} for {argv}"
    assert len(lines) == 1, f"{argv}: stderr is not one line:\n{err}"
    assert "Traceback" not in err
    for n in needles:
        assert n in lines[0], f"{argv}: {n!r} not in {lines[0]!r}"
    return lines[0]


@pytest.fixture
def files(tmp_path):
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "schema.json").write_text(json.dumps({"cases": [{"name": "x"}]}))
    (tmp_path / "model.txt").write_text("hello")
    np.save(tmp_path / "f64.npy", np.zeros(DEMO_SHAPE))
    np.save(tmp_path / "u8.npy", np.zeros(DEMO_SHAPE, np.uint8))
    np.save(tmp_path / "shape.npy", np.zeros((1, 4, 4, 3), np.float32))
    np.save(tmp_path / "ok.npy", np.zeros(DEMO_SHAPE, np.float32))
    np.savez(tmp_path / "unknown.npz", foo=np.zeros(3))
    (tmp_path / "pickle.npy").write_bytes(b"not an array")
    (tmp_path / "a_file").write_text("")
    return tmp_path


@pytest.mark.parametrize("model, needle", [("bad.json", "not a JSON model file"),
                                           ("schema.json", "not in the corpus model schema"),
                                           ("missing.tflite", "no such file"),
                                           ("model.txt", "unknown model format")])
@pytest.mark.parametrize("command", ["run", "kernels", "profile"])
def test_bad_model_files(capsys, files, command, model, needle):
    fails(capsys, [command, str(files / model)], needle)


@pytest.mark.parametrize("argv", [["run"], ["run", str(DEMO)], ["profile", str(DEMO)], ["cts"], ["info"]])
def test_unknown_backend(capsys, argv):
    fails(capsys, [*argv, "--backend", "bogus"], "unknown backend 'bogus'")


@pytest.mark.parametrize("argv", [["info"], ["run"]])
def test_unknown_backend_from_the_environment(capsys, monkeypatch, argv):
    """NNGPU_BACKEND=vulkan reads as --backend vulkan does: the same one line, exit 2."""
    monkeypatch.setenv("NNGPU_BACKEND", "vulkan")
    from_env = fails(capsys, argv, "unknown backend 'vulkan'")
    assert main(argv) == 2
    capsys.readouterr()
    monkeypatch.delenv("NNGPU_BACKEND")
    assert fails(capsys, [*argv, "--backend", "vulkan"]) == from_env


@pytest.mark.parametrize("env", [None, "vulkan"])
def test_info_with_an_unknown_backend_prints_nothing_before_its_line(capsys, monkeypatch, env):
    if env:
        monkeypatch.setenv("NNGPU_BACKEND", env)
    assert main(["info", *([] if env else ["--backend", "vulkan"])]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("nngpu info: unknown backend 'vulkan'") and err.count("\n") == 1


def test_cuda_without_a_gpu(capsys):
    from nngpu.backends import cuda

    if cuda.available():
        pytest.skip("this machine has a CUDA GPU")
    fails(capsys, ["run", "--backend", "cuda"], "backend cuda")


def test_cuda_without_cupy(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)
    fails(capsys, ["run", "--backend", "cuda"], "cupy is not installed", "pip install 'nngpu[cuda]'")


def test_opencl_without_pyopencl(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyopencl", None)
    fails(capsys, ["info", "--backend", "opencl"], "pyopencl is not installed", "pip install 'nngpu[opencl]'")


def test_tflite_without_its_package(capsys, monkeypatch, files):
    import nngpu.tflite.reader as reader

    monkeypatch.setattr(reader, "_fb", None)
    monkeypatch.setattr(reader, "_IMPORT_ERROR", ImportError("No module named 'tflite'"), raising=False)
    (files / "m.tflite").write_bytes(b"\0" * 64)
    fails(capsys, ["run", str(files / "m.tflite"), "--backend", "numpy"], "pip install 'nngpu[tflite]'")


@pytest.mark.parametrize("model", [None, DEMO])
@pytest.mark.parametrize("arg, needle", [("f64.npy", "dtype float64, the model wants float32"),
                                         ("u8.npy", "dtype uint8, the model wants float32"),
                                         ("shape.npy", "shape [1, 4, 4, 3], the model wants [1, 8, 8, 3]"),
                                         ("unknown.npz", "entry 'foo' is not an input"),
                                         ("pickle.npy", "not a .npy or .npz file"),
                                         ("nothing.npy", "no such file")])
def test_strict_inputs(capsys, files, model, arg, needle):
    argv = ["run", *([str(model)] if model else []), "--backend", "numpy", "--input", str(files / arg)]
    fails(capsys, argv, needle)


def test_input_count_and_mixing(capsys, files):
    ok = str(files / "ok.npy")
    fails(capsys, ["run", "--backend", "numpy", "--input", ok, "--input", ok], "the model has 1 inputs")
    fails(capsys, ["run", "--backend", "numpy", "--input", ok, "--input", f"input0={ok}"], "not both")


def test_cast_is_explicit(capsys, files):
    assert main(["run", "--backend", "numpy", "--repeat", "1", "--input", str(files / "u8.npy"), "--cast"]) == 0
    assert "(--input)" in capsys.readouterr().out


@pytest.mark.parametrize("argv, needle", [(["run", "--repeat", "0"], "--repeat: 0 is below 1"),
                                          (["run", "--warmup", "-1"], "--warmup: -1 is below 0"),
                                          (["run", "--threads", "0"], "--threads: 0 is below 1"),
                                          (["kernels", str(DEMO), "--target", "metal"], "--target metal: no such kernel target; choose from cuda, opencl, opencl-cpu"),
                                          (["cache", "purge"], "invalid choice"),
                                          (["bogus"], "invalid choice")])
def test_usage_errors(capsys, argv, needle):
    fails(capsys, argv, needle)


@pytest.mark.parametrize("flag", ["--json", "--profile"])
def test_output_files_checked_first(capsys, files, flag):
    fails(capsys, ["run", "--backend", "numpy", flag, str(files / "no" / "such" / "x.json")], "does not exist")
    assert "model:" not in capsys.readouterr().out  # nothing ran


def test_save_outputs_on_a_file(capsys, files):
    fails(capsys, ["run", "--backend", "numpy", "--save-outputs", str(files / "a_file")], "not a folder")


def test_kernels_out_on_a_file(capsys, files):
    fails(capsys, ["kernels", str(DEMO), "--out", str(files / "a_file")], "not a folder")


def test_cts_errors(capsys, files, corpus_dir, monkeypatch):
    fails(capsys, ["cts", str(files / "nowhere")], "no such folder", "NNGPU_CTS_DIR")
    fails(capsys, ["cts", str(corpus_dir), "-k", "no_case_has_this_name"], "no case")
    fails(capsys, ["cts", str(corpus_dir), "--path", "sideways"], "unknown path 'sideways'")
    fails(capsys, ["cts", str(corpus_dir), "--hal", "aidl", "--path", "async"], "unknown path 'async' for --hal aidl",
          "reusable")
    fails(capsys, ["cts", str(corpus_dir), "--hal", "binder"], "invalid choice")
    fails(capsys, ["cts", str(corpus_dir), "-k", "add", "--json", str(files / "no" / "r.json")], "does not exist")
    import nngpu.json_models as jm

    monkeypatch.setattr(jm, "default_corpus_dir", lambda: None)
    fails(capsys, ["cts"], "no corpus found", "tests/data/nnapi-cts")


def test_cts_json_written(capsys, files, corpus_dir):
    out = files / "r.jsonl"
    assert main(["cts", str(corpus_dir), "-k", "add_v1_2", "--version", "V1_2", "--json", str(out)]) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert records and all(r["result"] == "passed" for r in records)


def test_cts_through_the_aidl_face(capsys, files, corpus_dir):
    out = files / "aidl.jsonl"
    assert main(["cts", str(corpus_dir), "--hal", "aidl", "--path", "all", "-k", "add_v1_2", "--version", "V1_2",
                 "--json", str(out)]) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert {r["path"] for r in records} == {"sync", "config", "reusable", "burst", "fenced"}
    assert {r["result"] for r in records} == {"passed", "skipped"}     # skipped: zero-sized outputs on fenced


def test_internal_error_is_one_line(capsys, monkeypatch):
    import nngpu.cli.info_command as info

    def broken(args):
        raise RuntimeError("something nngpu did not expect")

    monkeypatch.setattr(info, "run", broken)
    fails(capsys, ["info"], "internal error: RuntimeError: something nngpu did not expect", "--log-level debug")
