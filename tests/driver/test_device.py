"""IDevice queries and preparation: capabilities, truthful support, callbacks exactly once."""
import numpy as np
import pytest

from nngpu.driver.callbacks import PreparedModelCallback
from nngpu.driver.device import Device
from nngpu.hal import (
    Capabilities,
    Capabilities_1_0,
    DeviceStatus,
    DeviceType,
    ErrorStatus,
    ExecutionPreference,
    OperandType as T,
    OperationType as Op,
)
from nngpu.testing import output, scalar, single_op_model, tensor


def add_model(t=T.TENSOR_FLOAT32):
    a = np.zeros((2, 3), np.float32)
    return single_op_model(Op.ADD, [tensor(t, a), tensor(t, a), scalar(T.INT32, 0)], [output(t, [2, 3])])


def test_capabilities_every_version():
    dev = Device("numpy")
    status, caps = dev.getCapabilities()
    assert status == ErrorStatus.NONE and isinstance(caps, Capabilities_1_0)
    assert caps.float32Performance.execTime > 0
    for query in (dev.getCapabilities_1_2, dev.getCapabilities_1_3):
        status, caps = query()
        types = [p.type for p in caps.operandPerformance]
        assert status == ErrorStatus.NONE and types == sorted(types) and len(set(types)) == len(types)
        assert all(p.info.execTime > 0 and p.info.powerUsage > 0 for p in caps.operandPerformance)
    caps = dev.getCapabilities_1_3()[1]
    assert isinstance(caps, Capabilities)
    assert T.SUBGRAPH not in [p.type for p in caps.operandPerformance]  # VTS: no data type
    assert all(p.execTime > 0 and p.powerUsage > 0 for p in (
        caps.ifPerformance, caps.whilePerformance, caps.relaxedFloat32toFloat16PerformanceScalar,
        caps.relaxedFloat32toFloat16PerformanceTensor))
    assert T.TENSOR_QUANT8_ASYMM_SIGNED in [p.type for p in dev.getCapabilities_1_3()[1].operandPerformance]
    assert T.TENSOR_QUANT8_ASYMM_SIGNED not in [p.type for p in dev.getCapabilities_1_2()[1].operandPerformance]


def test_device_queries():
    dev = Device("numpy")
    assert dev.getStatus() == DeviceStatus.AVAILABLE
    assert dev.getType() == (ErrorStatus.NONE, DeviceType.CPU)
    status, version = dev.getVersionString()
    assert status == ErrorStatus.NONE and "nngpu" in version
    assert dev.getSupportedExtensions() == (ErrorStatus.NONE, [])
    assert dev.getNumberOfCacheFilesNeeded() == (ErrorStatus.NONE, 1, 1)


def test_unknown_backend_is_an_error():
    with pytest.raises(ValueError):
        Device("no-such-backend")


def test_supported_operations_are_truthful():
    dev = Device("numpy")
    assert dev.getSupportedOperations_1_2(add_model()) == (ErrorStatus.NONE, [True])
    assert dev.getSupportedOperations(add_model()) == (ErrorStatus.NONE, [True])


def test_prepare_notifies_exactly_once():
    dev = Device("numpy")
    cb = PreparedModelCallback()
    assert dev.prepareModel_1_2(add_model(), ExecutionPreference.LOW_POWER, [], [], bytes(32), cb) == ErrorStatus.NONE
    status, prepared = cb.get(30)
    assert status == ErrorStatus.NONE and prepared is not None
    assert cb.notify_count == 1


def test_prepare_without_callback_is_invalid():
    assert Device("numpy").prepareModel_1_2(add_model(), ExecutionPreference.LOW_POWER, [], [], bytes(32), None) \
        == ErrorStatus.INVALID_ARGUMENT


def test_prepare_with_bad_preference_is_invalid_in_return_and_callback():
    cb = PreparedModelCallback()
    status = Device("numpy").prepareModel_1_2(add_model(), 7, [], [], bytes(32), cb)
    assert status == ErrorStatus.INVALID_ARGUMENT
    assert cb.get(5) == (ErrorStatus.INVALID_ARGUMENT, None)


def test_1_0_entry_point_rejects_a_1_2_model():
    dev = Device("numpy")
    model = add_model(T.TENSOR_FLOAT16)  # float16 ADD exists from HAL 1.2
    assert dev.getSupportedOperations_1_2(model) == (ErrorStatus.NONE, [True])
    assert dev.getSupportedOperations(model)[0] == ErrorStatus.INVALID_ARGUMENT
    cb = PreparedModelCallback()
    assert dev.prepareModel(model, cb) == ErrorStatus.INVALID_ARGUMENT
    assert cb.get(5) == (ErrorStatus.INVALID_ARGUMENT, None)


def test_prepare_from_cache_without_cache_files_is_invalid():
    cb = PreparedModelCallback()
    assert Device("numpy").prepareModelFromCache([], [], bytes(32), cb) == ErrorStatus.INVALID_ARGUMENT
    assert cb.get(5) == (ErrorStatus.INVALID_ARGUMENT, None)


def test_prepared_model_is_independent_of_later_model_changes():
    dev = Device("numpy")
    model = add_model()
    cb = PreparedModelCallback()
    dev.prepareModel_1_2(model, ExecutionPreference.LOW_POWER, [], [], bytes(32), cb)
    model.operations.clear()  # the caller may reuse its model object
    status, prepared = cb.get(30)
    assert status == ErrorStatus.NONE and len(prepared.model.main.operations) == 1
