"""Quantized templates (TENSOR_QUANT8_ASYMM / _SIGNED) in device kernels are bit-exact with the
numpy reference: fixed-point ADD / SUB / MUL / PRELU, convolutions, fully connected, pooling,
table-driven unary ops and requantizing concatenation / MAXIMUM / MINIMUM / SELECT, QUANTIZE.
Operand combinations the templates do not handle stay on the host."""
from __future__ import annotations

import numpy as np
import pytest

from nngpu.compiler import quant_c
from nngpu.compiler.render import OPENCL
from nngpu.hal import OperandType as T
from nngpu.hal import OperationType as Op
from nngpu.testing import tensor
from ..ops.device_check import F16, F32, Q8, S8, check_on_device, data, flag, i32

rng = np.random.default_rng(5)
PC = T.TENSOR_QUANT8_SYMM_PER_CHANNEL
ZP = {Q8: 128, S8: 0}


def q(shape, t, scale=0.5, zp=None, const=False, value=None):
    v = data(shape, t) if value is None else value
    return tensor(t, v, scale=scale, zero_point=ZP[t] - 3 if zp is None else zp, const=const)


def every_value(t, shape=(256,)):
    """All 256 stored values of t (as a column, row, ... by `shape`)."""
    lo = 0 if t == Q8 else -128
    return np.arange(lo, lo + 256).astype(np.uint8 if t == Q8 else np.int8).reshape(shape)


def bias(n, scale, const=True):
    return tensor(T.TENSOR_INT32, rng.integers(-3000, 3000, n).astype(np.int32), scale=scale, const=const)


# ---- the C primitives against quant.py --------------------------------------------------------

def test_primitives_render_with_baked_and_run_time_shifts():
    for shift in (-5, 0, 3):
        text = "\n".join(quant_c.mbqm("o", "x", 1 << 30, shift, OPENCL))
        assert "o =" in text and ("<< (3)" in text) == (shift == 3)
    text = "\n".join(quant_c.mbqm("o", "x", "M[c]", "S[c]", OPENCL))
    assert "q_left" in text and "q_right" in text
    with pytest.raises(ValueError):
        quant_c.mbqm("o", "x", 1, 40, OPENCL)


# ---- ADD / SUB / MUL: every pair of stored values --------------------------------------------

@pytest.mark.parametrize("t", [Q8, S8])
@pytest.mark.parametrize("op", [Op.ADD, Op.SUB, Op.MUL])
@pytest.mark.parametrize("scales, act", [((0.5, 0.25, 1.0), 0), ((0.1, 0.7, 0.05), 1), ((1.3, 0.02, 0.9), 3),
                                         ((0.01, 0.01, 0.0003), 2), ((2.0, 2.0, 5.0), 0), ((0.5, 0.5, 1e-7), 0)])
def test_binary_every_pair(t, op, scales, act):
    s1, s2, so = scales
    if op == Op.MUL and not s1 * s2 < so:
        so = s1 * s2 * 1.7
    a = q((256, 1), t, s1, value=every_value(t, (256, 1)))
    b = q((1, 256), t, s2, zp=ZP[t] + 5, value=every_value(t, (1, 256)))
    check_on_device(op, [a, b, i32(act)], t, 2, kind=f"quant_{op.name.lower()}", scale=so, zero_point=ZP[t] - 1)


@pytest.mark.parametrize("t", [Q8, S8])
def test_binary_broadcast_and_constant_operand(t):
    a = q((2, 3, 4), t, 0.3)
    b = q((4,), t, 0.2, const=True)
    check_on_device(Op.ADD, [a, b, i32(0)], t, 3, scale=0.4, zero_point=7)
    check_on_device(Op.MUL, [q((3, 1), t, 0.3), q((2, 1, 5), t, 0.2), i32(1)], t, 3, scale=0.1, zero_point=2)


# ---- ops of one 8-bit input: tables of the reference ----------------------------------------

@pytest.mark.parametrize("t", [Q8, S8])
@pytest.mark.parametrize("op", [Op.RELU, Op.RELU1, Op.RELU6])
def test_relu_family(t, op):
    check_on_device(op, [q((256,), t, 0.05, value=every_value(t))], t, 1, kind="quant_table", scale=0.05,
                    zero_point=ZP[t] - 3)


@pytest.mark.parametrize("t", [Q8, S8])
@pytest.mark.parametrize("op, out", [(Op.LOGISTIC, (1 / 256, {Q8: 0, S8: -128})), (Op.TANH, (1 / 128, {Q8: 128, S8: 0}))])
def test_logistic_tanh(t, op, out):
    scale, zps = out
    check_on_device(op, [q((4, 64), t, 0.07, value=every_value(t, (4, 64)))], t, 2, kind="quant_table",
                    scale=scale, zero_point=zps[t])


@pytest.mark.parametrize("t", [Q8, S8])
def test_hard_swish(t):
    check_on_device(Op.HARD_SWISH, [q((256,), t, 0.04, value=every_value(t))], t, 1, kind="quant_table",
                    scale=0.03, zero_point=ZP[t] - 20)


@pytest.mark.parametrize("t", [Q8, S8])
@pytest.mark.parametrize("out", [F32, F16])
def test_dequantize(t, out):
    check_on_device(Op.DEQUANTIZE, [q((2, 128), t, 0.37, value=every_value(t, (2, 128)))], out, 2, kind="quant_table")


# ---- QUANTIZE ---------------------------------------------------------------------------------

@pytest.mark.parametrize("t", [Q8, S8])
@pytest.mark.parametrize("src", [F32, F16])
def test_quantize(t, src):
    scale = 0.1
    halves = (np.arange(-300, 300) + 0.5) * np.float32(scale)           # ties: away from zero
    near = np.nextafter(halves.astype(np.float32), np.float32(np.inf))
    x = np.concatenate([halves, near, rng.standard_normal(400) * 20, [0.0, -0.0, 1e30, -1e30, np.inf, -np.inf, np.nan]])
    with np.errstate(over="ignore"):
        x = x.astype(np.float16 if src == F16 else np.float32)
    check_on_device(Op.QUANTIZE, [tensor(src, x)], t, 1, kind="quantize", scale=scale, zero_point=ZP[t] - 7)


# ---- convolutions -------------------------------------------------------------------------------

def image(n, c, h, w, nchw, t, scale=0.5):
    return q((n, c, h, w) if nchw else (n, h, w, c), t, scale)


def filt(shape, t, per_channel=False, const=True, channel_dim=0):
    if per_channel:
        scales = list(rng.uniform(0.01, 0.2, shape[channel_dim]))
        v = rng.integers(-127, 128, shape).astype(np.int8)
        return tensor(PC, v, const=const, channel_quant=(scales, channel_dim)), scales
    return q(shape, t, 0.1, zp=ZP[t] + 9, const=const), None


def conv_bias(n, in_scale, fscales):
    if fscales is None:
        return bias(n, in_scale * 0.1)
    return bias(n, 0.0)


@pytest.mark.parametrize("t", [Q8, S8])
@pytest.mark.parametrize("nchw", [False, True])
@pytest.mark.parametrize("per_channel", [False, True])
@pytest.mark.parametrize("act", [0, 1, 3])
def test_conv(t, nchw, per_channel, act):
    x = image(2, 3, 6, 5, nchw, t)
    f, scales = filt((4, 3, 2, 3), t, per_channel)
    ins = [x, f, conv_bias(4, 0.5, scales), i32(1), i32(0), i32(1), i32(2), i32(2), i32(1), i32(act), flag(nchw),
           i32(2), i32(1)]
    check_on_device(Op.CONV_2D, ins, t, 4, kind="quant_conv", scale=0.3, zero_point=ZP[t] + 4)


@pytest.mark.parametrize("t", [Q8, S8])
def test_conv_with_run_time_filter(t):
    x = image(1, 4, 5, 5, False, t)
    f, _ = filt((3, 3, 3, 4), t, const=False)
    ins = [x, f, bias(3, 0.05, const=False), i32(1), i32(1), i32(1), i32(0)]
    check_on_device(Op.CONV_2D, ins, t, 4, kind="quant_conv", scale=0.7, zero_point=ZP[t])


def test_per_channel_filter_given_at_run_time():
    f, _ = filt((3, 3, 3, 4), S8, per_channel=True, const=False)
    ins = [image(1, 4, 5, 5, False, S8), f, bias(3, 0.0, const=False), i32(1), i32(1), i32(1), i32(0)]
    check_on_device(Op.CONV_2D, ins, S8, 4, kind="quant_conv", scale=0.7, zero_point=0)


@pytest.mark.parametrize("t", [Q8, S8])
@pytest.mark.parametrize("nchw", [False, True])
@pytest.mark.parametrize("per_channel", [False, True])
def test_depthwise_conv(t, nchw, per_channel):
    x = image(1, 3, 6, 6, nchw, t)
    f, scales = filt((1, 3, 3, 6), t, per_channel, channel_dim=3)
    # pads 1, 2, 1, 2; strides 1 x 2; depth multiplier 2
    ins = [x, f, conv_bias(6, 0.5, scales), i32(1), i32(2), i32(1), i32(2), i32(1), i32(2), i32(2), i32(0),
           flag(nchw)]
    check_on_device(Op.DEPTHWISE_CONV_2D, ins, t, 4, kind="quant_depthwise_conv", scale=0.2, zero_point=ZP[t] - 9)


@pytest.mark.parametrize("t", [Q8, S8])
@pytest.mark.parametrize("per_channel", [False, True])
def test_grouped_conv(t, per_channel):
    x = image(2, 6, 5, 4, False, t)
    f, scales = filt((9, 2, 2, 2), t, per_channel)
    ins = [x, f, conv_bias(9, 0.5, scales), i32(2), i32(1), i32(1), i32(3), i32(1), flag(False)]
    check_on_device(Op.GROUPED_CONV_2D, ins, t, 4, kind="quant_grouped_conv", scale=0.25, zero_point=ZP[t])


# ---- FULLY_CONNECTED ------------------------------------------------------------------------------

@pytest.mark.parametrize("t", [Q8, S8])
@pytest.mark.parametrize("const", [True, False])
def test_fully_connected(t, const):
    x = q((3, 2, 10), t, 0.5)
    w = q((7, 20), t, 0.1, zp=ZP[t] + 2, const=const)
    check_on_device(Op.FULLY_CONNECTED, [x, w, bias(7, 0.05, const), i32(1)], t, 2, kind="quant_fully_connected",
                    scale=0.6, zero_point=ZP[t] - 2)


def test_fully_connected_with_a_64_bit_accumulator():
    k = 40000  # k * 255 * 255 exceeds int32: the kernel accumulates in 64 bits, then wraps like the reference
    x = q((1, k), Q8, 0.5, zp=0, value=np.full((1, k), 255, np.uint8))
    w = q((2, k), Q8, 0.5, zp=0, const=True, value=np.full((2, k), 255, np.uint8))
    check_on_device(Op.FULLY_CONNECTED, [x, w, bias(2, 0.25), i32(0)], Q8, 2, kind="quant_fully_connected",
                    scale=1000.0, zero_point=0)


# ---- pooling --------------------------------------------------------------------------------------

@pytest.mark.parametrize("t", [Q8, S8])
@pytest.mark.parametrize("op, kind", [(Op.AVERAGE_POOL_2D, "quant_avg_pool"), (Op.MAX_POOL_2D, "quant_max_pool")])
@pytest.mark.parametrize("nchw", [False, True])
@pytest.mark.parametrize("act", [0, 3])
def test_pool(t, op, kind, nchw, act):
    x = image(2, 3, 7, 6, nchw, t, 0.1)
    ins = [x, i32(1), i32(1), i32(0), i32(1), i32(2), i32(2), i32(3), i32(2), i32(act), flag(nchw)]
    check_on_device(op, ins, t, 4, kind=kind, scale=0.1, zero_point=ZP[t] - 3)


# ---- requantizing movement and combination --------------------------------------------------------

@pytest.mark.parametrize("t", [Q8, S8])
def test_concatenation_requantizes(t):
    ins = [q((2, 3), t, 0.5), q((2, 256), t, 0.13, zp=ZP[t] + 11, value=every_value(t, (1, 256)).repeat(2, 0)),
           q((2, 1), t, 0.25, zp=ZP[t] - 3), i32(1)]
    check_on_device(Op.CONCATENATION, ins, t, 2, kind="quant_concatenation", scale=0.25, zero_point=ZP[t] - 3)


@pytest.mark.parametrize("t", [Q8, S8])
@pytest.mark.parametrize("op", [Op.MAXIMUM, Op.MINIMUM])
def test_maximum_minimum(t, op):
    a = q((256, 1), t, 0.3, value=every_value(t, (256, 1)))
    b = q((1, 256), t, 0.07, zp=ZP[t] + 40, value=every_value(t, (1, 256)))
    check_on_device(op, [a, b], t, 2, kind=f"quant_{op.name.lower()}", scale=0.2, zero_point=ZP[t] - 5)


@pytest.mark.parametrize("t", [Q8, S8])
def test_select(t):
    cond = tensor(T.TENSOR_BOOL8, rng.integers(0, 2, (4, 5)).astype(bool))
    check_on_device(Op.SELECT, [cond, q((4, 5), t, 0.3), q((4, 5), t, 0.1, zp=ZP[t] + 1)], t, 2,
                    kind="quant_select", scale=0.2, zero_point=ZP[t])


@pytest.mark.parametrize("scales", [(0.5, 0.25, 0.5), (0.1, 0.02, 0.3)])
def test_prelu_every_pair(scales):
    s, sa, so = scales
    x = q((256, 1), Q8, s, value=every_value(Q8, (256, 1)))
    alpha = q((1, 256), Q8, sa, zp=50, value=every_value(Q8, (1, 256)))
    check_on_device(Op.PRELU, [x, alpha], Q8, 2, kind="quant_prelu", scale=so, zero_point=120)


@pytest.mark.parametrize("t", [Q8, S8])
@pytest.mark.parametrize("op", [Op.EQUAL, Op.NOT_EQUAL, Op.GREATER, Op.GREATER_EQUAL, Op.LESS, Op.LESS_EQUAL])
def test_comparisons_every_pair(t, op):
    a = q((256, 1), t, 0.5, value=every_value(t, (256, 1)))
    b = q((1, 256), t, 0.25, zp=ZP[t] + 7, value=every_value(t, (1, 256)))   # many equal real values
    check_on_device(op, [a, b], T.TENSOR_BOOL8, 2, kind="quant_compare")

