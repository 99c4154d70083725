"""Shared fixtures: the bundled corpus, the --full-cts switch, a numpy device, and `cpu_loops`,
which runs a test once with the compiled CPU loops (ops/lib/jit.py, skipped where Numba is not
installed) and once with the numpy passes they replace. OpenCL compiler warnings are errors."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("XDG_CACHE_HOME", str(Path(__file__).resolve().parent.parent / ".cache"))

BUNDLED_CORPUS = Path(__file__).resolve().parent / "data" / "nnapi-cts"


def pytest_addoption(parser):
    parser.addoption("--full-cts", action="store_true", default=False,
                     help="run the whole conformance corpus instead of the default sample")


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: long-running checks, selected by --full-cts")
    try:
        import pyopencl  # noqa: F401
    except ImportError:
        return
    # A kernel the OpenCL compiler has something to say about fails its test (a prepare then
    # reports GENERAL_FAILURE naming the warning), rather than passing with the message unread.
    config.addinivalue_line("filterwarnings", "error::pyopencl.CompilerWarning")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--full-cts"):
        return
    skip = pytest.mark.skip(reason="slow: run with --full-cts")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)


def pytest_terminal_summary(terminalreporter):
    from tests.cuda_host.summary import report  # here: xdist's controller loads only this conftest

    report(terminalreporter)


@pytest.fixture(scope="session")
def corpus_dir() -> Path:
    return BUNDLED_CORPUS


@pytest.fixture(scope="session")
def device():
    from nngpu.driver.device import Device

    return Device("numpy")



@pytest.fixture(params=["compiled", "numpy"])
def cpu_loops(request, monkeypatch) -> str:
    from nngpu.ops.lib import jit

    monkeypatch.setenv("NNGPU_JIT", "1" if request.param == "compiled" else "0")
    if request.param == "compiled" and jit.kernels() is None:
        pytest.skip(jit.unavailable_reason() or "no compiled loops")
    return request.param
