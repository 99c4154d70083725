"""What the model benchmarks share: the MediaPipe model (or a skip) and the summary table."""
from __future__ import annotations

from pathlib import Path

import pytest

from nngpu.tflite.models import find_model


def mediapipe_model(name: str) -> Path:
    path = find_model(name)
    if path is None:
        pytest.skip(f"model {name} not cached: run ci/fetch-models.sh")
    return path


def show_summary(request, lines: list[str]) -> None:
    """Print a module's summary without -s, between the dots and the benchmark tables."""
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    with capture.global_and_fixture_disabled():
        print("\n".join(lines))
