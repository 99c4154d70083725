"""RELU*, LOGISTIC, TANH, PRELU, HARD_SWISH, ELU against float formulas over every quantized input."""
from __future__ import annotations

import math

import numpy as np
import pytest
from .test_elementwise import FAILED, run13

from nngpu.hal.types import ErrorStatus
from nngpu.hal.types import OperandType as T
from nngpu.hal.types import OperationType as Op
from nngpu.testing import output, run_op, scalar, tensor

ALL_U8 = np.arange(256, dtype=np.uint8)
ALL_S8 = np.arange(-128, 128, dtype=np.int8)


def _sigmoid(v: float) -> float:
    return 1.0 / (1.0 + math.exp(-v))


@pytest.mark.parametrize("in_scale,zp", [(0.1, 128), (1 / 16, 0), (0.5, 200)])
def test_logistic_quant8_every_input(in_scale, zp):
    r = run_op(Op.LOGISTIC, [tensor(T.TENSOR_QUANT8_ASYMM, ALL_U8, in_scale, zp)],
               [output(T.TENSOR_QUANT8_ASYMM, [256], 1 / 256, 0)])
    assert r.status == ErrorStatus.NONE
    want = [min(255, round(256 * _sigmoid(in_scale * (q - zp)))) for q in range(256)]
    assert np.max(np.abs(r.outputs[0].astype(int) - want)) <= 1


def test_logistic_quant8_signed_every_input():
    r = run13(Op.LOGISTIC, [tensor(T.TENSOR_QUANT8_ASYMM_SIGNED, ALL_S8, 0.08, -3)],
              [output(T.TENSOR_QUANT8_ASYMM_SIGNED, [256], 1 / 256, -128)])
    assert r.status == ErrorStatus.NONE
    want = [min(127, round(256 * _sigmoid(0.08 * (q + 3))) - 128) for q in range(-128, 128)]
    assert np.max(np.abs(r.outputs[0].astype(int) - want)) <= 1


@pytest.mark.parametrize("signed", [False, True])
def test_tanh_quant8_every_input(signed):
    if signed:
        r = run13(Op.TANH, [tensor(T.TENSOR_QUANT8_ASYMM_SIGNED, ALL_S8, 0.05, 10)],
                  [output(T.TENSOR_QUANT8_ASYMM_SIGNED, [256], 1 / 128, 0)])
        want = [max(-128, min(127, round(128 * math.tanh(0.05 * (q - 10))))) for q in range(-128, 128)]
    else:
        r = run_op(Op.TANH, [tensor(T.TENSOR_QUANT8_ASYMM, ALL_U8, 0.05, 120)],
                   [output(T.TENSOR_QUANT8_ASYMM, [256], 1 / 128, 128)])
        want = [max(0, min(255, round(128 * math.tanh(0.05 * (q - 120))) + 128)) for q in range(256)]
    assert r.status == ErrorStatus.NONE
    assert np.max(np.abs(r.outputs[0].astype(int) - want)) <= 1


@pytest.mark.parametrize("t,data", [(T.TENSOR_QUANT8_ASYMM, ALL_U8), (T.TENSOR_QUANT8_ASYMM_SIGNED, ALL_S8)])
def test_hard_swish_quant_every_input(t, data):
    in_scale, in_zp, out_scale, out_zp = 0.05, int(data[0]) + 100, 0.03, int(data[0]) + 20
    r = run13(Op.HARD_SWISH, [tensor(t, data, in_scale, in_zp)], [output(t, [256], out_scale, out_zp)])
    assert r.status == ErrorStatus.NONE
    lo, hi = int(data[0]), int(data[-1])
    want = []
    for q in data.tolist():
        x = in_scale * (q - in_zp)
        want.append(max(lo, min(hi, round(x * min(6.0, max(0.0, x + 3)) / 6 / out_scale) + out_zp)))
    assert np.max(np.abs(r.outputs[0].astype(int) - want)) <= 1


def test_prelu_quant8_per_channel_alpha_broadcast():
    x = np.arange(0, 256, 16, dtype=np.uint8).reshape(1, 2, 2, 4)
    alpha = np.array([[[50, 100, 150, 200]]], dtype=np.uint8)             # [1, 1, 4]
    r = run_op(Op.PRELU, [tensor(T.TENSOR_QUANT8_ASYMM, x, 0.1, 128), tensor(T.TENSOR_QUANT8_ASYMM, alpha, 0.01, 100)],
               [output(T.TENSOR_QUANT8_ASYMM, [1, 2, 2, 4], 0.05, 120)])
    assert r.status == ErrorStatus.NONE
    for idx in np.ndindex(*x.shape):
        real = 0.1 * (int(x[idx]) - 128)
        a = 0.01 * (int(alpha[0, 0, idx[3]]) - 100)
        want = max(0, min(255, round((real if real >= 0 else real * a) / 0.05) + 120))
        assert abs(int(r.outputs[0][idx]) - want) <= 1, idx


def test_relu_family_quant8_clamps():
    for op, lo, hi in [(Op.RELU, 0.0, math.inf), (Op.RELU1, -1.0, 1.0), (Op.RELU6, 0.0, 6.0)]:
        r = run_op(op, [tensor(T.TENSOR_QUANT8_ASYMM, ALL_U8, 0.05, 100)], [output(T.TENSOR_QUANT8_ASYMM, [256], 0.05, 100)])
        assert r.status == ErrorStatus.NONE
        want = [max(0, min(255, round(min(hi, max(lo, 0.05 * (q - 100))) / 0.05) + 100)) for q in range(256)]
        assert r.outputs[0].tolist() == want


def test_elu_float16_and_float32():
    x = [-3.0, -0.5, 0.0, 0.5, 2.0]
    for t, st in [(T.TENSOR_FLOAT32, T.FLOAT32), (T.TENSOR_FLOAT16, T.FLOAT16)]:
        r = run13(Op.ELU, [tensor(t, x), scalar(st, 0.7)], [output(t, [5])])
        assert r.status == ErrorStatus.NONE
        want = [v if v > 0 else 0.7 * (math.exp(v) - 1) for v in x]
        np.testing.assert_allclose(r.outputs[0].astype(float), want, rtol=2e-3, atol=1e-3)


# ---- error paths ---------------------------------------------------------------------------
def test_logistic_and_tanh_wrong_output_quant_rejected():
    r = run_op(Op.LOGISTIC, [tensor(T.TENSOR_QUANT8_ASYMM, [1], 0.1, 0)], [output(T.TENSOR_QUANT8_ASYMM, [1], 1 / 128, 0)])
    assert r.status == ErrorStatus.INVALID_ARGUMENT
    r = run_op(Op.TANH, [tensor(T.TENSOR_QUANT8_ASYMM, [1], 0.1, 0)], [output(T.TENSOR_QUANT8_ASYMM, [1], 1 / 128, 0)])
    assert r.status == ErrorStatus.INVALID_ARGUMENT


def test_relu_quant8_output_params_must_match():
    r = run_op(Op.RELU6, [tensor(T.TENSOR_QUANT8_ASYMM, [1], 0.1, 0)], [output(T.TENSOR_QUANT8_ASYMM, [1], 0.2, 0)])
    assert r.status in FAILED


def test_activation_bad_types_rejected():
    r = run13(Op.ELU, [tensor(T.TENSOR_FLOAT16, [1.0]), scalar(T.FLOAT32, 1.0)], [output(T.TENSOR_FLOAT16, [1])])
    assert r.status == ErrorStatus.INVALID_ARGUMENT
    r = run_op(Op.PRELU, [tensor(T.TENSOR_FLOAT32, [1.0]), tensor(T.TENSOR_FLOAT16, [1.0])], [output(T.TENSOR_FLOAT32, [1])])
    assert r.status == ErrorStatus.INVALID_ARGUMENT
    # HARD_SWISH is 1.3 only
    r = run_op(Op.HARD_SWISH, [tensor(T.TENSOR_FLOAT32, [1.0])], [output(T.TENSOR_FLOAT32, [1])])
    assert r.status == ErrorStatus.INVALID_ARGUMENT
