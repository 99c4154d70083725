"""Compilation caching through the AIDL face, after AIDL CompilationCachingTests: a model saved
by prepareModel (cache files as ParcelFileDescriptors) is restored by prepareModelFromCache and
computes the same bytes; a wrong token, a corrupted or replaced file, a wrong number of files
and a passed deadline fail, with the callback hearing the status the call raises."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from nngpu.aidl import AidlDevice, PreparedModelCallback, from_core
from nngpu.backends import device_backends
from nngpu.hal.aidl import types as A
from nngpu.hal.types import ErrorStatus, ExecutionPreference, Priority
from nngpu.json_models import build_model, build_request

from tests.driver.test_compilation_cache import CASES, FAILED, case_of

TOKEN = bytes(range(32))


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("NNGPU_CACHE_DIR", str(tmp_path / "kernels"))


class Files:
    """One model-cache and one data-cache file, opened afresh (read-write) for each call."""

    def __init__(self, root: Path):
        self.paths = (root / "model", root / "data")
        self.opened: list[int] = []

    def fds(self, model: int = 1, data: int = 1) -> tuple[list[int], list[int]]:
        def open_(path: Path, count: int) -> list[int]:
            fds = [os.open(path, os.O_RDWR | os.O_CREAT, 0o600) for _ in range(count)]
            self.opened += fds
            return fds
        return open_(self.paths[0], model), open_(self.paths[1], data)

    def close(self) -> None:
        for fd in self.opened:
            os.close(fd)


@pytest.fixture
def files(tmp_path):
    f = Files(tmp_path)
    yield f
    f.close()


def _save(device: AidlDevice, case, fds, token=TOKEN):
    cb = PreparedModelCallback()
    device.prepareModel(from_core.model(build_model(case, False)), ExecutionPreference.FAST_SINGLE_ANSWER,
                        Priority.MEDIUM, A.NO_TIME, *fds, token, cb)
    status, prepared = cb.get(120)
    assert status == ErrorStatus.NONE
    return prepared


def _restore(device: AidlDevice, fds, token=TOKEN, deadline=A.NO_TIME):
    """(status, prepared model): the status the call raised, or the callback's."""
    cb = PreparedModelCallback()
    try:
        device.prepareModelFromCache(deadline, *fds, token, cb)
    except A.ServiceSpecificError as e:
        assert cb.get(5) == (e.status, None) and cb.notify_count == 1
        return e.status, None
    return cb.get(120)


def _outputs(prepared, case) -> bytes:
    ex = build_request(case)
    assert prepared.executeSynchronously(from_core.request(ex.request), False, A.NO_TIME, A.NO_TIME).outputSufficientSize
    return bytes(ex.output_pool.map())


@pytest.mark.parametrize("backend", ["numpy", *device_backends()])
@pytest.mark.parametrize("kind", sorted(CASES))
def test_save_and_retrieve(backend, kind, files):
    device, case = AidlDevice(backend=backend), case_of(kind)
    files_needed = device.getNumberOfCacheFilesNeeded()
    saved = _save(device, case, files.fds(files_needed.numModelCache, files_needed.numDataCache))
    status, restored = _restore(device, files.fds())
    assert status == ErrorStatus.NONE
    assert _outputs(restored, case) == _outputs(saved, case)


def test_wrong_token_corruption_and_counts_fail(files):
    device, case = AidlDevice(backend="numpy"), case_of("float32")
    _save(device, case, files.fds())
    assert _restore(device, files.fds(), token=bytes(32))[0] in FAILED
    assert _restore(device, files.fds(model=2))[0] in FAILED
    assert _restore(device, files.fds(data=0))[0] in FAILED
    with pytest.raises(A.ServiceSpecificError) as e:
        device.prepareModelFromCache(A.NO_TIME, *files.fds(), b"short", PreparedModelCallback())
    assert e.value.status == ErrorStatus.INVALID_ARGUMENT
    status, _ = _restore(device, files.fds(), deadline=0)
    assert status in (ErrorStatus.MISSED_DEADLINE_PERSISTENT, ErrorStatus.MISSED_DEADLINE_TRANSIENT)
    model = files.paths[0]
    raw = bytearray(model.read_bytes())
    raw[len(raw) // 2] ^= 0x10
    model.write_bytes(bytes(raw))
    assert _restore(device, files.fds())[0] in FAILED
