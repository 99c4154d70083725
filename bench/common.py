"""What the model benchmarks share: the MediaPipe model or a generated zoo model (or a skip) and
the summary table."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from nngpu.tflite.models import find_model

# Where zoo/run.sh writes the generated zoo (NNGPU_ZOO_DIR wins).
_CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
ZOO_DIR = Path(os.environ.get("NNGPU_ZOO_DIR", _CACHE / "nngpu" / "zoo"))


def mediapipe_model(name: str) -> Path:
    path = find_model(name)
    if path is None:
        pytest.skip(f"model {name} not cached: run ci/fetch-models.sh")
    return path


def zoo_model(name: str) -> Path:
    path = ZOO_DIR / f"{name}.tflite"
    if not path.is_file():
        pytest.skip(f"{path} is missing: run ZOO_ARGS=--full-size bash zoo/run.sh")
    return path


def show_summary(request, lines: list[str]) -> None:
    """Print a module's summary without -s, between the dots and the benchmark tables."""
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled():
        print("\n".join(lines))
