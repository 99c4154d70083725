"""SOFTMAX and LOG_SOFTMAX along one axis, with beta.

Float kernels subtract the slice maximum first (as the reference) and compute float16 in float32.
Quantized SOFTMAX is the reference's fixed-point kernel (gemmlowp / TFLite Softmax): input
differences from the slice maximum are rescaled by beta * scale to a Q5.26 value, exponentiated
with gemmlowp's exp_on_negative_values, summed in Q12.19, and divided with the Newton-Raphson
reciprocal; the output has scale 1/256. Also the gemmlowp fixed-point helpers the quantized
normalization kernels use.
"""
from __future__ import annotations

import math

import numpy as np

from ..hal.types import OperandType as T
from ..hal.types import OperationType as Op
from .dtypes import quant_range
from .quant import (
    INT32_MAX,
    INT32_MIN,
    quantize_multiplier_greater_than_one,
    rounding_divide_by_pot,
    saturating_rounding_doubling_high_mul,
    wrap_int32,
)
from .reduce import check_max_rank, const_scalar, ranks_before_v1_2, resolve_axis
from .registry import HalVersion as V
from .registry import OpContext, OpError, OpSpec, register, sig

_F32, _F16, _Q8, _Q8S = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED
_SOFTMAX_OUT_ZP = {_Q8: 0, _Q8S: -128}


# ---- gemmlowp fixed point (int64 arrays holding int32 raw values) ---------------------------
fp_mul = saturating_rounding_doubling_high_mul  # FixedPoint<a> * FixedPoint<b> -> FixedPoint<a+b>


def sat_shift_left(x, n: int) -> np.ndarray:
    """SaturatingRoundingMultiplyByPOT with a positive exponent."""
    return np.clip(np.asarray(x, dtype=np.int64) << n, INT32_MIN, INT32_MAX)


def clz32(x) -> np.ndarray:
    """CountLeadingZeros of uint32 values (32 for 0)."""
    x = np.asarray(x, dtype=np.int64) & 0xFFFFFFFF
    _, exp = np.frexp(x.astype(np.float64))  # exact: x < 2^53, exp = bit length
    return np.where(x == 0, 32, 32 - exp).astype(np.int64)


def _exp_quarter_interval(a: np.ndarray) -> np.ndarray:
    """exp_on_interval_between_negative_one_quarter_and_0_excl, Q0.31 in and out."""
    constant_term, one_third = 1895147668, 715827883
    x = wrap_int32(a + (1 << 28))
    x2 = fp_mul(x, x)
    x3 = fp_mul(x2, x)
    x4 = fp_mul(x2, x2)
    x4_over_4 = rounding_divide_by_pot(x4, 2)
    poly = rounding_divide_by_pot(wrap_int32(fp_mul(wrap_int32(x4_over_4 + x3), one_third) + x2), 1)
    return wrap_int32(constant_term + fp_mul(constant_term, wrap_int32(x + poly)))


_EXP_BARREL = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308),
               (2, 39332535), (3, 720401), (4, 242))


def exp_on_negative_values(a: np.ndarray, integer_bits: int) -> np.ndarray:
    """gemmlowp exp_on_negative_values: Q(integer_bits) input <= 0, Q0.31 output."""
    frac = 31 - integer_bits
    quarter = 1 << (frac - 2)
    a = np.asarray(a, dtype=np.int64)
    a_mod = (a & (quarter - 1)) - quarter
    result = _exp_quarter_interval(sat_shift_left(a_mod, integer_bits))
    remainder = wrap_int32(a_mod - a)
    for exponent, multiplier in _EXP_BARREL:
        if integer_bits > exponent:
            bit = (remainder & (1 << (frac + exponent))) != 0
            result = np.where(bit, fp_mul(result, multiplier), result)
    if integer_bits > 5:
        result = np.where(a < -(1 << (36 - integer_bits)), 0, result)  # below -32: exp is 0
    return np.where(a == 0, INT32_MAX, result)


def one_over_one_plus_x_for_x_in_0_1(a: np.ndarray) -> np.ndarray:
    """gemmlowp Newton-Raphson 1 / (1 + x), Q0.31 in and out."""
    s = np.asarray(a, dtype=np.int64) + INT32_MAX
    half_denominator = np.where(s >= 0, (s + 1) // 2, -((-s + 1) // 2))  # RoundingHalfSum(a, 1)
    x = wrap_int32(1515870810 + fp_mul(half_denominator, -1010580540))  # Q2.29: 48/17 - 32/17 d
    one_q2 = 1 << 29
    for _ in range(3):
        hdx = fp_mul(half_denominator, x)
        x = wrap_int32(x + sat_shift_left(fp_mul(x, wrap_int32(one_q2 - hdx)), 2))
    return sat_shift_left(x, 1)


# ---- SOFTMAX -------------------------------------------------------------------------------
def _softmax_quant(x: np.ndarray, beta: float, in_scale: float, out_type: int) -> np.ndarray:
    """Softmax over the last axis of raw quantized values, the reference's fixed-point way."""
    int_bits, acc_bits = 5, 12
    real = min(1.0 * beta * float(np.float32(in_scale)) * (1 << (31 - int_bits)), (1 << 31) - 1.0)
    if real <= 1.0:
        raise OpError("SOFTMAX: beta * input scale is too small for the quantized kernel")
    multiplier, left_shift = quantize_multiplier_greater_than_one(real)
    radius = math.floor(((1 << int_bits) - 1) * (1 << (31 - int_bits)) / (1 << left_shift))
    diff = x.astype(np.int64) - np.max(x, axis=-1, keepdims=True).astype(np.int64)
    valid = diff >= -radius
    scaled = fp_mul(wrap_int32(diff * (1 << left_shift)), multiplier)
    exps = exp_on_negative_values(scaled, int_bits)
    sum_exps = wrap_int32(np.sum(np.where(valid, rounding_divide_by_pot(exps, acc_bits), 0), axis=-1, keepdims=True))
    headroom = clz32(sum_exps)
    bits_over_unit = acc_bits - headroom
    shifted_minus_one = wrap_int32(((sum_exps & 0xFFFFFFFF) << headroom) - (1 << 31))
    scale = one_over_one_plus_x_for_x_in_0_1(shifted_minus_one)
    out = rounding_divide_by_pot(fp_mul(scale, exps), bits_over_unit + 31 - 8)
    lo, hi = quant_range(out_type)
    out = out + _SOFTMAX_OUT_ZP[out_type]
    return np.where(valid, np.clip(out, lo, hi), lo)


def _validate_softmax(ctx: OpContext) -> None:
    check_max_rank(ctx)
    beta = const_scalar(ctx, 1)
    if beta is not None and not beta > 0:
        raise OpError("SOFTMAX: beta must be positive")
    dims = ctx.in_operand(0).dimensions
    axis = const_scalar(ctx, 2)
    if dims and axis is not None:
        resolve_axis(int(axis), len(dims))
    _check_softmax_output(ctx)


def _model_rules_softmax(ctx: OpContext) -> None:
    _validate_softmax(ctx)
    ranks_before_v1_2(ctx, (2, 4))


def _check_softmax_output(ctx: OpContext) -> None:
    t = ctx.in_operand(0).type
    if t in _SOFTMAX_OUT_ZP:
        o = ctx.out_operand(0)
        if np.float32(o.scale) != np.float32(1.0 / 256) or o.zeroPoint != _SOFTMAX_OUT_ZP[t]:
            raise OpError(f"SOFTMAX: quantized output needs scale 1/256 and zeroPoint {_SOFTMAX_OUT_ZP[t]}")


def _softmax_reference(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.input(0)
    if not 1 <= x.ndim <= 4:
        raise OpError(f"SOFTMAX: input rank {x.ndim} not in [1, 4]")
    beta = float(ctx.scalar(1))
    if not beta > 0:
        raise OpError("SOFTMAX: beta must be positive")
    axis = resolve_axis(int(ctx.scalar(2, -1)), x.ndim)
    _validate_softmax(ctx)
    if x.size == 0:
        return [x.copy()]
    xt = np.moveaxis(x, axis, -1)
    if x.dtype in (np.uint8, np.int8):
        y = _softmax_quant(xt, beta, ctx.in_operand(0).scale, ctx.in_operand(0).type)
    else:
        xf = xt.astype(np.float32)
        with np.errstate(over="ignore", invalid="ignore"):
            e = np.exp((xf - np.max(xf, axis=-1, keepdims=True)) * np.float32(beta))
            y = e / np.sum(e, axis=-1, keepdims=True)
    return [np.moveaxis(y, -1, axis)]


# ---- LOG_SOFTMAX ---------------------------------------------------------------------------
def _validate_log_softmax(ctx: OpContext) -> None:
    dims = ctx.in_operand(0).dimensions
    axis = const_scalar(ctx, 2)
    if dims and axis is not None:
        resolve_axis(int(axis), len(dims))


def _log_softmax_reference(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.input(0)
    if x.ndim == 0:
        raise OpError("LOG_SOFTMAX: input rank must be at least 1")
    beta = np.float32(ctx.scalar(1))
    axis = resolve_axis(int(ctx.scalar(2)), x.ndim)
    _validate_log_softmax(ctx)
    if x.size == 0:
        return [x.copy()]
    xf = x.astype(np.float32)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        shifted = (xf - np.max(xf, axis=axis, keepdims=True)) * beta
        y = shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))
    return [y]


def _softmax_sigs() -> list:
    out = []
    for t, beta_t, v in ((_F32, T.FLOAT32, V.V1_0), (_Q8, T.FLOAT32, V.V1_0),
                         (_F16, T.FLOAT16, V.V1_2), (_Q8S, T.FLOAT32, V.V1_3)):
        if v < V.V1_2:
            out.append(sig([t, beta_t], [t], v))  # the axis input arrived in 1.2
        out.append(sig([t, beta_t, T.INT32], [t], max(v, V.V1_2), min_inputs=2))
    return out


register(OpSpec(Op.SOFTMAX, _softmax_sigs(), _softmax_reference, validate=_model_rules_softmax, lowering="reduction"))
register(OpSpec(Op.LOG_SOFTMAX,
                [sig([t, s, T.INT32], [t], V.V1_2) for t, s in ((_F32, T.FLOAT32), (_F16, T.FLOAT16))],
                _log_softmax_reference, validate=_validate_log_softmax, lowering="reduction"))
