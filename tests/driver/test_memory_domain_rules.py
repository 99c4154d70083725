"""MemoryDomainTests rules for device buffers in requests: one buffer cannot be both an input and
an output, or two outputs (several inputs may share it); request dimensions that conflict with
the buffer are INVALID_ARGUMENT, an output that at run time does not fit it GENERAL_FAILURE."""
from __future__ import annotations

import numpy as np
import pytest

from nngpu.backends import device_backends
from nngpu.driver.callbacks import PreparedModelCallback
from nngpu.driver.device import Device
from nngpu.hal import (BufferDesc, BufferRole, DataLocation, ErrorStatus, ExecutionPreference, MeasureTiming,
                       MemoryPool, OperandType as T, OperationType as Op, OptionalTimePoint,
                       OptionalTimeoutDuration, Request, RequestArgument)
from nngpu.memory import allocate_shared

from ..compiler.model_builder import ModelBuilder

SHAPE = [2, 3]
NBYTES = 24


@pytest.fixture(scope="module", params=["numpy", *device_backends()])
def dev(request):
    return Device(request.param)


def _prepare(dev, model):
    cb = PreparedModelCallback()
    dev.prepareModel_1_3(model, ExecutionPreference.FAST_SINGLE_ANSWER, 1, OptionalTimePoint(), [], [], bytes(32), cb)
    status, prepared = cb.get(60)
    assert status == ErrorStatus.NONE
    return prepared


def _two_relus(dims):
    b = ModelBuilder()
    for _ in range(2):
        b.output(b.op(Op.RELU, [b.input(T.TENSOR_FLOAT32, dims)], T.TENSOR_FLOAT32, dims))
    return b.build()


def _shared(pool: int, n: int = NBYTES, dims=()) -> RequestArgument:
    return RequestArgument(False, DataLocation(pool, 0, n), list(dims))


def _device(pool: int, dims=()) -> RequestArgument:
    return RequestArgument(False, DataLocation(pool, 0, 0), list(dims))


def _execute(prepared, inputs, outputs, pools) -> ErrorStatus:
    status, _, _ = prepared.executeSynchronously_1_3(Request(inputs, outputs, pools), MeasureTiming.NO,
                                                      OptionalTimePoint(), OptionalTimeoutDuration())
    return status


def _initialized(buffer) -> None:
    src = allocate_shared(NBYTES)
    src.map()[:] = np.arange(6, dtype=np.float32).tobytes()
    assert buffer.copyFrom(src, SHAPE) == ErrorStatus.NONE


def test_same_request_multiple_roles(dev):
    prepared = _prepare(dev, _two_relus(SHAPE))
    roles = [BufferRole(0, 0, 1.0), BufferRole(0, 1, 1.0)]
    status, buffer, token = dev.allocate(BufferDesc([]), [prepared], roles, roles)
    assert status == ErrorStatus.NONE
    pools = [allocate_shared(NBYTES), allocate_shared(NBYTES), MemoryPool(token=token)]
    _initialized(buffer)
    assert _execute(prepared, [_device(2), _shared(0)], [_device(2), _shared(1)], pools) == \
        ErrorStatus.INVALID_ARGUMENT  # an input and an output
    assert _execute(prepared, [_shared(0), _shared(1)], [_device(2), _device(2)], pools) == \
        ErrorStatus.INVALID_ARGUMENT  # two outputs
    _initialized(buffer)
    assert _execute(prepared, [_device(2), _device(2)], [_shared(0), _shared(1)], pools) == ErrorStatus.NONE
    np.testing.assert_array_equal(pools[1].array(np.float32, 0, 6), np.arange(6, dtype=np.float32))


def test_dimensions_against_the_buffer(dev):
    b = ModelBuilder()
    b.output(b.op(Op.RELU, [b.input(T.TENSOR_FLOAT32, [0, 3])], T.TENSOR_FLOAT32, [0, 3]))
    prepared = _prepare(dev, b.build())
    status, buffer, token = dev.allocate(BufferDesc([1, 3]), [prepared], [BufferRole(0, 0, 1.0)],
                                         [BufferRole(0, 0, 1.0)])
    assert status == ErrorStatus.NONE
    pools = [allocate_shared(NBYTES), MemoryPool(token=token)]
    src = allocate_shared(12)
    assert buffer.copyFrom(src, [1, 3]) == ErrorStatus.NONE
    assert _execute(prepared, [_device(1, SHAPE)], [_shared(0, dims=SHAPE)], pools) == ErrorStatus.INVALID_ARGUMENT
    assert _execute(prepared, [_shared(0, dims=SHAPE)], [_device(1, SHAPE)], pools) == ErrorStatus.INVALID_ARGUMENT
    # Only the execution shows that a [2, 3] output does not fit the [1, 3] buffer.
    assert _execute(prepared, [_shared(0, dims=SHAPE)], [_device(1)], pools) == ErrorStatus.GENERAL_FAILURE
    assert buffer.copyTo(allocate_shared(12)) == ErrorStatus.GENERAL_FAILURE  # left uninitialized
