"""Comparisons, logical ops, SELECT, MAXIMUM / MINIMUM against per-element loops."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from .test_elementwise import FAILED, run13

from nngpu.hal.types import ErrorStatus
from nngpu.hal.types import OperandType as T
from nngpu.hal.types import OperationType as Op
from nngpu.testing import output, run_op, tensor


def _broadcast_loop(a: np.ndarray, b: np.ndarray, fn) -> np.ndarray:
    """fn over every output index, mapping broadcast dimensions by hand."""
    rank = max(a.ndim, b.ndim)
    sa = (1,) * (rank - a.ndim) + a.shape
    sb = (1,) * (rank - b.ndim) + b.shape
    shape = tuple(max(x, y) for x, y in zip(sa, sb))
    ra, rb = a.reshape(sa), b.reshape(sb)
    out = np.empty(shape, dtype=object)
    for idx in itertools.product(*[range(n) for n in shape]):
        ia = tuple(i if n > 1 else 0 for i, n in zip(idx, sa))
        ib = tuple(i if n > 1 else 0 for i, n in zip(idx, sb))
        out[idx] = fn(ra[ia], rb[ib])
    return out


@pytest.mark.parametrize("op,fn", [(Op.GREATER, lambda x, y: x > y), (Op.LESS_EQUAL, lambda x, y: x <= y),
                                   (Op.EQUAL, lambda x, y: x == y), (Op.NOT_EQUAL, lambda x, y: x != y)])
def test_quant8_comparison_uses_real_values_and_broadcasts(op, fn):
    a = np.array([[0], [4], [8]], dtype=np.uint8)           # scale 1, zp 2: reals -2, 2, 6
    b = np.array([0, 4, 8, 16], dtype=np.uint8)             # scale 0.5, zp 0: reals 0, 2, 4, 8
    r = run_op(op, [tensor(T.TENSOR_QUANT8_ASYMM, a, 1.0, 2), tensor(T.TENSOR_QUANT8_ASYMM, b, 0.5, 0)],
               [output(T.TENSOR_BOOL8, [3, 4])])
    assert r.status == ErrorStatus.NONE
    want = _broadcast_loop(1.0 * (a.astype(float) - 2), 0.5 * b.astype(float), fn)
    assert r.outputs[0].tolist() == want.tolist()


def test_logical_and_or_broadcast_rank_mismatch():
    a = np.array([[[True], [False]]])                       # [1, 2, 1]
    b = np.array([True, False, True])                       # [3]
    for op, fn in [(Op.LOGICAL_AND, lambda x, y: bool(x and y)), (Op.LOGICAL_OR, lambda x, y: bool(x or y))]:
        r = run_op(op, [tensor(T.TENSOR_BOOL8, a), tensor(T.TENSOR_BOOL8, b)], [output(T.TENSOR_BOOL8, [1, 2, 3])])
        assert r.status == ErrorStatus.NONE
        assert r.outputs[0].tolist() == _broadcast_loop(a, b, fn).tolist()


def test_maximum_quant8_signed_requantizes_to_output_scale():
    a = np.array([-128, -10, 0, 50, 127], dtype=np.int8)
    b = np.array([3], dtype=np.int8)
    r = run13(Op.MAXIMUM, [tensor(T.TENSOR_QUANT8_ASYMM_SIGNED, a, 0.5, -10), tensor(T.TENSOR_QUANT8_ASYMM_SIGNED, b, 1.0, 0)],
              [output(T.TENSOR_QUANT8_ASYMM_SIGNED, [5], 0.25, 5)])
    assert r.status == ErrorStatus.NONE
    real = np.maximum(0.5 * (a.astype(float) + 10), 3.0)
    want = np.clip(np.floor(real / 0.25 + 0.5) + 5, -128, 127)
    assert r.outputs[0].tolist() == want.astype(int).tolist()


def test_minimum_int32_broadcast():
    a = np.array([[1, -5, 7], [0, 2, -9]], dtype=np.int32)
    b = np.array([[0], [1]], dtype=np.int32)
    r = run_op(Op.MINIMUM, [tensor(T.TENSOR_INT32, a), tensor(T.TENSOR_INT32, b)], [output(T.TENSOR_INT32, [2, 3])])
    assert r.status == ErrorStatus.NONE
    assert r.outputs[0].tolist() == _broadcast_loop(a, b, min).tolist()


def test_select_requantizes_each_input():
    cond = np.array([True, False, True, False])
    x = np.array([10, 20, 30, 40], dtype=np.uint8)
    y = np.array([1, 2, 3, 4], dtype=np.uint8)
    r = run_op(Op.SELECT, [tensor(T.TENSOR_BOOL8, cond), tensor(T.TENSOR_QUANT8_ASYMM, x, 0.5, 0),
                           tensor(T.TENSOR_QUANT8_ASYMM, y, 2.0, 0)], [output(T.TENSOR_QUANT8_ASYMM, [4], 1.0, 0)])
    assert r.status == ErrorStatus.NONE
    assert r.outputs[0].tolist() == [5, 4, 15, 8]


# ---- error paths ---------------------------------------------------------------------------
def test_select_shape_mismatch_fails():
    r = run_op(Op.SELECT, [tensor(T.TENSOR_BOOL8, [True, False]), tensor(T.TENSOR_FLOAT32, [1.0, 2.0, 3.0]),
                           tensor(T.TENSOR_FLOAT32, [1.0, 2.0, 3.0])], [output(T.TENSOR_FLOAT32, [3])])
    assert r.status in FAILED


def test_comparison_bad_types_rejected():
    r = run_op(Op.LESS, [tensor(T.TENSOR_FLOAT32, [1.0]), tensor(T.TENSOR_INT32, [1])], [output(T.TENSOR_BOOL8, [1])])
    assert r.status == ErrorStatus.INVALID_ARGUMENT
    r = run_op(Op.GREATER, [tensor(T.TENSOR_FLOAT32, [1.0]), tensor(T.TENSOR_FLOAT32, [1.0])], [output(T.TENSOR_FLOAT32, [1])])
    assert r.status == ErrorStatus.INVALID_ARGUMENT
    r = run_op(Op.LOGICAL_NOT, [tensor(T.TENSOR_INT32, [1])], [output(T.TENSOR_INT32, [1])])
    assert r.status == ErrorStatus.INVALID_ARGUMENT


def test_comparison_incompatible_broadcast_fails():
    r = run_op(Op.EQUAL, [tensor(T.TENSOR_INT32, [1, 2, 3]), tensor(T.TENSOR_INT32, [1, 2])], [output(T.TENSOR_BOOL8, [0])])
    assert r.status in FAILED
