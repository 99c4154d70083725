"""The AIDL face's calls with good and bad arguments: each bad one raises ServiceSpecificError
with the ErrorStatus the AIDL comment blocks name (a refused prepare notifies its callback
first); OUTPUT_INSUFFICIENT_SIZE is a result; hints are checked, then ignored."""
from __future__ import annotations

import gc
from dataclasses import replace

import numpy as np
import pytest

from nngpu.aidl import AidlDevice, PreparedModelCallback, from_core
from nngpu.hal.aidl import types as A
from nngpu.hal.types import DeviceType, ErrorStatus, ExecutionPreference, FusedActivationFunc, Priority
from nngpu.hal.types import OperationType as Op
from nngpu.memory import allocate_shared

from tests.compiler.model_builder import T, ModelBuilder

F32 = T.TENSOR_FLOAT32
TOKEN = bytes(A.BYTE_SIZE_OF_CACHE_TOKEN)


def _add_model() -> A.Model:
    b = ModelBuilder()
    x, y = b.input(F32, (2, 3)), b.input(F32, (2, 3))
    b.output(b.op(Op.ADD, [x, y, b.constant(T.INT32, FusedActivationFunc.NONE)], F32, (2, 3)))
    return from_core.model(b.build())


@pytest.fixture(scope="module")
def device() -> AidlDevice:
    return AidlDevice(backend="numpy")


@pytest.fixture(scope="module")
def prepared(device):
    cb = PreparedModelCallback()
    device.prepareModel(_add_model(), ExecutionPreference.FAST_SINGLE_ANSWER, Priority.MEDIUM, A.NO_TIME, [], [],
                        TOKEN, cb)
    status, model = cb.get(60)
    assert status == ErrorStatus.NONE and model is not None
    return model


def _request(out_bytes: int = 24):
    """x = 0..5, y = 10 each; one pool in, one out."""
    pool_in, pool_out = allocate_shared(48), allocate_shared(out_bytes)
    pool_in.map()[:] = np.concatenate([np.arange(6, dtype=np.float32), np.full(6, 10, np.float32)]).tobytes()

    def arg(offset: int, length: int, pool: int) -> A.RequestArgument:
        return A.RequestArgument(False, A.DataLocation(pool, offset, length, 0), [])
    request = A.Request([arg(0, 24, 0), arg(24, 24, 0)], [arg(0, out_bytes, 1)],
                        [A.RequestMemoryPool(pool=from_core.memory(pool_in)),
                         A.RequestMemoryPool(pool=from_core.memory(pool_out))])
    return request, (pool_in, pool_out)


def _output(pools) -> np.ndarray:
    return np.frombuffer(bytes(pools[1].map()[:24]), np.float32)


def _status(call) -> ErrorStatus:
    with pytest.raises(A.ServiceSpecificError) as e:
        call()
    return e.value.status


WANT = np.arange(6, dtype=np.float32) + 10


def test_device_queries(device):
    assert device.getType() in (DeviceType.CPU, DeviceType.GPU, DeviceType.ACCELERATOR, DeviceType.OTHER)
    assert device.getVersionString()
    caps = device.getCapabilities()
    assert caps.operandPerformance and all(p.info.execTime > 0 for p in caps.operandPerformance)
    files = device.getNumberOfCacheFilesNeeded()
    assert 0 <= files.numModelCache <= A.MAX_NUMBER_OF_CACHE_FILES and 0 <= files.numDataCache <= A.MAX_NUMBER_OF_CACHE_FILES
    assert device.getSupportedExtensions() == []
    assert device.getSupportedOperations(_add_model()) == [True]


def test_executions_give_the_sum(prepared):
    request, pools = _request()
    result = prepared.executeSynchronously(request, True, A.NO_TIME, A.NO_TIME)
    assert result.outputSufficientSize and result.outputShapes[0].dimensions == [2, 3]
    assert result.timing.timeInDriverNs >= 0
    np.testing.assert_array_equal(_output(pools), WANT)
    config = A.ExecutionConfig(True, A.DEFAULT_LOOP_TIMEOUT_DURATION_NS,
                               [A.TokenValuePair((5 << 16) | 3, b"\x01")], [A.ExtensionNameAndPrefix("x.y", 5)])
    assert prepared.executeSynchronouslyWithConfig(request, config, A.NO_TIME).outputSufficientSize


def test_a_small_output_is_a_result_not_an_error(prepared):
    request, _ = _request(out_bytes=16)
    result = prepared.executeSynchronously(request, False, A.NO_TIME, A.NO_TIME)
    assert not result.outputSufficientSize
    assert result.outputShapes[0].dimensions == [2, 3] and not result.outputShapes[0].isSufficient


@pytest.mark.parametrize("bad", ["deadline", "loop", "loop-too-long", "measure", "hardware-buffer", "two-members",
                                 "padding", "pool-index", "token-pool", "closed-fd", "prot"])
def test_bad_execution_arguments_are_invalid(prepared, bad):
    request, _ = _request()
    deadline, loop, measure = A.NO_TIME, A.NO_TIME, False
    if bad == "deadline":
        deadline = -2
    elif bad == "loop":
        loop = -5
    elif bad == "loop-too-long":
        loop = A.MAXIMUM_LOOP_TIMEOUT_DURATION_NS + 1
    elif bad == "measure":
        measure = 1
    elif bad == "hardware-buffer":
        request.pools[0] = A.RequestMemoryPool(pool=A.Memory(hardwareBuffer=A.HardwareBuffer()))
    elif bad == "two-members":
        request.pools[0] = A.RequestMemoryPool(pool=request.pools[0].pool, token=1)
    elif bad == "padding":
        request.outputs[0].location.padding = 8          # 24 + 8 past the 24-byte pool
    elif bad == "pool-index":
        request.inputs[0].location.poolIndex = 7
    elif bad == "token-pool":
        request.pools[1] = A.RequestMemoryPool(token=12345)
    elif bad == "closed-fd":
        request.pools[1] = A.RequestMemoryPool(pool=A.Memory(ashmem=A.Ashmem(1 << 30, 24)))
    elif bad == "prot":
        pool = request.pools[1].pool.ashmem
        request.pools[1] = A.RequestMemoryPool(pool=A.Memory(mappableFile=A.MappableFile(24, 4, pool.fd, 0)))
    assert _status(lambda: prepared.executeSynchronously(request, measure, deadline, loop)) == \
        ErrorStatus.INVALID_ARGUMENT


def test_the_driver_keeps_its_own_fds(prepared):
    """A reusable execution outlives the client's own fds: the driver holds copies."""
    request, pools = _request()
    execution = prepared.createReusableExecution(request, A.ExecutionConfig())
    out = pools[1].map()
    for p in pools:
        p.close()
    assert execution.executeSynchronously(A.NO_TIME).outputSufficientSize
    np.testing.assert_array_equal(np.frombuffer(bytes(out[:24]), np.float32), WANT)


def test_a_converted_memory_keeps_its_fd_open(prepared):
    """from_core.memory's fd holds its Memory: dropping the Memory does not close the fd the
    parcelable names (whose number another file could otherwise take)."""
    request, pools = _request()
    out = A.RequestMemoryPool(pool=from_core.memory(allocate_shared(24)))
    held = out.pool.ashmem.fd.owner
    request.pools[1] = out
    del pools
    gc.collect()
    assert prepared.executeSynchronously(request, False, A.NO_TIME, A.NO_TIME).outputSufficientSize
    np.testing.assert_array_equal(held.array(np.float32, 0, 6), WANT)


def test_a_passed_deadline_is_missed(prepared):
    request, _ = _request()
    status = _status(lambda: prepared.executeSynchronously(request, False, 0, A.NO_TIME))
    assert status in (ErrorStatus.MISSED_DEADLINE_TRANSIENT, ErrorStatus.MISSED_DEADLINE_PERSISTENT)


@pytest.mark.parametrize("hints", [
    ([A.TokenValuePair(7 << 16, b"")], []),                                            # prefix not named
    ([A.TokenValuePair(-1, b"")], [A.ExtensionNameAndPrefix("a.b", 0x7FFF)]),          # sign bit
    ([A.TokenValuePair(1 << 16, b""), A.TokenValuePair(1 << 16, b"")], [A.ExtensionNameAndPrefix("a.b", 1)]),
    ([], [A.ExtensionNameAndPrefix("a.b", 1), A.ExtensionNameAndPrefix("a.b", 2)]),   # a name twice
    ([], [A.ExtensionNameAndPrefix("a.b", 1 << 15)]),                                   # prefix past 15 bits
])
def test_bad_hints_are_invalid(device, prepared, hints):
    pairs, names = hints
    request, _ = _request()
    config = A.ExecutionConfig(False, A.NO_TIME, pairs, names)
    assert _status(lambda: prepared.executeSynchronouslyWithConfig(request, config, A.NO_TIME)) == \
        ErrorStatus.INVALID_ARGUMENT
    cb = PreparedModelCallback()
    assert _status(lambda: device.prepareModelWithConfig(
        _add_model(), A.PrepareModelConfig(compilationHints=pairs, extensionNameToPrefix=names), cb)) == \
        ErrorStatus.INVALID_ARGUMENT
    assert cb.get(5)[0] == ErrorStatus.INVALID_ARGUMENT and cb.notify_count == 1


@pytest.mark.parametrize("bad", ["deadline", "token", "preference", "operand-padding", "operand-index"])
def test_bad_prepare_arguments_notify_then_raise(device, bad):
    model, deadline, token, preference = _add_model(), A.NO_TIME, TOKEN, ExecutionPreference.FAST_SINGLE_ANSWER
    if bad == "deadline":
        deadline = -7
    elif bad == "token":
        token = b"short"
    elif bad == "preference":
        preference = 99
    elif bad == "operand-padding":
        model.main.operands[2].location.padding = 4
    elif bad == "operand-index":
        model.main.operations[0].inputs[0] = 40
    cb = PreparedModelCallback()
    assert _status(lambda: device.prepareModel(model, preference, Priority.MEDIUM, deadline, [], [], token, cb)) == \
        ErrorStatus.INVALID_ARGUMENT
    assert cb.get(5) == (ErrorStatus.INVALID_ARGUMENT, None) and cb.notify_count == 1


def test_reusable_execution_checks_once_and_repeats(prepared):
    request, pools = _request()
    execution = prepared.createReusableExecution(request, A.ExecutionConfig())
    for _ in range(3):
        pools[1].map()[:] = bytes(24)
        assert execution.executeSynchronously(A.NO_TIME).outputSufficientSize
        np.testing.assert_array_equal(_output(pools), WANT)
    bad = replace(request, pools=request.pools[:1])
    assert _status(lambda: prepared.createReusableExecution(bad, A.ExecutionConfig())) == ErrorStatus.INVALID_ARGUMENT
    assert _status(lambda: execution.executeSynchronously(-3)) == ErrorStatus.INVALID_ARGUMENT


def test_burst_caches_identified_memories_until_released(prepared):
    burst = prepared.configureExecutionBurst()
    request, pools = _request()
    for _ in range(2):
        assert burst.executeSynchronously(request, [4, 9], False, A.NO_TIME, A.NO_TIME).outputSufficientSize
        np.testing.assert_array_equal(_output(pools), WANT)
    # The same token for a new memory: the burst takes the new one, not its stale mapping.
    request2, pools2 = _request()
    assert burst.executeSynchronously(request2, [4, 9], False, A.NO_TIME, A.NO_TIME).outputSufficientSize
    np.testing.assert_array_equal(_output(pools2), WANT)
    burst.releaseMemoryResource(4)
    assert _status(lambda: burst.releaseMemoryResource(-1)) == ErrorStatus.INVALID_ARGUMENT
    assert _status(lambda: burst.executeSynchronously(request, [4], False, A.NO_TIME, A.NO_TIME)) == \
        ErrorStatus.INVALID_ARGUMENT
    assert _status(lambda: burst.executeSynchronously(request, [4, -2], False, A.NO_TIME, A.NO_TIME)) == \
        ErrorStatus.INVALID_ARGUMENT


def test_device_buffer_round_trip_and_token_pool(device, prepared):
    result = device.allocate(A.BufferDesc([2, 3]), [A.IPreparedModelParcel(prepared)], [A.BufferRole(0, 0, 1.0)], [])
    assert result.token > 0
    source = allocate_shared(24)
    source.map()[:] = np.arange(6, dtype=np.float32).tobytes()
    result.buffer.copyFrom(from_core.memory(source), [2, 3])
    back = allocate_shared(24)
    result.buffer.copyTo(from_core.memory(back))
    assert bytes(back.map()) == bytes(source.map())
    assert _status(lambda: result.buffer.copyTo(A.Memory(hardwareBuffer=A.HardwareBuffer()))) == \
        ErrorStatus.INVALID_ARGUMENT
    request, pools = _request()
    request.pools.append(A.RequestMemoryPool(token=result.token))
    request.inputs[0] = A.RequestArgument(False, A.DataLocation(2, 0, 0, 0), [])
    assert prepared.executeSynchronously(request, False, A.NO_TIME, A.NO_TIME).outputSufficientSize
    np.testing.assert_array_equal(_output(pools), WANT)
    assert _status(lambda: device.allocate(A.BufferDesc([2, 3]), [], [A.BufferRole(0, 0, 1.0)], [])) == \
        ErrorStatus.INVALID_ARGUMENT
