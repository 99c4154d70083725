"""Reduction and per-axis normalization templates match the numpy reference (float32 /
float16): MEAN, REDUCE_SUM / PROD / MAX / MIN, SOFTMAX, LOG_SOFTMAX, L2_NORMALIZATION."""
from __future__ import annotations

import numpy as np
import pytest

from nngpu.hal import OperandType as T
from nngpu.hal import OperationType as Op
from nngpu.testing import scalar, tensor
from ..ops.device_check import F16, F32, check_on_device, data, fscalar, i32, vec

REDUCTIONS = [Op.MEAN, Op.REDUCE_SUM, Op.REDUCE_PROD, Op.REDUCE_MAX, Op.REDUCE_MIN]


def keep_dims(op, keep: bool):
    return i32(int(keep)) if op == Op.MEAN else scalar(T.BOOL, keep)


@pytest.mark.parametrize("op", REDUCTIONS)
@pytest.mark.parametrize("t", [F32, F16])
@pytest.mark.parametrize("axes, keep", [([1, 2], True), ([1, 2], False), ([-1, 0, -1], False),
                                        ([0, 1, 2, 3], False), ([3], True)])
def test_reductions(op, t, axes, keep):
    shape = (2, 3, 4, 5)
    scale = 0.6 if op == Op.REDUCE_PROD else 1.0
    kept = len(shape) if keep else max(len(shape) - len(set(a % 4 for a in axes)), 1)
    x = tensor(t, data(shape, t, scale))
    check_on_device(op, [x, vec(axes), keep_dims(op, keep)], t, kept, kind="reduce")


def test_mean_over_a_long_axis_is_accurate():
    x = tensor(F32, (np.random.default_rng(0).random((1, 4096, 3)) * 100 + 1000).astype(np.float32))
    check_on_device(Op.MEAN, [x, vec([1]), i32(0)], F32, 2)


@pytest.mark.parametrize("t", [F32, F16])
@pytest.mark.parametrize("shape, axis", [((2, 10), -1), ((2, 3, 4, 5), 1), ((7,), 0), ((2, 3, 4), 0)])
@pytest.mark.parametrize("op", [Op.SOFTMAX, Op.LOG_SOFTMAX])
def test_softmax(op, t, shape, axis):
    x = tensor(t, data(shape, t, 3.0))
    check_on_device(op, [x, fscalar(t, 0.7), i32(axis)], t, len(shape), kind=op.name.lower())


def test_softmax_without_axis():
    check_on_device(Op.SOFTMAX, [tensor(F32, data((3, 6))), fscalar(F32, 1.0)], F32, 2, kind="softmax")


@pytest.mark.parametrize("t", [F32, F16])
@pytest.mark.parametrize("shape, axis", [((2, 3, 4), -1), ((2, 3, 4), 1), ((5,), 0)])
def test_l2_normalization(t, shape, axis):
    x = tensor(t, data(shape, t))
    check_on_device(Op.L2_NORMALIZATION, [x, i32(axis)], t, len(shape), kind="l2_normalization")


def test_l2_normalization_of_zeros_uses_the_epsilon():
    x = tensor(F32, np.zeros((2, 3), np.float32))
    check_on_device(Op.L2_NORMALIZATION, [x], F32, 2)


@pytest.mark.parametrize("t", [F32, F16])
@pytest.mark.parametrize("radius, axis", [(2, -1), (0, 1), (9, 0)])
def test_local_response_normalization(t, radius, axis):
    x = tensor(t, data((3, 4, 7), t))
    ins = [x, i32(radius), fscalar(t, 1.5), fscalar(t, 0.3), fscalar(t, 0.75), i32(axis)]
    check_on_device(Op.LOCAL_RESPONSE_NORMALIZATION, ins, t, 3, kind="local_response_normalization")
