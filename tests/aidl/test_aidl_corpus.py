"""The conformance corpus through the AIDL face (nngpu.aidl over the driver core): by default
one case in sixteen on every AIDL path on numpy (sync, config, reusable, burst, fenced), and one
in sixty-four on sync and reusable on each device backend, and every case whose model has a
memory pool; every case with --full-cts."""
from __future__ import annotations

import zlib

import pytest

from nngpu.backends import device_backends
from nngpu.cts.aidl_face import PATHS, AidlFace
from nngpu.cts.runner import run_case
from nngpu.json_models import load_cases

from tests.cts.test_corpus import BUNDLED_CORPUS

NUMPY_EVERY, DEVICE_EVERY = 16, 64


def _params(full: bool):
    backends = device_backends()
    for case in load_cases(BUNDLED_CORPUS):
        b = zlib.crc32((case.version + case.name).encode()) // 3   # another sample than the HIDL one's
        cid = f"{case.version}/{case.name}"
        # Models with pools (CONSTANT_REFERENCE operands) always: their fds must outlive the call.
        if full or b % NUMPY_EVERY == 0 or "constant_reference" in case.name:
            yield pytest.param(case, "numpy", PATHS, id=f"numpy-{cid}")
        for backend in backends:
            if full or b % DEVICE_EVERY == 1:
                yield pytest.param(case, backend, ("sync", "reusable"), id=f"{backend}-{cid}")


def pytest_generate_tests(metafunc):
    if "aidl_case" in metafunc.fixturenames:
        metafunc.parametrize("aidl_case,backend,paths", list(_params(metafunc.config.getoption("--full-cts"))))


_devices: dict = {}


def test_aidl_corpus_case(aidl_case, backend, paths):
    from nngpu.aidl import AidlDevice

    if backend not in _devices:
        _devices[backend] = AidlDevice(backend=backend)
    records = run_case(_devices[backend], backend, aidl_case, paths, face=AidlFace)
    failed = [f"{r.path}: {r.detail}" for r in records if r.result == "failed"]
    assert not failed, "; ".join(failed)
    skipped = [r for r in records if r.result == "skipped"]
    if skipped:
        pytest.skip(skipped[0].detail)
