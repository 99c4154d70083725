"""The model fetcher's extraction (no download: a fake wheel built in the test)."""
from __future__ import annotations

import zipfile

from nngpu.tflite import models


def _fake_wheel(path):
    with zipfile.ZipFile(path, "w") as z:
        for name, member in models.MODELS.items():
            z.writestr(member, f"model {name}".encode())
        z.writestr("mediapipe/modules/other/unwanted.tflite", b"x")
    return path


def test_fetch_from_wheel_extracts_exactly_the_five_models(tmp_path):
    wheel = _fake_wheel(tmp_path / "mediapipe-0.10.14-py3-none-any.whl")
    dest = tmp_path / "models"
    assert models.missing(dest) == sorted(models.MODELS, key=list(models.MODELS).index)
    paths = models.fetch_models(dest, wheel=wheel)
    assert sorted(p.name for p in dest.iterdir()) == sorted(f"{n}.tflite" for n in models.MODELS)
    assert models.missing(dest) == []
    assert (dest / "pose_detection.tflite").read_bytes() == b"model pose_detection"
    # already complete: nothing is downloaded or rewritten
    assert models.fetch_models(dest) == paths


def test_models_dir_follows_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("NNGPU_MODELS", str(tmp_path / "m"))
    assert models.models_dir() == tmp_path / "m"
    monkeypatch.delenv("NNGPU_MODELS")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "c"))
    assert models.models_dir() == tmp_path / "c" / "nngpu" / "models"
    assert models.find_model("nope") is None
