"""The AIDL face of `nngpu serve`: nngpu.connect(path, hal="aidl") is an AIDL IDevice whose calls
go to the service as the HIDL 1.3 calls they map to (pools and fences as fds, the service's
bounds). A sample of the corpus passes on every AIDL path; bad arguments raise the statuses the
spec names, a reusable execution's bad request at its creation."""
from __future__ import annotations

import tempfile
import zlib
from pathlib import Path

import numpy as np
import pytest

import nngpu
from nngpu.aidl import from_core
from nngpu.cts.aidl_face import PATHS, AidlFace
from nngpu.cts.runner import run_case
from nngpu.hal.aidl import types as A
from nngpu.hal.types import ErrorStatus
from nngpu.json_models import load_cases
from nngpu.memory import allocate_shared

from tests.aidl.aidl_util import doubling_model, prepare, raised
from tests.cts.test_corpus import BUNDLED_CORPUS
from tests.service.conftest import Served

EVERY = 48


@pytest.fixture(scope="module")
def device():
    with tempfile.TemporaryDirectory(prefix="nngpu-t", dir="/tmp") as d:   # a short socket path
        served = Served(Path(d) / "s.sock")
        try:
            with nngpu.connect(served.path, hal="aidl") as aidl:
                yield aidl
        finally:
            served.stop()


def test_a_corpus_sample_on_every_aidl_path(device):
    cases = [c for c in load_cases(BUNDLED_CORPUS) if zlib.crc32((c.version + c.name).encode()) % EVERY == 0
             or "constant_reference" in c.name]
    records = [r for c in cases for r in run_case(device, "numpy", c, PATHS, face=AidlFace)]
    failed = [f"{r.path} {r.version}/{r.name}: {r.detail}" for r in records if r.result == "failed"]
    assert len(cases) > 80 and not failed, failed[:10]


def test_bad_arguments_through_the_service(device):
    prepared = prepare(device, doubling_model())
    pool = allocate_shared(16)
    pool.map()[:8] = np.array([1, 2], np.float32).tobytes()
    arg = [A.RequestArgument(False, A.DataLocation(0, 0, 8, 0), []), A.RequestArgument(False, A.DataLocation(0, 8, 8, 0), [])]
    request = A.Request(arg[:1], arg[1:], [A.RequestMemoryPool(pool=from_core.memory(pool))])
    assert prepared.executeSynchronously(request, True, A.NO_TIME, A.NO_TIME).outputSufficientSize
    assert list(pool.array(np.float32, 8, 2)) == [2, 4]
    assert raised(lambda: prepared.executeSynchronously(request, True, -3, A.NO_TIME)) == ErrorStatus.INVALID_ARGUMENT
    bad = A.Request(arg[:1], [A.RequestArgument(False, A.DataLocation(0, 8, 4, 0), [])], request.pools)
    small = prepared.executeSynchronously(bad, False, A.NO_TIME, A.NO_TIME)
    assert not small.outputSufficientSize and small.outputShapes[0].dimensions == [2]
    wrong = A.Request(arg, arg[1:], request.pools)                     # one input too many
    assert raised(lambda: prepared.createReusableExecution(wrong, A.ExecutionConfig())) == ErrorStatus.INVALID_ARGUMENT
    assert raised(lambda: prepared.executeSynchronously(wrong, False, A.NO_TIME, A.NO_TIME)) == \
        ErrorStatus.INVALID_ARGUMENT
    buffer = device.allocate(A.BufferDesc([2]), [A.IPreparedModelParcel(prepared)], [A.BufferRole(0, 0, 1.0)], [])
    source = allocate_shared(8)
    source.map()[:] = np.array([1, 2], np.float32).tobytes()
    buffer.buffer.copyFrom(from_core.memory(source), [2])
    from_buffer = A.Request([A.RequestArgument(False, A.DataLocation(1, 0, 0, 0), [])], arg[1:],
                            request.pools + [A.RequestMemoryPool(token=buffer.token)])
    pool.map()[8:] = bytes(8)
    assert prepared.executeSynchronously(from_buffer, False, A.NO_TIME, A.NO_TIME).outputSufficientSize
    assert list(pool.array(np.float32, 8, 2)) == [2, 4]
    burst = prepared.configureExecutionBurst()
    assert burst.executeSynchronously(request, [3], False, A.NO_TIME, A.NO_TIME).outputSufficientSize
    assert raised(lambda: burst.executeSynchronously(request, [], False, A.NO_TIME, A.NO_TIME)) == \
        ErrorStatus.INVALID_ARGUMENT


def test_connect_refuses_an_unknown_hal():
    with pytest.raises(ValueError, match="hidl or aidl"):
        nngpu.connect("/nowhere", hal="binder")
