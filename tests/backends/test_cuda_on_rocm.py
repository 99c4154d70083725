"""Issue 22, part 7: with a ROCm (HIP) build of CuPy, the CUDA backend says in one line why it
cannot run, `auto` never picks it, and `nngpu info` lists it as unavailable with that reason."""
from __future__ import annotations

import pytest

from nngpu import backends
from nngpu.backends import cuda
from nngpu.cli import main

cupy = pytest.importorskip("cupy", reason="CuPy (extra 'cuda') is not installed")


@pytest.fixture
def rocm_cupy(monkeypatch):
    """CuPy as a ROCm build on a machine with an AMD GPU would be."""
    monkeypatch.setattr(cupy.cuda.runtime, "is_hip", True)
    monkeypatch.setattr(cupy.cuda, "is_available", lambda: True)
    monkeypatch.delenv("NNGPU_BACKEND", raising=False)


def test_the_cuda_backend_refuses_hip_with_the_reason(rocm_cupy):
    assert not cuda.available()
    with pytest.raises(backends.BackendUnavailable) as e:
        backends.create("cuda")
    assert cuda.HIP_REASON in str(e.value) and "\n" not in str(e.value)


def test_auto_never_picks_cuda_on_hip(rocm_cupy):
    assert backends.resolve("auto") != "cuda"


def test_info_names_why(rocm_cupy, capsys):
    assert main(["info", "--backend", "numpy"]) == 0
    line = next(s for s in capsys.readouterr().out.splitlines() if s.strip().startswith("cuda"))
    assert "unavailable" in line and "ROCm (HIP) build" in line
