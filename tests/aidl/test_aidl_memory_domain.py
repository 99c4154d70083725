"""Device memory through the AIDL face, after AIDL MemoryDomainTests: IDevice::allocate's role
and descriptor checks, IBuffer copyFrom / copyTo, and device buffers in requests (one buffer is
not an input and an output, or two outputs; dimensions that conflict with it are
INVALID_ARGUMENT; an output that does not fit it at run time GENERAL_FAILURE)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from nngpu.aidl import AidlDevice, PreparedModelCallback, from_core
from nngpu.backends import device_backends
from nngpu.hal.aidl import types as A
from nngpu.hal.types import ErrorStatus, ExecutionPreference, Priority
from nngpu.hal.types import OperandType as T
from nngpu.hal.types import OperationType as Op
from nngpu.memory import allocate_shared

from tests.aidl.aidl_util import raised
from tests.compiler.model_builder import ModelBuilder

SHAPE = [2, 3]
NBYTES = 24


@pytest.fixture(scope="module", params=["numpy", *device_backends()])
def device(request) -> AidlDevice:
    return AidlDevice(backend=request.param)


def _prepare(device: AidlDevice, dims=SHAPE, outputs: int = 1):
    b = ModelBuilder()
    for _ in range(outputs):
        b.output(b.op(Op.RELU, [b.input(T.TENSOR_FLOAT32, dims)], T.TENSOR_FLOAT32, dims))
    cb = PreparedModelCallback()
    device.prepareModel(from_core.model(b.build()), ExecutionPreference.FAST_SINGLE_ANSWER, Priority.MEDIUM,
                        A.NO_TIME, [], [], bytes(32), cb)
    status, prepared = cb.get(120)
    assert status == ErrorStatus.NONE
    return prepared


@pytest.fixture(scope="module")
def prepared(device):
    return _prepare(device)


def _status(call) -> ErrorStatus:
    return raised(call) or ErrorStatus.NONE


def _memory(pool) -> A.Memory:
    return from_core.memory(pool)


@pytest.mark.parametrize("case", ["no-roles", "bad-model-index", "bad-io-index", "zero-probability",
                                  "big-probability", "nan-probability", "same-role-twice", "foreign-prepared-model",
                                  "desc-dims-conflict", "desc-rank-conflict", "no-parcel"])
def test_allocate_rejects(device, prepared, case):
    roles_in, desc, models = [A.BufferRole(0, 0, 1.0)], A.BufferDesc([]), [A.IPreparedModelParcel(prepared)]
    if case == "no-roles":
        roles_in = []
    elif case == "bad-model-index":
        roles_in = [A.BufferRole(1, 0, 1.0)]
    elif case == "bad-io-index":
        roles_in = [A.BufferRole(0, 2, 1.0)]
    elif case == "zero-probability":
        roles_in = [A.BufferRole(0, 0, 0.0)]
    elif case == "big-probability":
        roles_in = [A.BufferRole(0, 0, 1.5)]
    elif case == "nan-probability":
        roles_in = [A.BufferRole(0, 0, math.nan)]
    elif case == "same-role-twice":
        roles_in = [A.BufferRole(0, 0, 1.0), A.BufferRole(0, 0, 0.5)]
    elif case == "foreign-prepared-model":
        models = [A.IPreparedModelParcel(_prepare(AidlDevice(backend="numpy")))]
    elif case == "desc-dims-conflict":
        desc = A.BufferDesc([2, 4])
    elif case == "desc-rank-conflict":
        desc = A.BufferDesc([2, 3, 1])
    elif case == "no-parcel":
        models = [prepared]
    assert _status(lambda: device.allocate(desc, models, roles_in, [])) == ErrorStatus.INVALID_ARGUMENT


def test_copies(device, prepared):
    result = device.allocate(A.BufferDesc([]), [A.IPreparedModelParcel(prepared)], [A.BufferRole(0, 0, 1.0)], [])
    buffer, dst, src = result.buffer, allocate_shared(NBYTES), allocate_shared(NBYTES)
    assert _status(lambda: buffer.copyTo(_memory(dst))) == ErrorStatus.GENERAL_FAILURE       # uninitialized
    src.array(np.float32)[:] = np.arange(6)
    buffer.copyFrom(_memory(src), [])
    buffer.copyTo(_memory(dst))
    assert list(dst.array(np.float32)) == list(range(6))
    small = allocate_shared(20)
    assert _status(lambda: buffer.copyTo(_memory(small))) == ErrorStatus.INVALID_ARGUMENT
    assert _status(lambda: buffer.copyFrom(_memory(small), [])) == ErrorStatus.INVALID_ARGUMENT
    assert _status(lambda: buffer.copyTo(_memory(dst))) == ErrorStatus.GENERAL_FAILURE      # a failed copyFrom
    assert _status(lambda: buffer.copyFrom(_memory(src), [3, 2])) == ErrorStatus.INVALID_ARGUMENT
    buffer.copyFrom(_memory(src), [2, 3])
    assert _status(lambda: buffer.copyFrom(A.Memory(hardwareBuffer=A.HardwareBuffer()), [])) == \
        ErrorStatus.INVALID_ARGUMENT


def _argument(pool: int, n: int = NBYTES, dims=()) -> A.RequestArgument:
    return A.RequestArgument(False, A.DataLocation(pool, 0, n, 0), list(dims))


def _execute(prepared, inputs, outputs, pools) -> ErrorStatus:
    return _status(lambda: prepared.executeSynchronously(A.Request(inputs, outputs, pools), False, A.NO_TIME,
                                                         A.NO_TIME))


def test_one_buffer_in_several_roles_of_a_request(device):
    prepared = _prepare(device, outputs=2)
    roles = [A.BufferRole(0, 0, 1.0), A.BufferRole(0, 1, 1.0)]
    result = device.allocate(A.BufferDesc([]), [A.IPreparedModelParcel(prepared)], roles, roles)
    shared = [allocate_shared(NBYTES), allocate_shared(NBYTES)]
    pools = [A.RequestMemoryPool(pool=_memory(p)) for p in shared] + [A.RequestMemoryPool(token=result.token)]
    source = allocate_shared(NBYTES)
    source.array(np.float32)[:] = np.arange(6)
    result.buffer.copyFrom(_memory(source), SHAPE)
    token = _argument(2, 0)
    assert _execute(prepared, [token, _argument(0)], [token, _argument(1)], pools) == ErrorStatus.INVALID_ARGUMENT
    assert _execute(prepared, [_argument(0), _argument(1)], [token, token], pools) == ErrorStatus.INVALID_ARGUMENT
    result.buffer.copyFrom(_memory(source), SHAPE)
    assert _execute(prepared, [token, token], [_argument(0), _argument(1)], pools) == ErrorStatus.NONE
    np.testing.assert_array_equal(shared[1].array(np.float32, 0, 6), np.arange(6, dtype=np.float32))


def test_dimensions_against_the_buffer(device):
    prepared = _prepare(device, dims=[0, 3])
    result = device.allocate(A.BufferDesc([1, 3]), [A.IPreparedModelParcel(prepared)], [A.BufferRole(0, 0, 1.0)],
                             [A.BufferRole(0, 0, 1.0)])
    shared = allocate_shared(NBYTES)
    pools = [A.RequestMemoryPool(pool=_memory(shared)), A.RequestMemoryPool(token=result.token)]
    row = allocate_shared(12)
    result.buffer.copyFrom(_memory(row), [1, 3])
    token = A.RequestArgument(False, A.DataLocation(1, 0, 0, 0), SHAPE)
    assert _execute(prepared, [token], [_argument(0, dims=SHAPE)], pools) == ErrorStatus.INVALID_ARGUMENT
    assert _execute(prepared, [_argument(0, dims=SHAPE)], [token], pools) == ErrorStatus.INVALID_ARGUMENT
    # Only the execution shows that a [2, 3] output does not fit the [1, 3] buffer.
    open_output = A.RequestArgument(False, A.DataLocation(1, 0, 0, 0), [])
    assert _execute(prepared, [_argument(0, dims=SHAPE)], [open_output], pools) == ErrorStatus.GENERAL_FAILURE
    assert _status(lambda: result.buffer.copyTo(_memory(row))) == ErrorStatus.GENERAL_FAILURE
