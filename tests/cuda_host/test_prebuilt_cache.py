"""`nngpu cache build` (issue 22, part 8): the CUDA units it compiles with NVRTC, where no GPU
is, are exactly the units a device plan in the CUDA dialect compiles for the same execution
(the real Plan, on the host CUDA backend), each under the key a CUDA device of that
architecture looks up: a GPU machine given the folder compiles nothing."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from nngpu.backends.base import cache_key, entry_path
from nngpu.backends.cuda import CudaBackend, unit_cache_key
from nngpu.cli import main
from nngpu.cli.common import DEMO_MODEL
from nngpu.json_models import build_model, case_inputs, load_file

from .host_backend import HostCudaBackend
from .run import run_on_host_cuda

pytest.importorskip("cupy", reason="CuPy + NVRTC (extra 'cuda') are not installed")
pytestmark = pytest.mark.skipif(not shutil.which("g++"), reason="no g++ on this machine")

CORPUS = Path(__file__).resolve().parents[1] / "data" / "nnapi-cts"
ARCH = "sm_90"


class RecordingHostBackend(HostCudaBackend):
    """The host CUDA backend, noting every unit source the plan compiles."""

    def __init__(self) -> None:
        super().__init__()
        self.sources: list[str] = []

    def compile(self, source: str, names: list[str]):
        self.sources.append(source)
        return super().compile(source, names)


def _units_a_plan_compiles(model, inputs) -> list[str]:
    backend = RecordingHostBackend()
    run_on_host_cuda(model, inputs, backend)
    return backend.sources


def test_the_key_is_the_one_a_cuda_device_of_that_architecture_looks_up():
    device = object.__new__(CudaBackend)   # what CudaBackend.__init__ sets from the GPU
    device.arch = ARCH
    assert unit_cache_key(ARCH, "src") == cache_key(device.name, device.cache_identity(), "src")


def test_a_prebuilt_cache_holds_every_unit_a_plan_compiles(monkeypatch, tmp_path, capsys):
    monkeypatch.setenv("NNGPU_CACHE_DIR", str(tmp_path))
    pattern = "bbox_graph_zero_sized"   # value-dependent: later segments decided at run time
    assert main(["cache", "build", "--arch", ARCH, str(DEMO_MODEL), "--corpus", str(CORPUS), "-k", pattern]) == 0
    out = capsys.readouterr().out
    assert "demo_cnn.json: units 1 compiled" in out
    prebuilt = sorted(p.name for p in tmp_path.glob("*.bin"))
    cases = [c for c in load_file(CORPUS / "V1_2" / "bbox_graph.json.gz") if pattern in c.name]
    from nngpu.named_model import load_model

    demo = load_model(DEMO_MODEL)
    runs = [(demo.model, demo.example_inputs)] + [(build_model(c, not c.needs_1_3()), case_inputs(c)) for c in cases]
    compiled = set()
    for model, inputs in runs:
        sources = _units_a_plan_compiles(model, inputs)
        assert sources, "the plan compiled nothing"
        for source in sources:
            entry = entry_path(unit_cache_key(ARCH, source))
            assert entry.is_file(), "a unit the plan compiles is missing from the prebuilt cache"
            assert entry.read_bytes()[:4] == b"\x7fELF"   # a cubin
            compiled.add(entry.name)
    assert prebuilt == sorted(compiled)   # nothing else
    assert main(["cache", "build", "--arch", ARCH, str(DEMO_MODEL)]) == 0
    assert "units 0 compiled, 1 already cached" in capsys.readouterr().out


@pytest.mark.parametrize("argv, message", [
    (["--backend", "opencl", "m.json"], "only cuda kernels are built ahead"),
    (["--arch", "sm_x"], "is not a CUDA architecture"),
    (["--arch", "sm_12"], "NVRTC cannot compile for sm_12"),
    ([], "needs MODEL paths or --corpus DIR"),
    (["-k", "add", "m.json"], "-k selects corpus cases"),
    (["--corpus", "/no/such/folder"], "no such folder"),
    (["--jobs", "0", "m.json"], "at least 1"),
])
def test_bad_arguments_are_one_line_and_exit_2(argv, message, capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("NNGPU_CACHE_DIR", str(tmp_path))
    if argv and argv[0] == "--arch":
        argv = argv + [str(DEMO_MODEL)]
    assert main(["cache", "build", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("nngpu cache: ") and message in err[0], err
