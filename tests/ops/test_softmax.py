"""SOFTMAX and LOG_SOFTMAX through the driver, against float formulas written out per slice."""
from __future__ import annotations

import math

import numpy as np
import pytest

from nngpu.runtime.interpreter import ExecutionError, GraphRunner
from nngpu.hal.types import ErrorStatus
from nngpu.hal.types import OperandType as T
from nngpu.hal.types import OperationType as Op
from nngpu.modelutil import as_model_1_3
from nngpu.ops.lib.dtypes import is_tensor
from nngpu.ops.registry import HalVersion
from nngpu.validation.model import validate_model
from nngpu.testing import output, run_op, scalar, single_op_model, tensor

FAILED = {ErrorStatus.INVALID_ARGUMENT, ErrorStatus.GENERAL_FAILURE}


def run_reference(op, inputs, outputs) -> list[np.ndarray]:
    """The 1.3 reference path directly (run_op prepares as 1.2, which has no signed quant8)."""
    model = single_op_model(op, inputs, outputs)
    feeds = [v.value for v in inputs if not v.omitted and not v.const and is_tensor(v.type)]
    return GraphRunner(as_model_1_3(model)).run(feeds)


def _softmax_loop(x: np.ndarray, beta: float, axis: int, log: bool = False) -> np.ndarray:
    """Softmax of every 1-D slice along `axis`, one slice at a time, in double."""
    x = np.moveaxis(x.astype(np.float64), axis, -1)
    out = np.empty_like(x)
    for idx in np.ndindex(*x.shape[:-1]):
        row = list(x[idx])
        m = max(row)
        exps = [math.exp((v - m) * beta) for v in row]
        total = sum(exps)
        out[idx] = [((v - m) * beta - math.log(total)) if log else e / total for v, e in zip(row, exps)]
    return np.moveaxis(out, -1, axis)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_float_axis_rank3(axis):
    x = np.random.default_rng(2).normal(size=(2, 3, 4)).astype(np.float32)
    r = run_op(Op.SOFTMAX, [tensor(T.TENSOR_FLOAT32, x), scalar(T.FLOAT32, 0.7), scalar(T.INT32, axis)],
               [output(T.TENSOR_FLOAT32, [2, 3, 4])])
    assert r.status == ErrorStatus.NONE
    np.testing.assert_allclose(r.outputs[0], _softmax_loop(x, 0.7, axis), rtol=1e-5, atol=1e-6)


def test_quant8_large_range_within_one_step():
    # a wide input range: differences beyond the fixed-point radius must give 0, others ±1 of float
    x = np.array([[0, 10, 60, 120, 200, 255], [7, 7, 7, 7, 7, 7]], dtype=np.uint8)
    scale, beta = 0.1, 1.3
    want = _softmax_loop((x.astype(np.float64) - 5) * scale, beta, -1) * 256
    r = run_op(Op.SOFTMAX, [tensor(T.TENSOR_QUANT8_ASYMM, x, scale, 5), scalar(T.FLOAT32, beta)],
               [output(T.TENSOR_QUANT8_ASYMM, [2, 6], 1 / 256, 0)])
    assert r.status == ErrorStatus.NONE
    assert np.max(np.abs(r.outputs[0].astype(np.float64) - np.clip(want, 0, 255))) <= 1


def test_quant8_signed_matches_unsigned_shifted():
    x = np.array([[0, 3, 9, 40, 41]], dtype=np.uint8)
    u = run_op(Op.SOFTMAX, [tensor(T.TENSOR_QUANT8_ASYMM, x, 0.25, 128), scalar(T.FLOAT32, 1.0)],
               [output(T.TENSOR_QUANT8_ASYMM, [1, 5], 1 / 256, 0)])
    t = T.TENSOR_QUANT8_ASYMM_SIGNED
    s = run_reference(Op.SOFTMAX, [tensor(t, x.astype(np.int16) - 128, 0.25, 0), scalar(T.FLOAT32, 1.0)],
                      [output(t, [1, 5], 1 / 256, -128)])
    assert u.status == ErrorStatus.NONE
    assert (s[0].astype(np.int16) + 128).tolist() == u.outputs[0].astype(np.int16).tolist()


def test_zero_sized_batch():
    out = run_reference(Op.SOFTMAX, [tensor(T.TENSOR_FLOAT32, np.zeros((0, 3))), scalar(T.FLOAT32, 1.0)],
                        [output(T.TENSOR_FLOAT32, [0, 3])])
    assert out[0].shape == (0, 3)


@pytest.mark.parametrize("beta", [0.0, -1.0])
def test_beta_must_be_positive(beta):
    r = run_op(Op.SOFTMAX, [tensor(T.TENSOR_FLOAT32, np.zeros((1, 3))), scalar(T.FLOAT32, beta)],
               [output(T.TENSOR_FLOAT32, [1, 3])])
    assert r.status in FAILED


def test_quant8_output_scale_must_be_1_over_256():
    r = run_op(Op.SOFTMAX, [tensor(T.TENSOR_QUANT8_ASYMM, np.zeros((1, 3), np.uint8), 0.5, 0), scalar(T.FLOAT32, 1.0)],
               [output(T.TENSOR_QUANT8_ASYMM, [1, 3], 1 / 128, 0)])
    assert r.status in FAILED


def test_axis_out_of_range():
    r = run_op(Op.SOFTMAX, [tensor(T.TENSOR_FLOAT32, np.zeros((1, 3))), scalar(T.FLOAT32, 1.0), scalar(T.INT32, -3)],
               [output(T.TENSOR_FLOAT32, [1, 3])])
    assert r.status in FAILED


@pytest.mark.parametrize("t", [T.TENSOR_FLOAT32, T.TENSOR_FLOAT16])
@pytest.mark.parametrize("axis", [0, -1])
def test_log_softmax(t, axis):
    x = np.random.default_rng(3).normal(size=(3, 5)).astype(np.float32)
    beta_t = T.FLOAT32 if t == T.TENSOR_FLOAT32 else T.FLOAT16
    r = run_op(Op.LOG_SOFTMAX, [tensor(t, x), scalar(beta_t, 2.0), scalar(T.INT32, axis)], [output(t, [3, 5])])
    assert r.status == ErrorStatus.NONE
    tol = 1e-5 if t == T.TENSOR_FLOAT32 else 5e-3
    want = _softmax_loop(x.astype(np.float16 if t == T.TENSOR_FLOAT16 else np.float32), 2.0, axis, log=True)
    np.testing.assert_allclose(r.outputs[0].astype(np.float64), want, rtol=tol, atol=tol)


def test_log_softmax_rank0_fails():
    with pytest.raises(ExecutionError):
        run_reference(Op.LOG_SOFTMAX, [tensor(T.TENSOR_FLOAT32, np.float32(1.0)), scalar(T.FLOAT32, 1.0),
                                       scalar(T.INT32, 0)], [output(T.TENSOR_FLOAT32, [])])


@pytest.mark.parametrize("shape,version", [((2, 3), HalVersion.V1_0), ((1, 2, 2, 3), HalVersion.V1_0),
                                           ((2, 2, 3), HalVersion.V1_2), ((3,), HalVersion.V1_2)])
def test_rank_other_than_2_or_4_needs_v1_2(shape, version):
    x = np.zeros(shape, np.float32)
    model = single_op_model(Op.SOFTMAX, [tensor(T.TENSOR_FLOAT32, x), scalar(T.FLOAT32, 1.0)],
                            [output(T.TENSOR_FLOAT32, list(shape))])
    assert validate_model(model) == version
