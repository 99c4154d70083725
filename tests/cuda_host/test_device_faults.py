"""A sticky device fault (an illegal address, a device lost) on the host CUDA backend, injected
at a kernel launch: the execution answers DEVICE_UNAVAILABLE, so does every later call on that
Device (executions, prepares, its status OFFLINE) without touching the device again, and a new
Device recovers; `nngpu serve` makes the new one itself."""
from __future__ import annotations

import shutil
import socket
import tempfile
import threading
from pathlib import Path

import numpy as np
import pytest

import nngpu
import nngpu.backends
from nngpu.driver.callbacks import PreparedModelCallback
from nngpu.driver.device import Device
from nngpu.hal import OperandType as T
from nngpu.hal.types import DeviceStatus, ErrorStatus, ExecutionPreference, OperationType as Op
from nngpu.service.device_keeper import DeviceKeeper
from nngpu.service.listen import Listener
from nngpu.service.process import accept_loop
from nngpu.testing import output, run_model, scalar, single_op_model, tensor

from .host_backend import HostCudaBackend

pytestmark = pytest.mark.skipif(not shutil.which("g++"), reason="no g++ on this machine")


class IllegalAddress(RuntimeError):
    """What CuPy raises as cudaErrorIllegalAddress, for the test backend."""


class Fault:
    armed = False


class FaultyHostBackend(HostCudaBackend):
    """The host CUDA backend whose launches fail, stickily, once the fault is armed."""

    fault = Fault   # shared by the device's backend and its plans' queues

    def launch(self, kernel, global_size: int, args: list) -> None:
        if self.fault.armed:
            raise IllegalAddress("an illegal memory access was encountered")
        super().launch(kernel, global_size, args)

    def is_sticky(self, error: BaseException) -> bool:
        return isinstance(error, IllegalAddress)


@pytest.fixture
def faulty(monkeypatch):
    Fault.armed = False
    monkeypatch.setattr(nngpu.backends, "create", lambda name: FaultyHostBackend())
    yield Fault
    Fault.armed = False


def _model():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    return single_op_model(Op.ADD, [tensor(T.TENSOR_FLOAT32, x), tensor(T.TENSOR_FLOAT32, x), scalar(T.INT32, 1)],
                           [output(T.TENSOR_FLOAT32, [2, 3])]), [x, -x]


def test_a_sticky_fault_makes_the_device_unavailable_until_a_new_one(faulty):
    model, inputs = _model()
    device = Device("cuda")
    assert run_model(model, inputs, [24], device).status == ErrorStatus.NONE
    faulty.armed = True
    assert run_model(model, inputs, [24], device).status == ErrorStatus.DEVICE_UNAVAILABLE
    faulty.armed = False   # the context stays lost: nothing runs on it again
    assert run_model(model, inputs, [24], device).status == ErrorStatus.DEVICE_UNAVAILABLE
    assert device.getStatus() == DeviceStatus.OFFLINE
    cb = PreparedModelCallback()
    assert device.prepareModel_1_2(model, ExecutionPreference.FAST_SINGLE_ANSWER, [], [], bytes(32), cb) \
        == ErrorStatus.DEVICE_UNAVAILABLE
    assert cb.get(10)[0] == ErrorStatus.DEVICE_UNAVAILABLE and "lost" in cb.reason
    fresh = Device("cuda")
    assert fresh.getStatus() == DeviceStatus.AVAILABLE
    result = run_model(model, inputs, [24], fresh)
    assert result.status == ErrorStatus.NONE
    np.testing.assert_array_equal(result.outputs[0], np.zeros((2, 3), np.float32))   # relu(x - x)


def test_an_ordinary_failure_leaves_the_device_available(faulty, monkeypatch):
    """An error that is not sticky is GENERAL_FAILURE and the device keeps serving."""
    model, inputs = _model()
    device = Device("cuda")
    assert run_model(model, inputs, [24], device).status == ErrorStatus.NONE
    monkeypatch.setattr(FaultyHostBackend, "is_sticky", lambda self, e: False)
    faulty.armed = True
    assert run_model(model, inputs, [24], device).status == ErrorStatus.GENERAL_FAILURE
    faulty.armed = False
    assert device.getStatus() == DeviceStatus.AVAILABLE
    assert run_model(model, inputs, [24], device).status == ErrorStatus.NONE


def test_the_service_serves_on_a_new_device_after_a_fault(faulty, tmp_path_factory):
    """`nngpu serve` (its accept loop over a DeviceKeeper): after a sticky fault, the lost
    device's prepared model answers DEVICE_UNAVAILABLE, and the client's next calls reach a new
    device, on the same connection: status AVAILABLE, a new prepare runs right."""
    model, inputs = _model()
    with tempfile.TemporaryDirectory(prefix="nngpu-f", dir="/tmp") as d:   # a short socket path
        listener = Listener(Path(d) / "s.sock", strict_dir=False)
        keeper = DeviceKeeper(lambda: Device("cuda"))
        loop = threading.Thread(target=accept_loop, args=(listener.sock, keeper), daemon=True)
        loop.start()
        try:
            with nngpu.connect(str(listener.path)) as remote:
                assert run_model(model, inputs, [24], remote).status == ErrorStatus.NONE
                lost = keeper.current()
                faulty.armed = True
                assert run_model(model, inputs, [24], remote).status == ErrorStatus.DEVICE_UNAVAILABLE
                faulty.armed = False
                assert remote.getStatus() == DeviceStatus.AVAILABLE   # a new device answers
                assert keeper.current() is not lost
                result = run_model(model, inputs, [24], remote)
                assert result.status == ErrorStatus.NONE
                np.testing.assert_array_equal(result.outputs[0], np.zeros((2, 3), np.float32))
        finally:
            listener.sock.shutdown(socket.SHUT_RDWR)   # wakes the accept loop, which ends once closed
            listener.close()
            loop.join(10)
