"""The conformance corpus through the driver. By default a deterministic sample: one case in
four on the sync path (one in sixteen on every path: also async, burst and fenced) on numpy, and
one in thirty-two on the sync and fenced paths of each device backend (OpenCL via PoCL here).
With --full-cts: every case, every path on numpy, and every case on the sync and fenced paths of
each device backend."""
from __future__ import annotations

import zlib
from pathlib import Path

import pytest

from nngpu.backends import device_backends
from nngpu.json_models import load_cases
from nngpu.cts.runner import PATHS, run_case

BUNDLED_CORPUS = Path(__file__).resolve().parents[1] / "data" / "nnapi-cts"
SAMPLE_EVERY, ALL_PATHS_EVERY, DEVICE_EVERY = 4, 16, 32


def in_device_sample(case) -> bool:
    """Whether a case is in the default sample of a device backend (one in DEVICE_EVERY)."""
    return (zlib.crc32((case.version + case.name).encode()) // 7) % DEVICE_EVERY == 0


def _params(full: bool):
    backends = device_backends()
    for case in load_cases(BUNDLED_CORPUS):
        b = zlib.crc32((case.version + case.name).encode())
        cid = f"{case.version}/{case.name}"
        if full or b % ALL_PATHS_EVERY == 0:
            yield pytest.param(case, "numpy", PATHS, id=f"numpy-all-{cid}")
        elif b % SAMPLE_EVERY == 0:
            yield pytest.param(case, "numpy", ("sync",), id=f"numpy-sync-{cid}")
        for backend in backends:
            if full or in_device_sample(case):
                yield pytest.param(case, backend, ("sync", "fenced"), id=f"{backend}-sync-fenced-{cid}")


def pytest_generate_tests(metafunc):
    if "cts_case" in metafunc.fixturenames:
        full = metafunc.config.getoption("--full-cts")
        metafunc.parametrize("cts_case,backend,paths", list(_params(full)))


_devices: dict = {}


def test_corpus_case(cts_case, backend, paths):
    from nngpu.driver.device import Device

    if backend not in _devices:
        _devices[backend] = Device(backend)
    device = _devices[backend]
    records = run_case(device, backend, cts_case, paths)
    failed = [f"{r.path}: {r.detail}" for r in records if r.result == "failed"]
    assert not failed, "; ".join(failed)
    skipped = [r for r in records if r.result == "skipped"]
    if skipped:
        pytest.skip(skipped[0].detail)



def test_the_default_sample_holds_every_spec_of_the_feature_level_folders():
    """The sample is by hash; the AIDL_V2 / AIDL_V3 folders (feature levels 6 and 7) must still
    have every spec file in it on numpy, and some cases on a device backend."""
    cases = [c for c in load_cases(BUNDLED_CORPUS) if c.version.startswith("AIDL")]
    assert len(cases) == 173
    on_numpy = {p.values[0].spec for p in _params(False) if p.values[1] == "numpy"}
    assert {c.spec for c in cases} <= on_numpy
    assert any(in_device_sample(c) for c in cases)
