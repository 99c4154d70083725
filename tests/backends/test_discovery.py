"""Backends are found by discovery: a module of nngpu/backends that declares a PROVIDER is a
backend (`auto`, `nngpu info`, `Device(name)`), and one that declares a Target besides is a
kernel target (`nngpu kernels --target`). A new backend touches that one module: here a toy one,
plain C for a host compiler, dropped into the package's path."""
from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

import nngpu
from nngpu import backends
from nngpu.cli import main

DEMO = Path(nngpu.__file__).resolve().parent / "data" / "demo_cnn.json"

TOY = '''
"""Plain C kernels, one call per output element (a C/OpenMP backend would start so)."""
from nngpu.backends.base import Provider
from nngpu.backends.numpy import NumpyBackend
from nngpu.compiler.render import CStyleRenderer
from nngpu.compiler.target import Target


class CRenderer(CStyleRenderer):
    kernel_prefix = "static void"
    buffer_qualifier = ""
    gid = "nn_index"
    long_type = "long long"
    long_suffix = "LL"

    def prelude(self, storages):
        return ["static long long nn_index;"]


class ToyBackend(NumpyBackend):
    name = "toy"
    description = "a toy backend (tests only)"


TARGET = Target("toy-c", CRenderer(), ".c", gemm_min_work=1 << 40)
PROVIDER = Provider("toy", ToyBackend, lambda: -1, targets=(TARGET,))
'''


@pytest.fixture
def toy(tmp_path, monkeypatch):
    (tmp_path / "toy.py").write_text(textwrap.dedent(TOY))
    monkeypatch.setattr(backends, "__path__", [*backends.__path__, str(tmp_path)])
    monkeypatch.delenv("NNGPU_BACKEND", raising=False)
    backends.providers.cache_clear()
    yield
    backends.providers.cache_clear()
    sys.modules.pop("nngpu.backends.toy", None)


def test_the_shipped_backends_are_found():
    assert backends.names() == ["numpy", "cuda", "opencl"]
    assert set(backends.targets()) == {"cuda", "opencl", "opencl-cpu"}
    assert backends.resolve("numpy") == "numpy"
    with pytest.raises(ValueError, match="choose from numpy, cuda, opencl or auto"):
        backends.resolve("metal")


def test_a_new_module_is_a_backend_and_a_target(toy, tmp_path, capsys):
    assert "toy" in backends.names() and backends.resolve("toy") == "toy"
    assert backends.resolve("auto") != "toy"            # it prefers itself below the reference
    assert backends.create("toy").description == "a toy backend (tests only)"
    assert "toy" in backends.device_backends()
    out = tmp_path / "kernels"
    assert main(["kernels", str(DEMO), "--target", "toy-c", "--out", str(out)]) == 0
    sources = sorted(out.glob("*.c"))
    assert sources, "no kernel written"
    text = sources[0].read_text()
    assert text.startswith("static long long nn_index;") and "static void nn_" in text and "__kernel" not in text
    assert main(["info", "--backend", "numpy"]) == 0
    assert any(line.strip().startswith("toy") for line in capsys.readouterr().out.splitlines())


def test_an_unknown_target_is_one_line(capsys):
    assert main(["kernels", str(DEMO), "--target", "metal"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("--target metal: no such kernel target; choose from cuda, opencl, opencl-cpu") and "\n" not in err
