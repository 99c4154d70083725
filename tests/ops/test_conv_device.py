"""Convolutions, transposed convolutions, fully connected and pooling in device kernels match
the numpy reference: float32 / float16 within tolerance, quantized (per tensor and per channel,
filters constant or given at run time) bit for bit, in NHWC and NCHW."""
from __future__ import annotations

import numpy as np
import pytest

from nngpu.hal import OperandType as T
from nngpu.hal import OperationType as Op
from nngpu.testing import tensor

from .device_check import F16, F32, Q8, S8, check_on_device, data, flag, i32, vec

rng = np.random.default_rng(5)
FLOATS = [F32, F16]
PC = T.TENSOR_QUANT8_SYMM_PER_CHANNEL
ZP = {Q8: 128, S8: 0}


def image(n, c, h, w, nchw, t, scale=0.5):
    shape = (n, c, h, w) if nchw else (n, h, w, c)
    return q(shape, t, scale) if t in ZP else tensor(t, data(shape, t))


def weights(shape, t, const=True):
    return tensor(t, data(shape, t, 0.5), const=const)


def q(shape, t, scale=0.5, zp=None, const=False, value=None):
    v = data(shape, t) if value is None else value
    return tensor(t, v, scale=scale, zero_point=ZP[t] - 3 if zp is None else zp, const=const)


def bias(n, scale, const=True):
    return tensor(T.TENSOR_INT32, rng.integers(-3000, 3000, n).astype(np.int32), scale=scale, const=const)


def filt(shape, t, per_channel=False, const=True, channel_dim=0):
    """A quantized filter and its per-channel scales (None per tensor)."""
    if per_channel:
        scales = list(rng.uniform(0.01, 0.2, shape[channel_dim]))
        v = rng.integers(-127, 128, shape).astype(np.int8)
        return tensor(PC, v, const=const, channel_quant=(scales, channel_dim)), scales
    return q(shape, t, 0.1, zp=ZP[t] + 9, const=const), None


def conv_bias(n, in_scale, fscales):
    return bias(n, in_scale * 0.1 if fscales is None else 0.0)


# ---- float ------------------------------------------------------------------------------------

@pytest.mark.parametrize("t", FLOATS)
@pytest.mark.parametrize("nchw", [False, True])
@pytest.mark.parametrize("explicit", [False, True])
def test_grouped_conv(t, nchw, explicit):
    groups, cin, cout = 3, 6, 9
    x = image(2, cin, 5, 6, nchw, t)
    f, b = weights((cout, 3, 2, cin // groups), t), weights((cout,), t)
    pad = [i32(1), i32(0), i32(2), i32(1)] if explicit else [i32(1)]
    check_on_device(Op.GROUPED_CONV_2D, [x, f, b, *pad, i32(2), i32(1), i32(groups), i32(1), flag(nchw)], t, 4)


@pytest.mark.parametrize("t", FLOATS)
@pytest.mark.parametrize("nchw", [False, True])
@pytest.mark.parametrize("stride", [1, 2, 3])
def test_transpose_conv_explicit(t, nchw, stride):
    x = image(1, 3, 4, 5, nchw, t)
    f, b = weights((2, 3, 3, 3), t), weights((2,), t)
    ins = [x, f, b, i32(1), i32(0), i32(0), i32(1), i32(stride), i32(stride), i32(0), flag(nchw)]
    check_on_device(Op.TRANSPOSE_CONV_2D, ins, t, 4)


@pytest.mark.parametrize("nchw", [False, True])
@pytest.mark.parametrize("padding", [1, 2])   # SAME, VALID
def test_transpose_conv_implicit(nchw, padding):
    x = image(2, 2, 3, 3, nchw, F32)
    f, b = weights((4, 3, 2, 2), F32), weights((4,), F32)
    out = [2, 4, 6, 6] if nchw else [2, 6, 6, 4]
    check_on_device(Op.TRANSPOSE_CONV_2D, [x, f, b, vec(out), i32(padding), i32(2), i32(2), i32(3), flag(nchw)], F32, 4)


@pytest.mark.parametrize("t", FLOATS)
def test_conv_nchw_with_dilation(t):
    x = image(1, 3, 7, 6, True, t)
    f, b = weights((4, 3, 3, 3), t), weights((4,), t)
    ins = [x, f, b, i32(1), i32(1), i32(1), i32(1), i32(1), i32(2), i32(1), flag(True), i32(2), i32(1)]
    check_on_device(Op.CONV_2D, ins, t, 4)


def test_conv_with_a_run_time_filter():
    x = image(1, 3, 5, 5, False, F32)
    f, b = weights((2, 3, 3, 3), F32, const=False), weights((2,), F32)
    check_on_device(Op.CONV_2D, [x, f, b, i32(1), i32(1), i32(1), i32(0)], F32, 4)


@pytest.mark.parametrize("t", FLOATS)
@pytest.mark.parametrize("multiplier", [1, 2])
@pytest.mark.parametrize("nchw", [False, True])
def test_depthwise(t, multiplier, nchw):
    x = image(2, 3, 6, 5, nchw, t)
    f, b = weights((1, 3, 3, 3 * multiplier), t), weights((3 * multiplier,), t)
    check_on_device(Op.DEPTHWISE_CONV_2D, [x, f, b, i32(1), i32(2), i32(1), i32(multiplier), i32(0), flag(nchw)], t, 4)


@pytest.mark.parametrize("t", FLOATS)
@pytest.mark.parametrize("const", [True, False])
def test_fully_connected(t, const):
    x = tensor(t, data((3, 2, 10), t))
    check_on_device(Op.FULLY_CONNECTED, [x, weights((7, 20), t, const), weights((7,), t), i32(1)], t, 2)


@pytest.mark.parametrize("t", FLOATS)
@pytest.mark.parametrize("op", [Op.AVERAGE_POOL_2D, Op.MAX_POOL_2D, Op.L2_POOL_2D])
@pytest.mark.parametrize("nchw", [False, True])
def test_pools(t, op, nchw):
    x = image(2, 3, 7, 6, nchw, t)
    check_on_device(op, [x, i32(1), i32(0), i32(2), i32(1), i32(2), i32(2), i32(3), i32(3), i32(1), flag(nchw)], t, 4)
    check_on_device(op, [x, i32(1), i32(1), i32(2), i32(2), i32(3), i32(0), flag(nchw)], t, 4)


# ---- quantized --------------------------------------------------------------------------------

@pytest.mark.parametrize("t", [Q8, S8])
@pytest.mark.parametrize("nchw", [False, True])
@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("act", [0, 1, 3])
def test_quant_conv(t, nchw, per_channel, act):
    x = image(2, 3, 6, 5, nchw, t)
    f, scales = filt((4, 3, 2, 3), t, per_channel)
    ins = [x, f, conv_bias(4, 0.5, scales), i32(1), i32(0), i32(1), i32(2), i32(2), i32(1), i32(act), flag(nchw),
           i32(2), i32(1)]
    check_on_device(Op.CONV_2D, ins, t, 4, scale=0.3, zero_point=ZP[t] + 4)


@pytest.mark.parametrize("t", [Q8, S8])
def test_quant_conv_with_run_time_filter(t):
    f, _ = filt((3, 3, 3, 4), t, const=False)
    ins = [image(1, 4, 5, 5, False, t), f, bias(3, 0.05, const=False), i32(1), i32(1), i32(1), i32(0)]
    check_on_device(Op.CONV_2D, ins, t, 4, scale=0.7, zero_point=ZP[t])


def test_per_channel_filter_given_at_run_time():
    f, _ = filt((3, 3, 3, 4), S8, per_channel=True, const=False)
    ins = [image(1, 4, 5, 5, False, S8), f, bias(3, 0.0, const=False), i32(1), i32(1), i32(1), i32(0)]
    check_on_device(Op.CONV_2D, ins, S8, 4, scale=0.7, zero_point=0)


@pytest.mark.parametrize("t", [Q8, S8])
@pytest.mark.parametrize("nchw", [False, True])
@pytest.mark.parametrize("per_channel", [False, True])
def test_quant_depthwise_conv(t, nchw, per_channel):
    f, scales = filt((1, 3, 3, 6), t, per_channel, channel_dim=3)
    # pads 1, 2, 1, 2; strides 1 x 2; depth multiplier 2
    ins = [image(1, 3, 6, 6, nchw, t), f, conv_bias(6, 0.5, scales), i32(1), i32(2), i32(1), i32(2), i32(1), i32(2),
           i32(2), i32(0), flag(nchw)]
    check_on_device(Op.DEPTHWISE_CONV_2D, ins, t, 4, scale=0.2, zero_point=ZP[t] - 9)


@pytest.mark.parametrize("t", [Q8, S8])
@pytest.mark.parametrize("per_channel", [False, True])
def test_quant_grouped_conv(t, per_channel):
    f, scales = filt((9, 2, 2, 2), t, per_channel)
    ins = [image(2, 6, 5, 4, False, t), f, conv_bias(9, 0.5, scales), i32(2), i32(1), i32(1), i32(3), i32(1),
           flag(False)]
    check_on_device(Op.GROUPED_CONV_2D, ins, t, 4, scale=0.25, zero_point=ZP[t])


@pytest.mark.parametrize("t", [Q8, S8])
@pytest.mark.parametrize("const", [True, False])
def test_quant_fully_connected(t, const):
    x = q((3, 2, 10), t, 0.5)
    w = q((7, 20), t, 0.1, zp=ZP[t] + 2, const=const)
    check_on_device(Op.FULLY_CONNECTED, [x, w, bias(7, 0.05, const), i32(1)], t, 2, scale=0.6, zero_point=ZP[t] - 2)


def test_quant_fully_connected_with_a_64_bit_accumulator():
    k = 40000  # k * 255 * 255 exceeds int32: the kernel accumulates in 64 bits, then wraps like the reference
    x = q((1, k), Q8, 0.5, zp=0, value=np.full((1, k), 255, np.uint8))
    w = q((2, k), Q8, 0.5, zp=0, const=True, value=np.full((2, k), 255, np.uint8))
    check_on_device(Op.FULLY_CONNECTED, [x, w, bias(2, 0.25), i32(0)], Q8, 2, scale=1000.0, zero_point=0)


@pytest.mark.parametrize("t", [Q8, S8])
@pytest.mark.parametrize("op", [Op.AVERAGE_POOL_2D, Op.MAX_POOL_2D])
@pytest.mark.parametrize("nchw", [False, True])
@pytest.mark.parametrize("act", [0, 3])
def test_quant_pool(t, op, nchw, act):
    x = image(2, 3, 7, 6, nchw, t, 0.1)
    ins = [x, i32(1), i32(1), i32(0), i32(1), i32(2), i32(2), i32(3), i32(2), i32(act), flag(nchw)]
    check_on_device(op, ins, t, 4, scale=0.1, zero_point=ZP[t] - 3)
