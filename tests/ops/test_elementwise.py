"""ADD, SUB, MUL, DIV, POW through the driver, against float formulas and Python integer arithmetic."""
from __future__ import annotations

import numpy as np
import pytest

from nngpu.driver.device import Device
from nngpu.runtime.interpreter import GraphRunner
from nngpu.hal.types import ErrorStatus
from nngpu.hal.types import OperandType as T
from nngpu.hal.types import OperationType as Op
from nngpu.modelutil import as_model_1_3
from nngpu.testing import output, run_op, scalar, single_op_model, tensor

FAILED = {ErrorStatus.INVALID_ARGUMENT, ErrorStatus.GENERAL_FAILURE}


class Device13(Device):
    """run_op prepares through prepareModel_1_2; this routes it to the 1.3 rules so the 1.3-only
    operand types (TENSOR_INT32 arithmetic, QUANT8_ASYMM_SIGNED) can be exercised."""

    def prepareModel_1_2(self, model, preference, modelCache, dataCache, token, callback):
        return self.prepare(13, as_model_1_3(model), callback, preference)


def run13(op, inputs, outputs):
    return run_op(op, inputs, outputs, device=Device13())


def _float_requant(real: np.ndarray, scale: float, zp: int, lo: int, hi: int) -> np.ndarray:
    return np.clip(np.floor(real / scale + 0.5) + zp, lo, hi)


def test_add_quant8_broadcast_rank_mismatch_and_saturation():
    rng = np.random.default_rng(1)
    a = rng.integers(0, 256, size=(2, 1, 3), dtype=np.uint8)
    b = np.array([0, 128, 255], dtype=np.uint8)
    a[0, 0, :] = 255  # with b = 255 this saturates at the top
    r = run_op(Op.ADD, [tensor(T.TENSOR_QUANT8_ASYMM, a, 0.5, 10), tensor(T.TENSOR_QUANT8_ASYMM, b, 0.25, 128),
                        scalar(T.INT32, 0)], [output(T.TENSOR_QUANT8_ASYMM, [2, 1, 3], 0.4, 3)])
    assert r.status == ErrorStatus.NONE
    real = 0.5 * (a.astype(np.float64) - 10) + 0.25 * (b.astype(np.float64) - 128)
    want = _float_requant(real, 0.4, 3, 0, 255)
    assert r.outputs[0].shape == (2, 1, 3)
    assert np.max(np.abs(r.outputs[0].astype(int) - want)) <= 1
    assert r.outputs[0][0, 0, 2] == 255


@pytest.mark.parametrize("act,lo,hi", [(1, 0.0, np.inf), (2, -1.0, 1.0), (3, 0.0, 6.0)])
def test_sub_quant8_fused_activation_clamps(act, lo, hi):
    a = np.arange(0, 256, 17, dtype=np.uint8)
    b = np.full_like(a, 100)
    r = run_op(Op.SUB, [tensor(T.TENSOR_QUANT8_ASYMM, a, 0.1, 120), tensor(T.TENSOR_QUANT8_ASYMM, b, 0.1, 120),
                        scalar(T.INT32, act)], [output(T.TENSOR_QUANT8_ASYMM, list(a.shape), 0.05, 128)])
    assert r.status == ErrorStatus.NONE
    real = np.clip(0.1 * (a.astype(np.float64) - 100), lo, hi)
    want = _float_requant(real, 0.05, 128, 0, 255)
    assert np.max(np.abs(r.outputs[0].astype(int) - want)) <= 1


def test_mul_int32_wraps_like_c():
    a = np.array([1 << 30, -3, (1 << 31) - 1, 7], dtype=np.int32)
    b = np.array([4, 5, 2, -1], dtype=np.int32)
    r = run13(Op.MUL, [tensor(T.TENSOR_INT32, a), tensor(T.TENSOR_INT32, b), scalar(T.INT32, 0)],
              [output(T.TENSOR_INT32, [4])])
    assert r.status == ErrorStatus.NONE
    want = [((int(x) * int(y) + (1 << 31)) % (1 << 32)) - (1 << 31) for x, y in zip(a, b)]
    assert r.outputs[0].tolist() == want


def test_div_int32_floors_and_zero_divisor():
    a = np.array([[-7, 7, -7, 7, 5]], dtype=np.int32)
    b = np.array([2, -2, -2, 2, 0], dtype=np.int32)
    r = run13(Op.DIV, [tensor(T.TENSOR_INT32, a), tensor(T.TENSOR_INT32, b), scalar(T.INT32, 0)],
              [output(T.TENSOR_INT32, [1, 5])])
    assert r.status == ErrorStatus.NONE
    assert r.outputs[0].tolist() == [[-4, -4, 3, 3, 0]]  # floor division; x / 0 is 0 as in the reference


def test_add_zero_sized_broadcast():
    # a model input cannot be zero-sized, so run the kernel on the reference path directly
    a = np.zeros((0, 3), dtype=np.float16)
    b = np.ones((1, 3), dtype=np.float16)
    model = single_op_model(Op.ADD, [tensor(T.TENSOR_FLOAT16, a), tensor(T.TENSOR_FLOAT16, b), scalar(T.INT32, 0)],
                            [output(T.TENSOR_FLOAT16, [0, 3])])
    (out,) = GraphRunner(as_model_1_3(model)).run([a, b])
    assert out.shape == (0, 3) and out.dtype == np.float16


def test_mul_quant8_signed_matches_float():
    a = np.arange(-128, 128, 8, dtype=np.int8)
    b = np.arange(127, -129, -8, dtype=np.int8)
    r = run13(Op.MUL, [tensor(T.TENSOR_QUANT8_ASYMM_SIGNED, a, 0.05, -5), tensor(T.TENSOR_QUANT8_ASYMM_SIGNED, b, 0.1, 3),
                       scalar(T.INT32, 0)], [output(T.TENSOR_QUANT8_ASYMM_SIGNED, [32], 0.2, 1)])
    assert r.status == ErrorStatus.NONE
    real = 0.05 * (a.astype(np.float64) + 5) * 0.1 * (b.astype(np.float64) - 3)
    assert np.max(np.abs(r.outputs[0].astype(int) - _float_requant(real, 0.2, 1, -128, 127))) <= 1


def test_pow_broadcast_and_float_div_by_zero():
    base = np.array([[1.0, 2.0, 4.0], [9.0, 0.5, 3.0]], dtype=np.float32)
    exp = np.array([0.5], dtype=np.float32)
    r = run_op(Op.POW, [tensor(T.TENSOR_FLOAT32, base), tensor(T.TENSOR_FLOAT32, exp)], [output(T.TENSOR_FLOAT32, [2, 3])])
    assert r.status == ErrorStatus.NONE
    np.testing.assert_allclose(r.outputs[0], [[v ** 0.5 for v in row] for row in base.tolist()], rtol=1e-6)
    r = run_op(Op.DIV, [tensor(T.TENSOR_FLOAT32, [1.0, -1.0]), tensor(T.TENSOR_FLOAT32, [0.0, 0.0]), scalar(T.INT32, 0)],
               [output(T.TENSOR_FLOAT32, [2])])
    assert r.status == ErrorStatus.NONE and r.outputs[0].tolist() == [np.inf, -np.inf]


# ---- error paths ---------------------------------------------------------------------------
def test_bad_activation_fails():
    r = run_op(Op.ADD, [tensor(T.TENSOR_FLOAT32, [1.0]), tensor(T.TENSOR_FLOAT32, [2.0]), scalar(T.INT32, 7)],
               [output(T.TENSOR_FLOAT32, [1])])
    assert r.status in FAILED


def test_int32_with_activation_fails():
    r = run13(Op.ADD, [tensor(T.TENSOR_INT32, [1]), tensor(T.TENSOR_INT32, [2]), scalar(T.INT32, 1)],
              [output(T.TENSOR_INT32, [1])])
    assert r.status in FAILED


def test_incompatible_shapes_fail():
    r = run_op(Op.MUL, [tensor(T.TENSOR_FLOAT32, np.zeros((2, 3))), tensor(T.TENSOR_FLOAT32, np.zeros((4, 3))),
                        scalar(T.INT32, 0)], [output(T.TENSOR_FLOAT32, [0, 0])])
    assert r.status in FAILED


def test_mul_quant8_output_scale_too_small_fails():
    r = run_op(Op.MUL, [tensor(T.TENSOR_QUANT8_ASYMM, [10], 0.5, 0), tensor(T.TENSOR_QUANT8_ASYMM, [10], 0.5, 0),
                        scalar(T.INT32, 0)], [output(T.TENSOR_QUANT8_ASYMM, [1], 0.25, 0)])
    assert r.status in FAILED


def test_mixed_types_and_versions_rejected():
    r = run_op(Op.ADD, [tensor(T.TENSOR_FLOAT32, [1.0]), tensor(T.TENSOR_INT32, [2]), scalar(T.INT32, 0)],
               [output(T.TENSOR_FLOAT32, [1])])
    assert r.status == ErrorStatus.INVALID_ARGUMENT
    # TENSOR_INT32 ADD is 1.3: a 1.2 preparation must reject it
    r = run_op(Op.ADD, [tensor(T.TENSOR_INT32, [1]), tensor(T.TENSOR_INT32, [2]), scalar(T.INT32, 0)],
               [output(T.TENSOR_INT32, [1])])
    assert r.status == ErrorStatus.INVALID_ARGUMENT
    # quant8 DIV does not exist
    r = run13(Op.DIV, [tensor(T.TENSOR_QUANT8_ASYMM, [1], 1.0, 0), tensor(T.TENSOR_QUANT8_ASYMM, [2], 1.0, 0),
                       scalar(T.INT32, 0)], [output(T.TENSOR_QUANT8_ASYMM, [1], 1.0, 0)])
    assert r.status == ErrorStatus.INVALID_ARGUMENT


def test_rank_above_4_rejected():
    x = np.zeros((1, 1, 1, 1, 2), dtype=np.float32)
    r = run_op(Op.ADD, [tensor(T.TENSOR_FLOAT32, x), tensor(T.TENSOR_FLOAT32, x), scalar(T.INT32, 0)],
               [output(T.TENSOR_FLOAT32, [1, 1, 1, 1, 2])])
    assert r.status == ErrorStatus.INVALID_ARGUMENT
