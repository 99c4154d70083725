"""The execution paths: sync / async / 1.0, timing, dynamic shapes, insufficient outputs,
bad requests, concurrency, and never writing into an input pool."""
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from nngpu.driver.callbacks import ExecutionCallback, PreparedModelCallback
from nngpu.driver.device import Device
from nngpu.hal import (
    UINT64_MAX,
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

A = np.arange(6, dtype=np.float32).reshape(2, 3)
B = np.full((2, 3), 0.5, np.float32)


def prepare(out_dims=(2, 3)):
    model = single_op_model(Op.ADD, [tensor(T.TENSOR_FLOAT32, A), tensor(T.TENSOR_FLOAT32, B), scalar(T.INT32, 0)],
                            [output(T.TENSOR_FLOAT32, list(out_dims))])
    cb = PreparedModelCallback()
    Device("numpy").prepareModel_1_2(model, ExecutionPreference.FAST_SINGLE_ANSWER, [], [], bytes(32), cb)
    status, prepared = cb.get(30)
    assert status == ErrorStatus.NONE
    return prepared


def make_request(out_len=24, out_dims=()):
    inp = allocate_shared(48)
    inp.map()[:] = np.concatenate([A.ravel(), B.ravel()]).tobytes()
    out = allocate_shared(max(out_len, 1))
    req = Request([RequestArgument(False, DataLocation(0, 0, 24)), RequestArgument(False, DataLocation(0, 24, 24))],
                  [RequestArgument(False, DataLocation(1, 0, out_len), list(out_dims))], [inp, out])
    return req, inp, out


def result_of(out):
    return out.array(np.float32, 0, 6).reshape(2, 3)


@pytest.fixture(scope="module")
def prepared():
    return prepare()


def test_sync_with_timing(prepared):
    req, _, out = make_request()
    status, shapes, timing = prepared.executeSynchronously(req, MeasureTiming.YES)
    assert status == ErrorStatus.NONE
    assert [s.dimensions for s in shapes] == [[2, 3]] and shapes[0].isSufficient
    assert timing.timeOnDevice <= timing.timeInDriver < UINT64_MAX
    np.testing.assert_array_equal(result_of(out), A + B)


def test_sync_without_timing_reports_uint64_max(prepared):
    req, _, _ = make_request()
    status, _, timing = prepared.executeSynchronously(req, MeasureTiming.NO)
    assert status == ErrorStatus.NONE
    assert timing.timeOnDevice == UINT64_MAX and timing.timeInDriver == UINT64_MAX


def test_async_1_2_and_1_0(prepared):
    req, _, out = make_request()
    cb = ExecutionCallback()
    assert prepared.execute_1_2(req, MeasureTiming.YES, cb) == ErrorStatus.NONE
    status, shapes, timing = cb.get(30)
    assert status == ErrorStatus.NONE and shapes[0].dimensions == [2, 3] and cb.notify_count == 1
    np.testing.assert_array_equal(result_of(out), A + B)
    req, _, out = make_request()
    cb = ExecutionCallback()
    assert prepared.execute(req, cb) == ErrorStatus.NONE
    assert cb.get(30)[0] == ErrorStatus.NONE
    np.testing.assert_array_equal(result_of(out), A + B)


def test_dynamic_output_shape_is_resolved():
    prepared = prepare(out_dims=(0, 0))
    req, _, out = make_request()
    status, shapes, _ = prepared.executeSynchronously(req, MeasureTiming.NO)
    assert status == ErrorStatus.NONE and shapes[0].dimensions == [2, 3]
    np.testing.assert_array_equal(result_of(out), A + B)


def test_output_too_small_reports_its_shape_and_writes_nothing():
    prepared = prepare(out_dims=(0, 0))
    req, _, out = make_request(out_len=8)
    status, shapes, timing = prepared.executeSynchronously(req, MeasureTiming.YES)
    assert status == ErrorStatus.OUTPUT_INSUFFICIENT_SIZE
    assert shapes[0].dimensions == [2, 3] and shapes[0].isSufficient is False
    assert bytes(out.map()) == bytes(8)
    cb = ExecutionCallback()
    prepared.execute_1_2(req, MeasureTiming.NO, cb)
    status, shapes, _ = cb.get(30)
    assert status == ErrorStatus.OUTPUT_INSUFFICIENT_SIZE and shapes[0].isSufficient is False


@pytest.mark.parametrize("mutate", [
    lambda r: r.inputs.pop(),
    lambda r: r.outputs.pop(),
    lambda r: setattr(r.inputs[0].location, "poolIndex", 5),
    lambda r: setattr(r.inputs[1].location, "offset", 40),
    lambda r: setattr(r.outputs[0], "dimensions", [3, 2]),
    lambda r: setattr(r.inputs[0], "dimensions", [2, 3, 1]),
    lambda r: r.pools.__setitem__(0, "not a memory"),
], ids=["input-removed", "output-removed", "bad-pool", "out-of-pool", "bad-out-dims", "bad-in-rank", "bad-pool-object"])
def test_bad_requests_are_invalid_on_every_path(prepared, mutate):
    req, inp, _ = make_request()
    mutate(req)
    before = bytes(inp.map())
    status, shapes, timing = prepared.executeSynchronously(req, MeasureTiming.YES)
    assert (status, shapes) == (ErrorStatus.INVALID_ARGUMENT, [])
    assert timing.timeOnDevice == UINT64_MAX and timing.timeInDriver == UINT64_MAX
    cb = ExecutionCallback()
    assert prepared.execute_1_2(req, MeasureTiming.YES, cb) == ErrorStatus.INVALID_ARGUMENT
    status, shapes, timing = cb.get(30)
    assert (status, shapes, timing.timeInDriver) == (ErrorStatus.INVALID_ARGUMENT, [], UINT64_MAX)
    assert bytes(inp.map()) == before


def test_execute_without_callback_is_invalid(prepared):
    req, _, _ = make_request()
    assert prepared.execute_1_2(req, MeasureTiming.NO, None) == ErrorStatus.INVALID_ARGUMENT


def test_concurrent_executions_on_one_prepared_model(prepared):
    def one(k: int) -> bool:
        req, inp, out = make_request()
        scale = np.float32(k)
        inp.array(np.float32)[:6] = A.ravel() * scale
        status, _, _ = prepared.executeSynchronously(req, MeasureTiming.NO)
        return status == ErrorStatus.NONE and np.array_equal(result_of(out), A * scale + B)

    with ThreadPoolExecutor(8) as pool:
        assert all(pool.map(one, range(64)))


def test_input_pool_is_never_written(prepared):
    req, inp, _ = make_request()
    before = bytes(inp.map())
    prepared.executeSynchronously(req, MeasureTiming.NO)
    assert bytes(inp.map()) == before
