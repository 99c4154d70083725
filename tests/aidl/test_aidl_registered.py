"""A reusable execution and an AIDL burst on a device plan: the request's memories are registered
with the backend once, each execution then moves its inputs and outputs device-side with no host
upload or download (counted), writes nothing outside its output region, and the registrations
are released with the execution, or the token; a synchronous execution registers its memories
too, for that call. In process, and through a service session (where the service registers the
client's memories)."""
from __future__ import annotations

import gc
import time

import numpy as np
import pytest

from nngpu.aidl import AidlDevice, PreparedModelCallback, from_core
from nngpu.backends import device_backends
from nngpu.driver.device import Device
from nngpu.hal.aidl import types as A
from nngpu.hal.types import ErrorStatus, ExecutionPreference, FusedActivationFunc, Priority
from nngpu.hal.types import OperationType as Op
from nngpu.memory import allocate_shared

from tests.compiler.model_builder import T, ModelBuilder
from tests.driver.test_burst_registered import count_calls
from tests.service.conftest import SessionPair

SENTINEL = 0xA5
X, Y = np.arange(6, dtype=np.float32), np.full(6, 0.5, np.float32)


@pytest.fixture(scope="module", params=[(b, served) for b in device_backends() for served in (False, True)],
                ids=lambda p: f"{p[0]}-{'served' if p[1] else 'in-process'}")   # none: the tests are skipped
def setting(request) -> tuple[str, bool]:
    """(backend, through a service session)."""
    return request.param


@pytest.fixture(scope="module")
def core(setting) -> Device:
    return Device(setting[0])


@pytest.fixture(scope="module")
def device(setting, core) -> AidlDevice:
    """The AIDL face over `core`: in process, or through a service session on it (a socketpair)."""
    if not setting[1]:
        yield AidlDevice(core)
        return
    pair = SessionPair(core)
    yield pair.aidl
    pair.close()


@pytest.fixture(scope="module")
def prepared(device):
    b = ModelBuilder()
    x, y = b.input(T.TENSOR_FLOAT32, (2, 3)), b.input(T.TENSOR_FLOAT32, (2, 3))
    b.output(b.op(Op.ADD, [x, y, b.constant(T.INT32, FusedActivationFunc.NONE)], T.TENSOR_FLOAT32, (2, 3)))
    cb = PreparedModelCallback()
    device.prepareModel(from_core.model(b.build()), ExecutionPreference.SUSTAINED_SPEED, Priority.MEDIUM, A.NO_TIME,
                        [], [], bytes(32), cb)
    status, model = cb.get(120)
    assert status == ErrorStatus.NONE
    return model


@pytest.fixture
def counts(core, monkeypatch) -> dict:
    return count_calls(core, monkeypatch)


def _request():
    """Inputs at unaligned offsets of one pool; the output mid-pool in one filled with SENTINEL."""
    inp, out = allocate_shared(4 + 48 + 12), allocate_shared(200)
    inp.map()[4:52] = np.concatenate([X, Y]).tobytes()
    out.map()[:] = bytes([SENTINEL]) * 200

    def arg(pool: int, offset: int) -> A.RequestArgument:
        return A.RequestArgument(False, A.DataLocation(pool, offset, 24, 0), [])
    pools = [A.RequestMemoryPool(pool=from_core.memory(p)) for p in (inp, out)]
    return A.Request([arg(0, 4), arg(0, 28)], [arg(1, 52)], pools), inp, out


def _check(inp, out, k: int) -> None:
    raw = np.frombuffer(out.map(), np.uint8)
    assert (raw[:52] == SENTINEL).all() and (raw[76:] == SENTINEL).all()
    np.testing.assert_array_equal(out.array(np.float32, 52, 6), X + k + Y)


def test_reusable_execution_moves_no_data_through_the_host(setting, prepared, counts):
    request, inp, out = _request()
    execution = prepared.createReusableExecution(request, A.ExecutionConfig())
    assert counts.pop("register_host") == 2
    for k in range(3):
        inp.map()[4:28] = (X + k).tobytes()     # the client rewrites its pool: the device sees it
        counts.clear()
        assert execution.executeSynchronously(A.NO_TIME).outputSufficientSize
        assert counts == {"copy": 3, "synchronize": 1}   # two inputs in, one output out, one wait
        _check(inp, out, k)
    del execution               # its memories go, and the device's next registration releases theirs
    gc.collect()
    counts.clear()
    end = time.monotonic() + 10.0                # a service hears of the collection a moment later
    while counts.get("release_host", 0) < 2 and time.monotonic() < end:
        assert prepared.executeSynchronously(request, False, A.NO_TIME, A.NO_TIME).outputSufficientSize
        gc.collect()
    assert counts.get("release_host", 0) == 2 or (setting[1] and counts.get("release_host", 0) >= 2)


def test_burst_tokens_move_no_data_through_the_host(prepared, counts):
    request, inp, out = _request()
    burst = prepared.configureExecutionBurst()
    for k in range(3):
        inp.map()[4:28] = (X + k).tobytes()
        assert burst.executeSynchronously(request, [1, 2], False, A.NO_TIME, A.NO_TIME).outputSufficientSize
        if k == 0:
            assert counts.pop("register_host") == 2
        counts.clear()
        _check(inp, out, k)
    assert burst.executeSynchronously(request, [1, 2], False, A.NO_TIME, A.NO_TIME).outputSufficientSize
    assert counts == {"copy": 3, "synchronize": 1}
    burst.releaseMemoryResource(1)
    assert counts.get("release_host") == 1


def test_sync_moves_no_data_through_the_host(setting, prepared, counts):
    """executeSynchronously too. Each AIDL call converts its memories anew (the driver dups every
    fd it is given), so each registers its memories, released once they are gone: in process at
    the next call (a service drops a call's memories a moment after it answers)."""
    request, inp, out = _request()
    released = 0
    for k in range(3):
        inp.map()[4:28] = (X + k).tobytes()
        assert prepared.executeSynchronously(request, False, A.NO_TIME, A.NO_TIME).outputSufficientSize
        assert counts.pop("copy") == 3 and counts.pop("register_host") == 2 and counts.pop("synchronize") == 1
        freed = counts.pop("release_host", 0)   # the first call may free what earlier tests left
        released += freed if k else 0
        assert not counts                       # no upload, no download
        _check(inp, out, k)
    assert released == 4 or setting[1]
