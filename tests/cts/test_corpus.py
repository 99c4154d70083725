"""The conformance corpus through the driver: a deterministic sample by default (about one case
in eight, sync path; one in thirty-two also async), every case on every path with --full-cts."""
from __future__ import annotations

import zlib
from pathlib import Path

import pytest

from nngpu.cts.loader import load_cases
from nngpu.cts.runner import run_case

BUNDLED_CORPUS = Path(__file__).resolve().parents[1] / "data" / "nnapi-cts"

SAMPLE_EVERY = 8
ASYNC_EVERY = 32


def _bucket(name: str) -> int:
    return zlib.crc32(name.encode())


def _params(full: bool):
    for case in load_cases(BUNDLED_CORPUS):
        b = _bucket(case.version + case.name)
        if full:
            paths = ("sync", "async", "burst")
        elif b % SAMPLE_EVERY == 0:
            paths = ("sync", "async") if b % ASYNC_EVERY == 0 else ("sync",)
        else:
            continue
        yield pytest.param(case, paths, id=f"{case.version}/{case.name}")


def pytest_generate_tests(metafunc):
    if "cts_case" in metafunc.fixturenames:
        full = metafunc.config.getoption("--full-cts")
        metafunc.parametrize("cts_case,paths", list(_params(full)))


def test_corpus_case(device, cts_case, paths):
    if "burst" in paths:
        try:
            import nngpu.burst  # noqa: F401
        except ImportError:
            paths = tuple(p for p in paths if p != "burst")
    records = run_case(device, "numpy", cts_case, paths)
    failed = [f"{r.path}: {r.detail}" for r in records if r.result == "failed"]
    assert not failed, "; ".join(failed)
    skipped = [r for r in records if r.result == "skipped"]
    if skipped:
        pytest.skip(skipped[0].detail)
