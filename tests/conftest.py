"""Shared fixtures: the bundled corpus, the --full-cts switch, a numpy device."""
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

