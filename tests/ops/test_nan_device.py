"""NaN and the infinities in device kernels as in the reference: a maximum over a pooling window,
PRELU, ELU and the L2 norm keep a NaN (C's fmax / fmin would drop it), and a compensated sum
over a slice holding an infinity is that infinity, not NaN. Each runs on every device backend
here against the numpy reference, NaN positions included."""
from __future__ import annotations

import numpy as np
import pytest

from nngpu.hal import OperandType as T
from nngpu.hal import OperationType as Op
from nngpu.testing import scalar, tensor

from .device_check import F32, check_on_device, flag, i32, vec


def _with_specials(shape) -> np.ndarray:
    x = np.random.default_rng(7).standard_normal(shape).astype(np.float32)
    flat = x.reshape(-1)
    flat[[0, 5, 9, 17]] = [np.nan, np.inf, -np.inf, np.nan]
    return x


@pytest.mark.parametrize("nchw", [False, True])
def test_max_pool_keeps_nan(nchw):
    x = tensor(F32, _with_specials((1, 4, 6, 2)))
    out = check_on_device(Op.MAX_POOL_2D, [x, *map(i32, (0, 0, 0, 0, 2, 2, 2, 2, 0)), flag(nchw)], F32, 4)
    assert np.isnan(out).any()


def test_prelu_and_elu_keep_nan():
    x = _with_specials((3, 8))
    check_on_device(Op.PRELU, [tensor(F32, x), tensor(F32, np.float32([0.25] * 8), const=True)], F32, 2)
    check_on_device(Op.ELU, [tensor(F32, x), scalar(T.FLOAT32, 0.5)], F32, 2)


def test_l2_normalization_of_a_slice_with_nan_is_nan():
    out = check_on_device(Op.L2_NORMALIZATION, [tensor(F32, _with_specials((3, 8)))], F32, 2)
    assert np.isnan(out[0]).all()


@pytest.mark.parametrize("op", [Op.MEAN, Op.REDUCE_SUM])
def test_a_sum_over_an_infinity_is_that_infinity(op):
    x = np.ones((4, 40), np.float32)
    x[0, 0], x[1, 39], x[2, 3], x[3, 0], x[3, 1] = np.inf, -np.inf, np.nan, np.inf, -np.inf
    keep = i32(0) if op == Op.MEAN else scalar(T.BOOL, False)
    out = check_on_device(op, [tensor(F32, x), vec([1]), keep], F32, 1)
    np.testing.assert_array_equal(np.isinf(out), [True, True, False, False])
    np.testing.assert_array_equal(np.isnan(out), [False, False, True, True])
