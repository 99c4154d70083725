"""What the driver refuses before execution, and the reason that goes with every failure: an
operation whose rank limit the model's constants exceed is unsupported at getSupportedOperations
and prepare (never a failure at every execution), and Session errors carry the driver's reason."""
from __future__ import annotations

import numpy as np
import pytest

from nngpu import Session
from nngpu.driver.callbacks import PreparedModelCallback
from nngpu.driver.device import Device
from nngpu.hal.types import ErrorStatus, ExecutionPreference, OperandType as T, OperationType as Op
from nngpu.session import ExecutionError
from nngpu.testing import output, single_op_model, tensor

from nngpu.backends import device_backends

X = np.arange(120, dtype=np.float32).reshape(2, 3, 4, 5)


def _reshape(shape: list[int], const: bool = True, out_dims: list[int] | None = None):
    return single_op_model(Op.RESHAPE, [tensor(T.TENSOR_FLOAT32, X), tensor(T.TENSOR_INT32, np.array(shape, np.int32),
                                                                           const=const)],
                           [output(T.TENSOR_FLOAT32, out_dims if out_dims is not None else [0] * len(shape))])


@pytest.mark.parametrize("backend", ["numpy", *device_backends()])
def test_a_constant_shape_above_rank_4_is_unsupported_with_its_reason(backend):
    device = Device(backend)
    model = _reshape([1, 2, 3, 4, 5])
    assert device.getSupportedOperations_1_2(model) == (ErrorStatus.NONE, [False])
    cb = PreparedModelCallback()
    assert device.prepareModel_1_2(model, ExecutionPreference.FAST_SINGLE_ANSWER, [], [], bytes(32), cb) == ErrorStatus.NONE
    assert cb.get(60)[0] == ErrorStatus.GENERAL_FAILURE
    assert cb.reason == "1 operation not supported: operation 0 (RESHAPE): output rank 5 above 4"
    with pytest.raises(ExecutionError, match=r"prepareModel failed: GENERAL_FAILURE: 1 operation not supported: "
                                             r"operation 0 \(RESHAPE\): output rank 5 above 4") as e:
        Session(model, backend)
    assert e.value.status == ErrorStatus.GENERAL_FAILURE and "output rank 5" in e.value.reason


@pytest.mark.parametrize("shape", [[2, 60], [120], [1, 2, 3, 20], [-1, 5]])
def test_shapes_within_rank_4_stay_supported(shape):
    assert Device("numpy").getSupportedOperations_1_2(_reshape(shape)) == (ErrorStatus.NONE, [True])


def test_a_shape_known_only_at_execution_is_supported_and_its_failure_has_a_reason():
    """Undecidable before execution: supported; the execution's failure names the operation."""
    model = _reshape([1, 2, 3, 4, 5], const=False, out_dims=[])
    device = Device("numpy")
    assert device.getSupportedOperations_1_2(model) == (ErrorStatus.NONE, [True])
    with Session(model, device) as s:
        feeds = dict(zip(s.input_names, [X, np.array([1, 2, 3, 4, 5], np.int32)]))
        with pytest.raises(ExecutionError, match=r"execution failed: \w+: .*output rank 5 above 4") as e:
            s.run(feeds)
        assert "rank 5" in e.value.reason


def test_a_large_constant_is_not_read_for_the_check(monkeypatch):
    """Only small constants (shape vectors, axes) are read: weights are never copied for it."""
    import nngpu.driver.support as support

    read = []
    monkeypatch.setattr(support, "read_constant", lambda m, o: read.append(o.location.length) or
                        __import__("nngpu.modelutil", fromlist=["read_constant"]).read_constant(m, o))
    w = np.ones((64, 64), np.float32)
    model = single_op_model(Op.FULLY_CONNECTED, [tensor(T.TENSOR_FLOAT32, np.ones((1, 64), np.float32)),
                                                 tensor(T.TENSOR_FLOAT32, w, const=True),
                                                 tensor(T.TENSOR_FLOAT32, np.zeros(64, np.float32), const=True),
                                                 tensor(T.INT32, np.int32(0))],
                            [output(T.TENSOR_FLOAT32, [1, 64])])
    assert Device("numpy").getSupportedOperations_1_2(model) == (ErrorStatus.NONE, [True])
    assert w.nbytes not in read and read
