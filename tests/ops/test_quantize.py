"""QUANTIZE and DEQUANTIZE against per-element formulas (std::round semantics, per-channel scales)."""
from __future__ import annotations

import math

import numpy as np
from .test_elementwise import run13

from nngpu.hal.types import ErrorStatus
from nngpu.hal.types import OperandType as T
from nngpu.hal.types import OperationType as Op
from nngpu.testing import output, run_op, tensor


def _round_away(v: float) -> int:
    return int(math.copysign(math.floor(abs(v) + 0.5), v))


def test_quantize_rounds_half_away_and_saturates():
    x = np.array([0.25, -0.25, 0.75, -0.75, 1000.0, -1000.0, 0.24999998], dtype=np.float32)
    r = run_op(Op.QUANTIZE, [tensor(T.TENSOR_FLOAT32, x)], [output(T.TENSOR_QUANT8_ASYMM, [7], 0.5, 100)])
    assert r.status == ErrorStatus.NONE
    want = [min(255, max(0, _round_away(float(np.float32(v) / np.float32(0.5))) + 100)) for v in x]
    assert r.outputs[0].tolist() == want
    assert r.outputs[0].tolist() == [101, 99, 102, 98, 255, 0, 100]  # 0.49999997 rounds down


def test_quantize_signed_from_float16():
    x = np.array([-3.0, -0.5, 0.5, 3.0], dtype=np.float16)
    r = run13(Op.QUANTIZE, [tensor(T.TENSOR_FLOAT16, x)], [output(T.TENSOR_QUANT8_ASYMM_SIGNED, [4], 0.02, -1)])
    assert r.status == ErrorStatus.NONE
    assert r.outputs[0].tolist() == [max(-128, min(127, _round_away(float(v) / 0.02) - 1)) for v in x]


def test_dequantize_per_channel_axis_1():
    q = np.array([[[-128, 5], [127, -3], [0, 64]]], dtype=np.int8)   # [1, 3, 2], channels on dim 1
    scales = [0.5, 0.25, 2.0]
    r = run_op(Op.DEQUANTIZE, [tensor(T.TENSOR_QUANT8_SYMM_PER_CHANNEL, q, channel_quant=(scales, 1))],
               [output(T.TENSOR_FLOAT32, [1, 3, 2])])
    assert r.status == ErrorStatus.NONE
    want = [[[scales[c] * int(q[0, c, k]) for k in range(2)] for c in range(3)]]
    assert r.outputs[0].tolist() == want


def test_dequantize_quant8_to_float16():
    q = np.array([0, 128, 255], dtype=np.uint8)
    r = run_op(Op.DEQUANTIZE, [tensor(T.TENSOR_QUANT8_ASYMM, q, 0.1, 128)], [output(T.TENSOR_FLOAT16, [3])])
    assert r.status == ErrorStatus.NONE
    np.testing.assert_allclose(r.outputs[0].astype(float), [0.1 * (v - 128) for v in q.tolist()], rtol=1e-3)


def test_quantize_dequantize_bad_types_rejected():
    r = run_op(Op.QUANTIZE, [tensor(T.TENSOR_FLOAT32, [1.0])], [output(T.TENSOR_INT32, [1])])
    assert r.status == ErrorStatus.INVALID_ARGUMENT
    r = run_op(Op.DEQUANTIZE, [tensor(T.TENSOR_FLOAT32, [1.0])], [output(T.TENSOR_FLOAT32, [1])])
    assert r.status == ErrorStatus.INVALID_ARGUMENT
    # signed quant8 is 1.3
    r = run_op(Op.DEQUANTIZE, [tensor(T.TENSOR_QUANT8_ASYMM_SIGNED, [1], 1.0, 0)], [output(T.TENSOR_FLOAT32, [1])])
    assert r.status == ErrorStatus.INVALID_ARGUMENT
