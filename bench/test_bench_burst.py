"""Latency of one small execution (ADD of two 1x1000 float32 tensors) on each path:
executeSynchronously, execute_1_2 + callback, a burst in process, a burst to another process.

Run explicitly: `pytest bench` (the default `pytest` run collects tests/ only)."""
import numpy as np
import pytest

from nngpu.burst import ExecutionBurstController
from nngpu.driver.callbacks import ExecutionCallback, PreparedModelCallback
from nngpu.driver.device import Device
from nngpu.hal.types import (
    DataLocation,
    ErrorStatus,
    ExecutionPreference,
    MeasureTiming,
    OperandType as T,
    OperationType as Op,
    Request,
    RequestArgument,
)
from nngpu.memory import allocate_shared
from nngpu.testing import output, scalar, single_op_model, tensor

pytestmark = pytest.mark.benchmark(group="burst", min_rounds=200, warmup=True)

N = 1000
A = np.linspace(0, 1, N, dtype=np.float32).reshape(1, N)
B = np.full((1, N), 2.0, np.float32)


@pytest.fixture(scope="module")
def model():
    return single_op_model(Op.ADD, [tensor(T.TENSOR_FLOAT32, A), tensor(T.TENSOR_FLOAT32, B), scalar(T.INT32, 0)],
                           [output(T.TENSOR_FLOAT32, [1, N])])


@pytest.fixture(scope="module")
def prepared(model):
    cb = PreparedModelCallback()
    assert Device("numpy").prepareModel_1_2(model, ExecutionPreference.FAST_SINGLE_ANSWER, [], [], bytes(32), cb) \
        == ErrorStatus.NONE
    cb.wait(60)
    return cb.prepared_model


@pytest.fixture(scope="module")
def request_():
    inp = allocate_shared(A.nbytes + B.nbytes)
    inp.map()[: A.nbytes] = A.tobytes()
    inp.map()[A.nbytes:] = B.tobytes()
    out = allocate_shared(A.nbytes)
    req = Request([RequestArgument(False, DataLocation(0, 0, A.nbytes), []),
                   RequestArgument(False, DataLocation(0, A.nbytes, B.nbytes), [])],
                  [RequestArgument(False, DataLocation(1, 0, A.nbytes), [])], [inp, out])
    yield req, out


def _check(result, out):
    assert result[0] == ErrorStatus.NONE
    np.testing.assert_array_equal(out.array(np.float32).reshape(1, N), A + B)


def test_execute_synchronously(benchmark, prepared, request_):
    req, out = request_
    _check(benchmark(prepared.executeSynchronously, req, MeasureTiming.NO), out)


def test_execute_1_2_callback(benchmark, prepared, request_):
    req, out = request_

    def run():
        cb = ExecutionCallback()
        prepared.execute_1_2(req, MeasureTiming.NO, cb)
        return cb.get(30)

    _check(benchmark(run), out)


def test_burst_in_process(benchmark, prepared, request_):
    req, out = request_
    with ExecutionBurstController.create(prepared) as burst:
        _check(benchmark(burst.compute, req, MeasureTiming.NO), out)


def test_burst_cross_process(benchmark, model, request_):
    from nngpu.service.burst_ipc import BurstService

    req, out = request_
    with BurstService.spawn() as service:
        status, remote = service.prepare(model)
        assert status == ErrorStatus.NONE
        with ExecutionBurstController.create(remote) as burst:
            _check(benchmark(burst.compute, req, MeasureTiming.NO), out)
