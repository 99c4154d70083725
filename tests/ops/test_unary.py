"""ABS EXP LOG NEG SQRT RSQRT SIN FLOOR and CAST against math-module formulas per element."""
from __future__ import annotations

import math

import numpy as np
import pytest
from .test_elementwise import run13

from nngpu.hal.types import ErrorStatus
from nngpu.hal.types import OperandType as T
from nngpu.hal.types import OperationType as Op
from nngpu.testing import output, run_op, tensor

X = [0.25, 0.5, 1.0, 2.0, 3.5, 10.0]


@pytest.mark.parametrize("op,fn", [(Op.EXP, math.exp), (Op.LOG, math.log), (Op.SQRT, math.sqrt),
                                   (Op.RSQRT, lambda v: 1 / math.sqrt(v)), (Op.SIN, math.sin),
                                   (Op.ABS, lambda v: abs(-v)), (Op.NEG, lambda v: v), (Op.FLOOR, math.floor)])
@pytest.mark.parametrize("t,rtol", [(T.TENSOR_FLOAT32, 1e-6), (T.TENSOR_FLOAT16, 2e-3)])
def test_unary_float(op, fn, t, rtol):
    x = np.array([[v] for v in X]) * (-1 if op in (Op.ABS, Op.NEG) else 1)
    r = run_op(op, [tensor(t, x)], [output(t, [6, 1])])
    assert r.status == ErrorStatus.NONE
    want = [[fn(v)] for v in X]
    np.testing.assert_allclose(r.outputs[0].astype(np.float64), want, rtol=rtol, atol=1e-6)


def test_log_and_rsqrt_of_negative_give_nan_not_error():
    for op in (Op.LOG, Op.RSQRT, Op.SQRT):
        r = run_op(op, [tensor(T.TENSOR_FLOAT32, [-1.0, 0.0])], [output(T.TENSOR_FLOAT32, [2])])
        assert r.status == ErrorStatus.NONE and math.isnan(r.outputs[0][0])


def test_int32_neg_and_abs_wrap_at_int32_min():
    x = np.array([-(1 << 31), -5, 7], dtype=np.int32)
    r = run_op(Op.NEG, [tensor(T.TENSOR_INT32, x)], [output(T.TENSOR_INT32, [3])])
    assert r.status == ErrorStatus.NONE and r.outputs[0].tolist() == [-(1 << 31), 5, -7]
    r = run13(Op.ABS, [tensor(T.TENSOR_INT32, x)], [output(T.TENSOR_INT32, [3])])
    assert r.status == ErrorStatus.NONE and r.outputs[0].tolist() == [-(1 << 31), 5, 7]


def test_cast_saturates_and_truncates():
    x = np.array([-1.5, 2.7, -2.7, 300.0], dtype=np.float32)
    r = run_op(Op.CAST, [tensor(T.TENSOR_FLOAT32, x)], [output(T.TENSOR_QUANT8_ASYMM, [4], 1.0, 0)])
    assert r.status == ErrorStatus.NONE and r.outputs[0].tolist() == [0, 2, 0, 255]
    r = run_op(Op.CAST, [tensor(T.TENSOR_FLOAT16, x)], [output(T.TENSOR_INT32, [4])])
    assert r.status == ErrorStatus.NONE and r.outputs[0].tolist() == [int(v) for v in x.tolist()]
    # quant8 -> float casts the stored value, not the real one
    r = run_op(Op.CAST, [tensor(T.TENSOR_QUANT8_ASYMM, [3, 200], 0.5, 100)], [output(T.TENSOR_FLOAT32, [2])])
    assert r.status == ErrorStatus.NONE and r.outputs[0].tolist() == [3.0, 200.0]


def test_cast_identity_1_3_types():
    r = run13(Op.CAST, [tensor(T.TENSOR_QUANT16_SYMM, [-3, 4], 0.5, 0)], [output(T.TENSOR_QUANT16_SYMM, [2], 0.5, 0)])
    assert r.status == ErrorStatus.NONE and r.outputs[0].tolist() == [-3, 4]


def test_unary_bad_types_rejected():
    assert run_op(Op.EXP, [tensor(T.TENSOR_INT32, [1])], [output(T.TENSOR_INT32, [1])]).status == ErrorStatus.INVALID_ARGUMENT
    # int32 ABS is 1.3 only
    assert run_op(Op.ABS, [tensor(T.TENSOR_INT32, [1])], [output(T.TENSOR_INT32, [1])]).status == ErrorStatus.INVALID_ARGUMENT
    # 1.3 widens CAST only to identity casts of the new types
    r = run13(Op.CAST, [tensor(T.TENSOR_BOOL8, [True])], [output(T.TENSOR_FLOAT32, [1])])
    assert r.status == ErrorStatus.INVALID_ARGUMENT
