"""Shared fixtures: the bundled corpus, the --full-cts switch, a numpy device, and `cpu_loops`,
which runs a test once with the compiled CPU loops (ops/lib/jit.py, skipped where Numba is not
installed) and once with the numpy passes they replace. OpenCL compiler warnings are errors, and
every test draws from the test modules' random generators as if it ran first."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
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


# (module name, attribute) -> the state a module-level generator of the test package had when
# the first test of this process began: after every import, before any test drew from it
_GENERATOR_STATES: dict[tuple[str, str], dict] = {}
_generators: tuple[int, list[tuple[np.random.Generator, dict]]] = (-1, [])   # (len(sys.modules), each with its state)


@pytest.fixture(autouse=True)
def _generators_from_their_start() -> None:
    """Each test draws from the test modules' generators (`rng = np.random.default_rng(7)` at
    module level) from their first state: its data are the same whichever tests ran before it in
    its worker, so a failure reproduces alone (xdist orders tests differently from run to run)."""
    global _generators
    if _generators[0] != len(sys.modules):   # a test imported a module: look again
        found = []
        for name, module in list(sys.modules.items()):
            if name.startswith("tests.") and module is not None:
                for attr, value in list(vars(module).items()):
                    if isinstance(value, np.random.Generator):
                        _GENERATOR_STATES.setdefault((name, attr), value.bit_generator.state)
                        found.append((value, _GENERATOR_STATES[name, attr]))
        _generators = (len(sys.modules), found)
    for generator, state in _generators[1]:
        generator.bit_generator.state = state


@pytest.fixture(params=["compiled", "numpy"])
def cpu_loops(request, monkeypatch) -> str:
    from nngpu.ops.lib import jit

    monkeypatch.setenv("NNGPU_JIT", "1" if request.param == "compiled" else "0")
    if request.param == "compiled" and jit.kernels() is None:
        pytest.skip(jit.unavailable_reason() or "no compiled loops")
    return request.param
