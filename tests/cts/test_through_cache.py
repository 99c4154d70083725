"""A sample of the corpus on prepared models restored from the compilation cache (prepareModel
saves, prepareModelFromCache restores, the restored model runs): one case in thirty-two on
numpy, one in sixty-four on each device backend; every case with --full-cts."""
from __future__ import annotations

import zlib

import pytest

from nngpu.backends import device_backends
from nngpu.cts.runner import run_case
from nngpu.cts.through_cache import ThroughCache
from nngpu.json_models import load_cases

from .test_corpus import BUNDLED_CORPUS

NUMPY_EVERY, DEVICE_EVERY = 32, 64


def _params(full: bool):
    for case in load_cases(BUNDLED_CORPUS):
        b = zlib.crc32((case.version + case.name).encode()) // 3
        cid = f"{case.version}/{case.name}"
        if full or b % NUMPY_EVERY == 0:
            yield pytest.param(case, "numpy", id=f"numpy-{cid}")
        for backend in device_backends():
            if full or b % DEVICE_EVERY == 1:
                yield pytest.param(case, backend, id=f"{backend}-{cid}")


def pytest_generate_tests(metafunc):
    if "cached_case" in metafunc.fixturenames:
        metafunc.parametrize("cached_case,backend", list(_params(metafunc.config.getoption("--full-cts"))))


_devices: dict = {}


def test_case_through_the_cache(cached_case, backend):
    from nngpu.driver.device import Device

    if backend not in _devices:
        _devices[backend] = ThroughCache(Device(backend))
    records = run_case(_devices[backend], backend, cached_case, ("sync",))
    failed = [r.detail for r in records if r.result == "failed"]
    assert not failed, "; ".join(failed)
    if records[0].result == "skipped":
        pytest.skip(records[0].detail)
