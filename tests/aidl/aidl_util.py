"""What the AIDL tests share."""
from __future__ import annotations

from typing import Callable

from nngpu.hal.aidl.types import ServiceSpecificError
from nngpu.hal.types import ErrorStatus


def raised(call: Callable[[], object]) -> ErrorStatus | None:
    """The ErrorStatus an AIDL call raised, None when it returned."""
    try:
        call()
    except ServiceSpecificError as e:
        return e.status
    return None


def prepare(device, model):
    """`model` (a core Model_1_3) prepared through an AIDL IDevice; the test fails if it is not."""
    from nngpu.aidl import PreparedModelCallback, from_core
    from nngpu.hal.aidl import types as A
    from nngpu.hal.types import ExecutionPreference, Priority

    cb = PreparedModelCallback()
    device.prepareModel(from_core.model(model), ExecutionPreference.FAST_SINGLE_ANSWER, Priority.MEDIUM, A.NO_TIME,
                        [], [], bytes(32), cb)
    status, prepared = cb.get(120)
    assert status == ErrorStatus.NONE, status
    return prepared


def doubling_model():
    """x + x of a float32 [2]."""
    from nngpu.hal.types import FusedActivationFunc, OperationType as Op
    from tests.compiler.model_builder import T, ModelBuilder

    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, (2,))
    b.output(b.op(Op.ADD, [x, x, b.constant(T.INT32, FusedActivationFunc.NONE)], T.TENSOR_FLOAT32, (2,)))
    return b.build()
