"""Every AIDL face method, with each argument in turn replaced by junk (None, a negative number,
a string, a float, an empty list, a bare object, bytes): it returns or raises
ServiceSpecificError, never another exception, and a refused prepare still notifies its
callback once."""
from __future__ import annotations

import numpy as np
import pytest

from nngpu.aidl import AidlDevice, PreparedModelCallback, from_core
from nngpu.hal.aidl import types as A
from nngpu.hal.types import ExecutionPreference, FusedActivationFunc, Priority
from nngpu.hal.types import OperationType as Op
from nngpu.memory import allocate_shared

from tests.compiler.model_builder import T, ModelBuilder

JUNK = [None, -2, "x", 1.5, [], object(), b"\x01"]


def _model() -> A.Model:
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, (2,))
    b.output(b.op(Op.ADD, [x, x, b.constant(T.INT32, FusedActivationFunc.RELU)], T.TENSOR_FLOAT32, (2,)))
    return from_core.model(b.build())


@pytest.fixture(scope="module")
def kit():
    device = AidlDevice(backend="numpy")
    cb = PreparedModelCallback()
    device.prepareModel(_model(), ExecutionPreference.FAST_SINGLE_ANSWER, Priority.MEDIUM, A.NO_TIME, [], [],
                        bytes(32), cb)
    prepared = cb.get(60)[1]
    pool = allocate_shared(16)
    pool.map()[:8] = np.ones(2, np.float32).tobytes()
    mem = from_core.memory(pool)
    request = A.Request([A.RequestArgument(False, A.DataLocation(0, 0, 8, 0), [])],
                        [A.RequestArgument(False, A.DataLocation(0, 8, 8, 0), [])], [A.RequestMemoryPool(pool=mem)])
    buffer = device.allocate(A.BufferDesc([2]), [A.IPreparedModelParcel(prepared)], [A.BufferRole(0, 0, 1.0)], []).buffer
    return device, prepared, request, mem, buffer, pool


def _calls(kit):
    device, prepared, request, mem, buffer, _ = kit
    cfg = A.ExecutionConfig()
    burst = prepared.configureExecutionBurst()
    execution = prepared.createReusableExecution(request, cfg)
    cb = PreparedModelCallback
    return {
        "getSupportedOperations": (device.getSupportedOperations, [_model()]),
        "prepareModel": (device.prepareModel, [_model(), ExecutionPreference.FAST_SINGLE_ANSWER, Priority.LOW,
                                               A.NO_TIME, [], [], bytes(32), cb()]),
        "prepareModelWithConfig": (device.prepareModelWithConfig, [_model(), A.PrepareModelConfig(), cb()]),
        "prepareModelFromCache": (device.prepareModelFromCache, [A.NO_TIME, [], [], bytes(32), cb()]),
        "allocate": (device.allocate, [A.BufferDesc([2]), [A.IPreparedModelParcel(prepared)],
                                       [A.BufferRole(0, 0, 1.0)], []]),
        "executeSynchronously": (prepared.executeSynchronously, [request, False, A.NO_TIME, A.NO_TIME]),
        "executeSynchronouslyWithConfig": (prepared.executeSynchronouslyWithConfig, [request, cfg, A.NO_TIME]),
        "executeFenced": (prepared.executeFenced, [request, [], False, A.NO_TIME, A.NO_TIME, A.NO_TIME]),
        "executeFencedWithConfig": (prepared.executeFencedWithConfig, [request, [], cfg, A.NO_TIME, A.NO_TIME]),
        "createReusableExecution": (prepared.createReusableExecution, [request, cfg]),
        "IExecution.executeSynchronously": (execution.executeSynchronously, [A.NO_TIME]),
        "IExecution.executeFenced": (execution.executeFenced, [[], A.NO_TIME, A.NO_TIME]),
        "IBurst.executeSynchronously": (burst.executeSynchronously, [request, [0], False, A.NO_TIME, A.NO_TIME]),
        "IBurst.executeSynchronouslyWithConfig": (burst.executeSynchronouslyWithConfig, [request, [0], cfg, A.NO_TIME]),
        "IBurst.releaseMemoryResource": (burst.releaseMemoryResource, [0]),
        "IBuffer.copyFrom": (buffer.copyFrom, [mem, [2]]),
        "IBuffer.copyTo": (buffer.copyTo, [mem]),
    }


def test_junk_arguments_raise_only_service_specific_errors(kit):
    unexpected = []
    tried = 0
    for name, (method, args) in _calls(kit).items():
        for position in range(len(args)):
            for junk in JUNK:
                mutated = [PreparedModelCallback() if isinstance(a, PreparedModelCallback) else a for a in args]
                mutated[position] = junk
                callbacks = [a for a in mutated if isinstance(a, PreparedModelCallback)]
                tried += 1
                try:
                    result = method(*mutated)
                except A.ServiceSpecificError as e:
                    if callbacks and (callbacks[0].get(5)[0] != e.status or callbacks[0].notify_count != 1):
                        unexpected.append(f"{name} argument {position} = {junk!r}: raised {e.status.name}, the "
                                          f"callback heard {callbacks[0].status.name} {callbacks[0].notify_count}x")
                    continue
                except Exception as e:
                    unexpected.append(f"{name} argument {position} = {junk!r}: {type(e).__name__}: {e}")
                    continue
                fence = getattr(result, "syncFence", None)
                if isinstance(fence, int):
                    import os
                    os.close(fence)
    assert tried > 300
    assert not unexpected, f"{len(unexpected)} of {tried}:\n" + "\n".join(unexpected[:30])
