"""Convolution and pooling templates beyond the NHWC ones: GROUPED_CONV_2D, TRANSPOSE_CONV_2D,
L2_POOL_2D, and the NCHW (and run-time-filter) forms of CONV_2D, DEPTHWISE_CONV_2D,
AVERAGE_POOL_2D and MAX_POOL_2D, against the numpy reference."""
from __future__ import annotations

import numpy as np
import pytest

from nngpu.hal import OperationType as Op
from nngpu.testing import tensor
from ..ops.device_check import F16, F32, check_on_device, data, flag, i32, vec

TYPES = [F32, F16]


def image(n, c, h, w, nchw, t):
    return tensor(t, data((n, c, h, w) if nchw else (n, h, w, c), t))


def weights(shape, t, const=True):
    return tensor(t, data(shape, t, 0.5), const=const)


@pytest.mark.parametrize("t", TYPES)
@pytest.mark.parametrize("nchw", [False, True])
@pytest.mark.parametrize("explicit", [False, True])
def test_grouped_conv(t, nchw, explicit):
    groups, cin, cout = 3, 6, 9
    x = image(2, cin, 5, 6, nchw, t)
    f, b = weights((cout, 3, 2, cin // groups), t), weights((cout,), t)
    pad = [i32(1), i32(0), i32(2), i32(1)] if explicit else [i32(1)]
    ins = [x, f, b, *pad, i32(2), i32(1), i32(groups), i32(1), flag(nchw)]
    check_on_device(Op.GROUPED_CONV_2D, ins, t, 4, kind="grouped_conv")


@pytest.mark.parametrize("t", TYPES)
@pytest.mark.parametrize("nchw", [False, True])
@pytest.mark.parametrize("stride", [1, 2, 3])
def test_transpose_conv_explicit(t, nchw, stride):
    x = image(1, 3, 4, 5, nchw, t)
    f, b = weights((2, 3, 3, 3), t), weights((2,), t)
    ins = [x, f, b, i32(1), i32(0), i32(0), i32(1), i32(stride), i32(stride), i32(0), flag(nchw)]
    check_on_device(Op.TRANSPOSE_CONV_2D, ins, t, 4, kind="transpose_conv")


@pytest.mark.parametrize("nchw", [False, True])
@pytest.mark.parametrize("padding", [1, 2])   # SAME, VALID
def test_transpose_conv_implicit(nchw, padding):
    x = image(2, 2, 3, 3, nchw, F32)
    f, b = weights((4, 3, 2, 2), F32), weights((4,), F32)
    out = [2, 4, 6, 6] if nchw else [2, 6, 6, 4]
    shape = tensor(vec(out).type, np.asarray(out, np.int32), const=True)
    ins = [x, f, b, shape, i32(padding), i32(2), i32(2), i32(3), flag(nchw)]
    check_on_device(Op.TRANSPOSE_CONV_2D, ins, F32, 4, kind="transpose_conv")


@pytest.mark.parametrize("t", TYPES)
def test_conv_nchw_with_dilation(t):
    x = image(1, 3, 7, 6, True, t)
    f, b = weights((4, 3, 3, 3), t), weights((4,), t)
    ins = [x, f, b, i32(1), i32(1), i32(1), i32(1), i32(1), i32(2), i32(1), flag(True), i32(2), i32(1)]
    check_on_device(Op.CONV_2D, ins, t, 4, kind="conv")


def test_conv_with_a_run_time_filter():
    x = image(1, 3, 5, 5, False, F32)
    f, b = weights((2, 3, 3, 3), F32, const=False), weights((2,), F32)
    check_on_device(Op.CONV_2D, [x, f, b, i32(1), i32(1), i32(1), i32(0)], F32, 4)


@pytest.mark.parametrize("t", TYPES)
@pytest.mark.parametrize("multiplier", [1, 2])
def test_depthwise_nchw(t, multiplier):
    x = image(2, 3, 6, 5, True, t)
    f, b = weights((1, 3, 3, 3 * multiplier), t), weights((3 * multiplier,), t)
    ins = [x, f, b, i32(1), i32(2), i32(1), i32(multiplier), i32(0), flag(True)]
    check_on_device(Op.DEPTHWISE_CONV_2D, ins, t, 4, kind="depthwise_conv")


@pytest.mark.parametrize("t", TYPES)
@pytest.mark.parametrize("op, kind", [(Op.AVERAGE_POOL_2D, "avg_pool"), (Op.MAX_POOL_2D, "max_pool"),
                                      (Op.L2_POOL_2D, "l2_pool")])
@pytest.mark.parametrize("nchw", [False, True])
def test_pools(t, op, kind, nchw):
    x = image(2, 3, 7, 6, nchw, t)
    explicit = [x, i32(1), i32(0), i32(2), i32(1), i32(2), i32(2), i32(3), i32(3), i32(1), flag(nchw)]
    check_on_device(op, explicit, t, 4, kind=kind)
    implicit = [x, i32(1), i32(1), i32(2), i32(2), i32(3), i32(0), flag(nchw)]
    check_on_device(op, implicit, t, 4, kind=kind)
