"""Activations: RELU, RELU1, RELU6, LOGISTIC, TANH, PRELU, HARD_SWISH, ELU.

Quantized LOGISTIC and TANH reproduce the reference's gemmlowp fixed-point evaluation (input
rescaled to Q4.27, exp by barrel shifter, Newton-Raphson reciprocal); quantized HARD_SWISH is
TFLite's 16-bit fixed-point kernel; quantized PRELU requantizes with two multipliers.
"""
from __future__ import annotations

import math

import numpy as np

from ..hal.types import FusedActivationFunc as Act
from ..hal.types import OperandType as T
from ..hal.types import OperationType as Op
from .dtypes import dtype_of, quant_range
from .elementwise import broadcast_shape, check_rank, float_compute, quant_params, same_type_sigs
from .quant import (
    INT32_MAX,
    QUANT8_TYPES,
    activation_range_quant,
    multiply_by_quantized_multiplier,
    quantize_multiplier,
    rounding_divide_by_pot,
)
from . import fixedpoint as fp
from .registry import HalVersion as V
from .registry import OpContext, OpError, OpSpec, register, sig

_F32, _F16, _Q8, _Q8S = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED


# ---- RELU family ---------------------------------------------------------------------------
def _validate_same_quant(ctx: OpContext) -> None:
    check_rank(ctx, (0,))
    if ctx.in_operand(0).type in QUANT8_TYPES:
        i, o = ctx.in_operand(0), ctx.out_operand(0)
        if np.float32(i.scale) != np.float32(o.scale) or i.zeroPoint != o.zeroPoint:
            raise OpError("output scale and zeroPoint must equal the input's")


def _relu_reference(act: Act):
    lo_f, hi_f = {Act.RELU: (0.0, math.inf), Act.RELU1: (-1.0, 1.0), Act.RELU6: (0.0, 6.0)}[act]

    def reference(ctx: OpContext) -> list[np.ndarray]:
        x = ctx.input(0)
        t = ctx.in_operand(0).type
        if t in QUANT8_TYPES:
            _validate_same_quant(ctx)
            s, z = quant_params(ctx, 0)
            lo, hi = activation_range_quant(act, s, z, t)
            return [np.clip(x, lo, hi).astype(x.dtype)]
        return [np.clip(x, lo_f, hi_f).astype(x.dtype)]

    return reference


_RELU_TYPES = [(_F32, V.V1_0), (_Q8, V.V1_0), (_F16, V.V1_2), (_Q8S, V.V1_3)]
for _op, _act in {Op.RELU: Act.RELU, Op.RELU1: Act.RELU1, Op.RELU6: Act.RELU6}.items():
    register(OpSpec(_op, same_type_sigs(_RELU_TYPES, 1), _relu_reference(_act),
                    validate=_validate_same_quant))


def _rescaled_input(ctx: OpContext, x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Input centred and rescaled to Q4.27, with the masks of the saturated ranges."""
    s, z = quant_params(ctx, 0)
    real_multiplier = float(np.float32(s)) * float(1 << 27)
    multiplier, shift = quantize_multiplier(real_multiplier)
    radius = math.floor(15.0 * (1 << 27) / 2.0 ** shift)
    centered = x.astype(np.int64) - z
    rescaled = multiply_by_quantized_multiplier(centered, multiplier, shift)
    return rescaled, centered <= -radius, centered >= radius


def _check_out_quant(ctx: OpContext, scale: float, zero_point: int) -> None:
    o = ctx.out_operand(0)
    if np.float32(o.scale) != np.float32(scale) or o.zeroPoint != zero_point:
        raise OpError(f"output scale must be {scale} and zeroPoint {zero_point}")


_OUT_QUANT = {(Op.LOGISTIC, _Q8): (1 / 256, 0), (Op.LOGISTIC, _Q8S): (1 / 256, -128),
              (Op.TANH, _Q8): (1 / 128, 128), (Op.TANH, _Q8S): (1 / 128, 0)}


def _validate_out_quant(op: Op):
    def validate(ctx: OpContext) -> None:
        check_rank(ctx, (0,))
        key = (op, ctx.in_operand(0).type)
        if key in _OUT_QUANT:
            _check_out_quant(ctx, *_OUT_QUANT[key])

    return validate


def _logistic(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.input(0)
    t = ctx.in_operand(0).type
    if t not in QUANT8_TYPES:
        with np.errstate(over="ignore"):
            xf = float_compute(x)
            return [(np.float32(1) / (np.float32(1) + np.exp(-xf))).astype(x.dtype)]
    _validate_out_quant(Op.LOGISTIC)(ctx)
    rescaled, low, high = _rescaled_input(ctx, x)
    y = rounding_divide_by_pot(fp.logistic(rescaled), 23)   # Q0.31 -> units of 1/256
    if t == _Q8:
        y = np.where(high, 255, np.where(low, 0, np.minimum(y, 255)))
    else:
        y = np.where(high, 127, np.where(low, -128, np.clip(y - 128, -128, 127)))
    return [y.astype(dtype_of(t))]


def _tanh(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.input(0)
    t = ctx.in_operand(0).type
    if t not in QUANT8_TYPES:
        return [np.tanh(float_compute(x)).astype(x.dtype)]
    _validate_out_quant(Op.TANH)(ctx)
    rescaled, low, high = _rescaled_input(ctx, x)
    y = rounding_divide_by_pot(fp.tanh(rescaled), 24)       # Q0.31 -> units of 1/128
    if t == _Q8:
        y = np.where(high, 255, np.where(low, 0, np.minimum(y + 128, 255)))
    else:
        y = np.where(high, 127, np.where(low, -128, np.clip(y, -128, 127)))
    return [y.astype(dtype_of(t))]


register(OpSpec(Op.LOGISTIC, same_type_sigs(_RELU_TYPES, 1), _logistic,
                validate=_validate_out_quant(Op.LOGISTIC)))
register(OpSpec(Op.TANH, same_type_sigs([(_F32, V.V1_0), (_F16, V.V1_2), (_Q8, V.V1_2), (_Q8S, V.V1_3)], 1),
                _tanh, validate=_validate_out_quant(Op.TANH)))


# ---- PRELU ---------------------------------------------------------------------------------
def _prelu(ctx: OpContext) -> list[np.ndarray]:
    x, alpha = ctx.input(0), ctx.input(1)
    broadcast_shape(x.shape, alpha.shape)
    t = ctx.in_operand(0).type
    if t not in QUANT8_TYPES:
        xf, af = float_compute(x), float_compute(alpha)
        # min(x, 0) * alpha + max(x, 0): the same values as where(x >= 0, x, alpha * x), 4x faster.
        y = np.minimum(xf, 0)
        y = y * af if y.shape != np.broadcast_shapes(y.shape, af.shape) else np.multiply(y, af, out=y)
        y += np.maximum(xf, 0)
        return [y.astype(x.dtype, copy=False)]
    s, z = quant_params(ctx, 0)
    sa, za = quant_params(ctx, 1)
    so, zo = quant_params(ctx, 0, out=True)
    # float products and ratios as the reference forms them (float * float stays float)
    m_pos, sh_pos = quantize_multiplier(float(np.float32(s) / np.float32(so)))
    m_neg, sh_neg = quantize_multiplier(float(np.float32(s) * np.float32(sa)) / float(np.float32(so)))
    xi = x.astype(np.int64) - z
    ai = alpha.astype(np.int64) - za
    xi, ai = np.broadcast_arrays(xi, ai)
    pos = multiply_by_quantized_multiplier(xi, m_pos, sh_pos)
    neg = multiply_by_quantized_multiplier(xi * ai, m_neg, sh_neg)
    lo, hi = quant_range(t)
    return [np.clip(np.where(xi >= 0, pos, neg) + zo, lo, hi).astype(dtype_of(t))]


def _validate_prelu(ctx: OpContext) -> None:
    a, b = ctx.in_operand(0).dimensions, ctx.in_operand(1).dimensions
    if a and b and all(a) and all(b):
        broadcast_shape(tuple(a), tuple(b))


register(OpSpec(Op.PRELU, same_type_sigs([(_F16, V.V1_2), (_F32, V.V1_2), (_Q8, V.V1_2), (_Q8S, V.V1_3)], 2),
                _prelu, validate=_validate_prelu))


# ---- HARD_SWISH ----------------------------------------------------------------------------
def _srdhm16(a: np.ndarray, b: int) -> np.ndarray:
    ab = a * b
    high = np.trunc((ab + np.where(ab >= 0, 1 << 14, 1 - (1 << 14))) / (1 << 15)).astype(np.int64)
    return np.where((a == -32768) & (b == -32768), 32767, high)


def _sdhm16(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    high = np.trunc((a * b) / (1 << 15)).astype(np.int64)
    return np.where((a == -32768) & (b == -32768), 32767, high)


def _sat_left_shift16(x: np.ndarray, amount: int) -> np.ndarray:
    return np.clip(x * (1 << amount), -32768, 32767)


def _int16_multiplier(real: float) -> tuple[int, int]:
    """QuantizeMultiplier, then DownScaleInt32ToInt16Multiplier."""
    m, e = quantize_multiplier(real)
    if m >= INT32_MAX - (1 << 15):
        return 32767, e
    return (m + (1 << 15)) >> 16, e


def _hard_swish_quant(ctx: OpContext, x: np.ndarray) -> np.ndarray:
    s, z = quant_params(ctx, 0)
    so, zo = quant_params(ctx, 0, out=True)
    t = ctx.out_operand(0).type
    hires_scale = np.float32(1.0 / 128.0) * np.float32(s)
    out_m, out_e = _int16_multiplier(float(hires_scale / np.float32(so)))
    relu_m, relu_e = _int16_multiplier(float(hires_scale / np.float32(3.0 / 32768.0)))
    if out_e > 0:
        raise OpError("HARD_SWISH: output scale too small for the input scale")
    hires = (x.astype(np.int64) - z) * (1 << 7)
    preshift = _srdhm16(hires, out_m)
    reluish = hires
    if relu_e > 0:
        reluish = _sat_left_shift16(reluish, relu_e - 1)
    reluish = _srdhm16(reluish, relu_m)
    if relu_e > 0:
        reluish = _sat_left_shift16(reluish, 1)
    if relu_e < 0:
        reluish = rounding_divide_by_pot(reluish, -relu_e)
    reluish = (reluish + (1 << 15)) >> 1
    y = rounding_divide_by_pot(_sdhm16(reluish, preshift), -out_e) + zo
    lo, hi = quant_range(t)
    return np.clip(y, lo, hi).astype(dtype_of(t))


def _hard_swish(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.input(0)
    if ctx.in_operand(0).type in QUANT8_TYPES:
        return [_hard_swish_quant(ctx, x)]
    xf = float_compute(x)
    return [(xf * np.clip(xf + np.float32(3), 0, 6) / np.float32(6)).astype(x.dtype)]


register(OpSpec(Op.HARD_SWISH, same_type_sigs([(t, V.V1_3) for t in (_F16, _F32, _Q8, _Q8S)], 1),
                _hard_swish))


# ---- ELU -----------------------------------------------------------------------------------
def _elu(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.input(0)
    alpha = np.float32(ctx.scalar(1))
    xf = float_compute(x)
    with np.errstate(over="ignore"):
        y = np.maximum(xf, 0) + np.minimum(0, alpha * (np.exp(xf) - 1))
    return [y.astype(x.dtype)]


register(OpSpec(Op.ELU, [sig([_F16, T.FLOAT16], [_F16], V.V1_3), sig([_F32, T.FLOAT32], [_F32], V.V1_3)],
                _elu))
