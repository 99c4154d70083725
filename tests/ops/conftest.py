"""The ops tests' fixtures: `cpu_loops` runs a test once with the compiled CPU loops (ops/lib/jit.py,
skipped where Numba is not installed) and once with the numpy passes they replace."""
from __future__ import annotations

import pytest

from nngpu.ops.lib import jit


@pytest.fixture(params=["compiled", "numpy"])
def cpu_loops(request, monkeypatch) -> str:
    monkeypatch.setenv("NNGPU_JIT", "1" if request.param == "compiled" else "0")
    if request.param == "compiled" and jit.kernels() is None:
        pytest.skip(jit.unavailable_reason() or "no compiled loops")
    return request.param
