"""QUANTIZED_16BIT_LSTM: the reference's fixed-point LSTM cell (TFLite LstmCell<4> on uint8 /
int16), bit-exact.

The gate pre-activations are a uint8 fully-connected layer rescaled to int16 Q3.12; sigmoid and
tanh are gemmlowp's int16 fixed-point logistic/tanh, reproduced here on int64 numpy arrays that
hold int16 values (wrapping and saturating exactly where the C++ does); QUANTIZED_LSTM
(quantized_lstm.py) shares them.
"""
from __future__ import annotations

import math

import numpy as np

from ..hal.types import OperandType as T
from ..hal.types import OperationType
from .quant import multiply_by_quantized_multiplier, quantize_multiplier
from .registry import HalVersion, OpContext, OpError, OpSpec, register, sig

I16_MIN, I16_MAX = -32768, 32767

# ---- gemmlowp int16 fixed-point primitives -------------------------------------------------


def _wrap(x):
    return ((np.asarray(x, dtype=np.int64) + 32768) & 0xFFFF) - 32768


def _tdiv(a, d: int):
    """C integer division (truncates toward zero)."""
    q = np.abs(a) // d
    return np.where(a < 0, -q, q)


def _mul(a, b):
    """SaturatingRoundingDoublingHighMul for int16."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    ab = a * b
    nudge = np.where(ab >= 0, 1 << 14, 1 - (1 << 14))
    res = _wrap(_tdiv(ab + nudge, 1 << 15))
    return np.where((a == b) & (a == I16_MIN), I16_MAX, res)


def _rdpot(x, exponent: int):
    x = np.asarray(x, dtype=np.int64)
    mask = (1 << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + (remainder > threshold)


def _mul_pot(x, exponent: int):
    """SaturatingRoundingMultiplyByPOT for int16."""
    x = np.asarray(x, dtype=np.int64)
    if exponent == 0:
        return x
    if exponent < 0:
        return _rdpot(x, -exponent)
    threshold = (1 << (15 - exponent)) - 1
    res = _wrap(x << exponent)
    res = np.where(x > threshold, I16_MAX, res)
    return np.where(x < -threshold, I16_MIN, res)


def _rescale(x, src_bits: int, dst_bits: int):
    return _mul_pot(x, src_bits - dst_bits)


def _const(raw32: int) -> int:
    """A gemmlowp constant given as int32 raw, rounding-shifted to int16."""
    return int(_rdpot(np.int64(raw32), 16))


def _add(a, b):
    return _wrap(np.asarray(a, dtype=np.int64) + b)


def _sub(a, b):
    return _wrap(np.asarray(a, dtype=np.int64) - b)


def _sat_add(a, b):
    return np.clip(np.asarray(a, dtype=np.int64) + b, I16_MIN, I16_MAX)


def _half_sum(a, b):
    s = np.asarray(a, dtype=np.int64) + b
    return _wrap(_tdiv(s + np.where(s >= 0, 1, -1), 2))


def _exp_quarter(a):
    """exp(x) for x in [-1/4, 0), F0 -> F0."""
    constant_term = _const(1895147668)
    one_third = _const(715827883)
    x = _add(a, 1 << 12)
    x2 = _mul(x, x)
    x3 = _mul(x2, x)
    x4 = _mul(x2, x2)
    x4_over_4 = _mul_pot(x4, -2)
    poly = _mul_pot(_add(_mul(_add(x4_over_4, x3), one_third), x2), -1)
    return _sat_add(constant_term, _mul(constant_term, _add(x, poly)))


_BARREL = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308), (2, 39332535),
           (3, 720401), (4, 242))


def _exp_negative(a, int_bits: int):
    """exp(x) for x <= 0 given with `int_bits` integer bits; result F0."""
    frac = 15 - int_bits
    quarter = 1 << (frac - 2)
    a_mod = _sub(np.asarray(a, dtype=np.int64) & (quarter - 1), quarter)
    result = _exp_quarter(_rescale(a_mod, int_bits, 0))
    remainder = _sub(a_mod, a)
    for exponent, multiplier in _BARREL:
        if int_bits > exponent:
            bit = int(_wrap(1 << (frac + exponent)))
            result = np.where((remainder & bit) != 0, _mul(result, _const(multiplier)), result)
    if int_bits > 5:
        clamp = _const(-(1 << (36 - int_bits)))
        result = np.where(a < clamp, 0, result)
    return np.where(np.asarray(a) == 0, I16_MAX, result)


def _newton_reciprocal(a):
    """The shared Newton-Raphson loop: x ~ 1 / ((1 + a) / 2) in F2."""
    half_den = _half_sum(a, I16_MAX)
    x = _add(_const(1515870810), _mul(half_den, _const(-1010580540)))
    one = 1 << 13
    for _ in range(3):
        x = _add(x, _rescale(_mul(x, _sub(one, _mul(half_den, x))), 4, 2))
    return x


def fx_logistic(a, int_bits: int):
    a = np.asarray(a, dtype=np.int64)
    positive = a > 0
    abs_in = np.where(positive, a, _wrap(-a))
    if_positive = _rescale(_newton_reciprocal(_exp_negative(_wrap(-abs_in), int_bits)), 1, 0)
    if_negative = _sub(I16_MAX, if_positive)
    return np.where(a == 0, _const(1 << 30), np.where(positive, if_positive, if_negative))


def fx_tanh(a, int_bits: int):
    a = np.asarray(a, dtype=np.int64)
    negative = a < 0
    n = np.where(negative, a, _wrap(-a))
    # ExactMulByPot<1>: same raw, one more integer bit
    t = _rescale(_sub(_newton_reciprocal(_exp_negative(n, int_bits + 1)), 1 << 13), 2, 0)
    return np.where(a == 0, 0, np.where(negative, _wrap(-t), t))


# ---- QUANTIZED_16BIT_LSTM ------------------------------------------------------------------

STATE_INTEGER_BITS = 4


def quantized_16bit_lstm_step(x, prev_out, weights, w_zero_point: int, bias, prev_cell,
                              accum_multiplier: int, accum_shift: int):
    """One cell step of the TFLite kernel: weights [4*n, input_size + n] multiply the row-wise
    concatenation [x, prev_out]; gates are stacked [input, cell, forget, output] along the rows.
    Returns (cell int16, output uint8)."""
    concat = np.concatenate([x, prev_out], axis=1).astype(np.int64) - 128
    acc = bias.astype(np.int64) + concat @ (weights.astype(np.int64) - w_zero_point).T
    acc = multiply_by_quantized_multiplier(acc, accum_multiplier, accum_shift)
    acc = np.clip(acc, I16_MIN, I16_MAX)
    n = prev_cell.shape[1]
    g_in, g_cell, g_forget, g_out = (acc[:, k * n:(k + 1) * n] for k in range(4))
    input_gate = fx_logistic(g_in, 3)
    modulation = fx_tanh(g_cell, 3)
    forget_gate = fx_logistic(g_forget, 3)
    output_gate = fx_logistic(g_out, 3)
    input_times_mod = _mul(input_gate, modulation)
    forget_times_prev = _mul(forget_gate, prev_cell.astype(np.int64))
    new_state = _sat_add(_rescale(input_times_mod, 0, STATE_INTEGER_BITS), forget_times_prev)
    activ = _mul(output_gate, fx_tanh(_rescale(new_state, STATE_INTEGER_BITS, 3), 3))
    out = 128 + np.clip(_rdpot(activ, 8), -128, 127)
    return new_state.astype(np.int16), out.astype(np.uint8)


def _q16_shape(node: OpContext) -> list[tuple[int, ...]]:
    """cell state and output, both [batch, outputSize], checking every input's shape."""
    x, prev_cell, prev_out = node.in_shape(0), node.in_shape(13), node.in_shape(14)
    if len(x) != 2 or len(prev_out) != 2 or len(prev_cell) != 2:
        raise OpError("input, state and output must be 2-D")
    (batch, input_size), n = x, prev_out[1]
    if prev_out[0] != batch or prev_cell != (batch, n):
        raise OpError("state shapes do not match the input")
    if any(node.in_shape(1 + k) != (n, input_size if k < 4 else n) for k in range(8)):
        raise OpError("weights have the wrong shape")
    if any(node.in_shape(i) != (n,) for i in range(9, 13)):
        raise OpError("biases must be [output_size]")
    return [(batch, n), (batch, n)]


def _q16_reference(ctx: OpContext) -> list[np.ndarray]:
    _q16_shape(ctx)
    x, prev_cell, prev_out = ctx.input(0), ctx.input(13), ctx.input(14)
    op_in, op_prev, op_cell = ctx.in_operand(0), ctx.in_operand(14), ctx.in_operand(13)
    for o, what in ((op_in, "input"), (op_prev, "previous output")):
        if o.scale != 1.0 / 128.0 or o.zeroPoint != 128:
            raise OpError(f"{what} must have scale 1/128 and zeroPoint 128")
    w_ops = [ctx.in_operand(i) for i in range(1, 9)]
    w_scale, w_zp = w_ops[0].scale, w_ops[0].zeroPoint
    if w_scale == 0 or any(o.scale != w_scale or o.zeroPoint != w_zp for o in w_ops):
        raise OpError("all weights must share one non-zero scale and zero point")
    weights = [ctx.input(i) for i in range(1, 9)]
    b_ops = [ctx.in_operand(i) for i in range(9, 13)]
    b_scale = b_ops[0].scale
    if float(np.float32(b_scale)) != float(np.float32(w_scale / 128.0)) or \
            any(o.scale != b_scale or o.zeroPoint != 0 for o in b_ops):
        raise OpError("biases must have scale weights_scale / 128 and zeroPoint 0")
    biases = [ctx.input(i) for i in range(9, 13)]
    if op_cell.zeroPoint != 0 or op_cell.scale <= 0 or \
            round(math.log2(op_cell.scale)) + 15 != STATE_INTEGER_BITS or \
            abs(math.log2(op_cell.scale) - round(math.log2(op_cell.scale))) > 1e-3:
        raise OpError("cell state must have scale 2^-11 and zeroPoint 0")
    # gate order of the reference's concatenated weights: input, cell, forget, output
    order = (0, 2, 1, 3)
    # The reference lays each gate's row out as [recurrent | input] columns, while the kernel's
    # concatenation is [input, prev_output]: kept as is to stay bit-exact with it.
    big = np.concatenate([np.concatenate([weights[4 + g], weights[g]], axis=1) for g in order])
    bias = np.concatenate([biases[g] for g in order])
    mult, shift = quantize_multiplier(4096.0 * b_scale)
    cell, out = quantized_16bit_lstm_step(x, prev_out, big, w_zp, bias, prev_cell, mult, shift)
    return [cell, out]


Q8, I32, Q16 = T.TENSOR_QUANT8_ASYMM, T.TENSOR_INT32, T.TENSOR_QUANT16_SYMM
register(OpSpec(OperationType.QUANTIZED_16BIT_LSTM,
                [sig([Q8] * 9 + [I32] * 4 + [Q16, Q8], [Q16, Q8], HalVersion.V1_2)],
                _q16_reference, shape=_q16_shape))
