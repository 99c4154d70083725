"""L2_NORMALIZATION, LOCAL_RESPONSE_NORMALIZATION, INSTANCE_NORMALIZATION against per-slice loops."""
from __future__ import annotations

import math

import numpy as np
import pytest

from nngpu.runtime.interpreter import GraphRunner
from nngpu.hal.types import ErrorStatus
from nngpu.hal.types import OperandType as T
from nngpu.hal.types import OperationType as Op
from nngpu.modelutil import as_model_1_3
from nngpu.ops.lib.dtypes import is_tensor
from nngpu.testing import output, run_op, scalar, single_op_model, tensor

FAILED = {ErrorStatus.INVALID_ARGUMENT, ErrorStatus.GENERAL_FAILURE}


def run_reference(op, inputs, outputs) -> list[np.ndarray]:
    """The 1.3 reference path directly (run_op prepares as 1.2, which has no signed quant8)."""
    model = single_op_model(op, inputs, outputs)
    feeds = [v.value for v in inputs if not v.omitted and not v.const and is_tensor(v.type)]
    return GraphRunner(as_model_1_3(model)).run(feeds)


def _l2_loop(x: np.ndarray, axis: int) -> np.ndarray:
    x = np.moveaxis(x.astype(np.float64), axis, -1)
    out = np.zeros_like(x)
    for idx in np.ndindex(*x.shape[:-1]):
        norm = math.sqrt(sum(v * v for v in x[idx]))
        if norm > 0:
            out[idx] = x[idx] / norm
    return np.moveaxis(out, -1, axis)


def test_l2_float_axis0_with_an_all_zero_slice():
    x = np.random.default_rng(4).normal(size=(3, 2, 4)).astype(np.float32)
    x[:, 1, 2] = 0.0  # one slice along axis 0 is all zeros: the result is zeros (1.3 rule)
    r = run_op(Op.L2_NORMALIZATION, [tensor(T.TENSOR_FLOAT32, x), scalar(T.INT32, 0)],
               [output(T.TENSOR_FLOAT32, [3, 2, 4])])
    assert r.status == ErrorStatus.NONE
    np.testing.assert_allclose(r.outputs[0], _l2_loop(x, 0), rtol=1e-5, atol=1e-6)
    assert not np.any(r.outputs[0][:, 1, 2])


def test_l2_quant8_within_one_step_and_zero_slice():
    x = np.array([[128, 128, 128, 128], [0, 255, 100, 130], [129, 128, 128, 128], [200, 201, 202, 255]],
                 np.uint8)
    want = np.clip(np.round(_l2_loop(x.astype(np.float64) - 128, -1) * 128) + 128, 0, 255)
    r = run_op(Op.L2_NORMALIZATION, [tensor(T.TENSOR_QUANT8_ASYMM, x, 0.1, 128)],
               [output(T.TENSOR_QUANT8_ASYMM, [4, 4], 1 / 128, 128)])
    assert r.status == ErrorStatus.NONE
    assert np.max(np.abs(r.outputs[0].astype(np.float64) - want)) <= 1
    assert r.outputs[0][0].tolist() == [128] * 4


def test_l2_quant8_signed_axis_minus2():
    x = np.array([[-5, 100], [12, -128], [0, 127]], np.int8)
    t = T.TENSOR_QUANT8_ASYMM_SIGNED
    out = run_reference(Op.L2_NORMALIZATION, [tensor(t, x, 0.5, -3), scalar(T.INT32, -2)],
                        [output(t, [3, 2], 1 / 128, 0)])
    want = np.clip(np.round(_l2_loop(x.astype(np.float64) + 3, 0) * 128), -128, 127)
    assert np.max(np.abs(out[0].astype(np.float64) - want)) <= 1


def test_l2_quant8_bad_output_params_fail():
    r = run_op(Op.L2_NORMALIZATION, [tensor(T.TENSOR_QUANT8_ASYMM, np.ones((1, 4), np.uint8), 0.1, 0)],
               [output(T.TENSOR_QUANT8_ASYMM, [1, 4], 1 / 128, 0)])
    assert r.status in FAILED


def _lrn_loop(x: np.ndarray, radius: int, bias: float, alpha: float, beta: float, axis: int) -> np.ndarray:
    x = np.moveaxis(x.astype(np.float64), axis, -1)
    out = np.empty_like(x)
    n = x.shape[-1]
    for idx in np.ndindex(*x.shape):
        *outer, d = idx
        window = [x[tuple(outer) + (j,)] for j in range(max(0, d - radius), min(n, d + radius + 1))]
        out[idx] = x[idx] / (bias + alpha * sum(v * v for v in window)) ** beta
    return np.moveaxis(out, -1, axis)


@pytest.mark.parametrize("radius,axis", [(1, -1), (10, 0), (0, 1)])
def test_lrn_float(radius, axis):
    x = np.random.default_rng(5).normal(size=(3, 4, 5)).astype(np.float32)
    r = run_op(Op.LOCAL_RESPONSE_NORMALIZATION,
               [tensor(T.TENSOR_FLOAT32, x), scalar(T.INT32, radius), scalar(T.FLOAT32, 1.5), scalar(T.FLOAT32, 0.3),
                scalar(T.FLOAT32, 0.75), scalar(T.INT32, axis)], [output(T.TENSOR_FLOAT32, [3, 4, 5])])
    assert r.status == ErrorStatus.NONE
    np.testing.assert_allclose(r.outputs[0], _lrn_loop(x, radius, 1.5, 0.3, 0.75, axis), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("radius,bias", [(-1, 1.0), (1, 0.0)])
def test_lrn_bad_scalars_fail(radius, bias):
    r = run_op(Op.LOCAL_RESPONSE_NORMALIZATION,
               [tensor(T.TENSOR_FLOAT32, np.ones((1, 1, 1, 4))), scalar(T.INT32, radius), scalar(T.FLOAT32, bias),
                scalar(T.FLOAT32, 1.0), scalar(T.FLOAT32, 0.5)], [output(T.TENSOR_FLOAT32, [1, 1, 1, 4])])
    assert r.status in FAILED


def _instance_loop(x: np.ndarray, gamma: float, beta: float, eps: float) -> np.ndarray:
    """NHWC: each (batch, channel) plane normalized by its own mean and variance."""
    x = x.astype(np.float64)
    out = np.empty_like(x)
    for b in range(x.shape[0]):
        for c in range(x.shape[3]):
            plane = x[b, :, :, c]
            mean = plane.sum() / plane.size
            var = ((plane - mean) ** 2).sum() / plane.size
            out[b, :, :, c] = (plane - mean) * gamma / math.sqrt(var + eps) + beta
    return out


@pytest.mark.parametrize("nchw", [False, True])
def test_instance_normalization(nchw):
    x = np.random.default_rng(6).normal(2.0, 3.0, size=(2, 3, 4, 5)).astype(np.float32)
    want = _instance_loop(x, 1.5, -0.5, 1e-3)
    feed, want_l = (x.transpose(0, 3, 1, 2), want.transpose(0, 3, 1, 2)) if nchw else (x, want)
    r = run_op(Op.INSTANCE_NORMALIZATION,
               [tensor(T.TENSOR_FLOAT32, feed), scalar(T.FLOAT32, 1.5), scalar(T.FLOAT32, -0.5),
                scalar(T.FLOAT32, 1e-3), scalar(T.BOOL, nchw)], [output(T.TENSOR_FLOAT32, list(feed.shape))])
    assert r.status == ErrorStatus.NONE
    np.testing.assert_allclose(r.outputs[0], want_l, rtol=1e-4, atol=1e-5)


def test_instance_normalization_rank3_fails():
    r = run_op(Op.INSTANCE_NORMALIZATION,
               [tensor(T.TENSOR_FLOAT32, np.ones((2, 3, 4))), scalar(T.FLOAT32, 1.0), scalar(T.FLOAT32, 0.0),
                scalar(T.FLOAT32, 1e-3), scalar(T.BOOL, False)], [output(T.TENSOR_FLOAT32, [2, 3, 4])])
    assert r.status in FAILED
