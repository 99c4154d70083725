"""relaxComputationFloat32toFloat16 lets a driver compute float32 at float16 range and precision;
preparing a relaxed model logs what the backend computes in float16 and why the rest stays
float32 (as the spec permits): PoCL, say, has no float16 arithmetic. A model that is not relaxed
logs nothing of it."""
from __future__ import annotations

import logging

import numpy as np
import pytest

from nngpu.backends import device_backends
from nngpu.driver.callbacks import PreparedModelCallback
from nngpu.driver.device import Device
from nngpu.hal import ErrorStatus, ExecutionPreference
from nngpu.hal import OperandType as T
from nngpu.hal import OperationType as Op
from nngpu.testing import output, scalar, single_op_model, tensor

BACKENDS = ["numpy"] + [b for b in ("opencl",) if b in device_backends()]


def _prepare(device: Device, relaxed: bool) -> None:
    a = np.zeros((2, 3), np.float32)
    model = single_op_model(Op.ADD, [tensor(T.TENSOR_FLOAT32, a), tensor(T.TENSOR_FLOAT32, a), scalar(T.INT32, 0)],
                            [output(T.TENSOR_FLOAT32, [2, 3])], relaxed=relaxed)
    cb = PreparedModelCallback()
    assert device.prepareModel_1_1(model, ExecutionPreference.FAST_SINGLE_ANSWER, cb) == ErrorStatus.NONE
    assert cb.wait(60) and cb.status == ErrorStatus.NONE


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_relaxed_model_says_what_it_computes_in_float16(backend, caplog):
    device = Device(backend)
    with caplog.at_level(logging.INFO, logger="nngpu.device"):
        _prepare(device, relaxed=False)
        assert not [r for r in caplog.records if "relaxComputationFloat32toFloat16" in r.getMessage()]
        _prepare(device, relaxed=True)
    lines = [r.getMessage() for r in caplog.records if "relaxComputationFloat32toFloat16" in r.getMessage()]
    assert lines == [f"relaxComputationFloat32toFloat16 on {backend}: {device.backend.relaxed_precision()}"]
    if backend == "opencl" and "cl_khr_fp16" not in device.backend.device.extensions.split():   # PoCL
        assert lines[0].endswith("all float32: a CPU device, with no float16 arithmetic (no cl_khr_fp16), whose "
                                 "caches hold the temporaries: float16 storage would only add conversions")
