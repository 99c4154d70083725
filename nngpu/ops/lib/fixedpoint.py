"""gemmlowp fixed-point arithmetic on int32 raw values held in int64 arrays (registers no op).

The quantized LOGISTIC, TANH, SOFTMAX and L2_NORMALIZATION kernels of the reference evaluate
exp, 1/(1+x) and 1/sqrt this way; sharing one copy keeps them bit-exact with each other.
A FixedPoint<k> value has k integer bits and 31 - k fractional bits."""
from __future__ import annotations

import numpy as np

from .quant import INT32_MAX, INT32_MIN, rounding_divide_by_pot, wrap_int32
from .quant import saturating_rounding_doubling_high_mul as fp_mul  # FixedPoint<a> * <b> -> <a+b>

__all__ = ["fp_mul", "sat_shift_left", "clz32", "rounding_half_sum", "exp_on_negative_values",
           "newton_reciprocal", "one_over_one_plus_x_for_x_in_0_1", "logistic", "tanh"]


def sat_shift_left(x, n: int) -> np.ndarray:
    """SaturatingRoundingMultiplyByPOT with a positive exponent."""
    return np.clip(np.asarray(x, dtype=np.int64) << n, INT32_MIN, INT32_MAX)


def clz32(x) -> np.ndarray:
    """CountLeadingZeros of uint32 values (32 for 0)."""
    x = np.asarray(x, dtype=np.int64) & 0xFFFFFFFF
    _, exp = np.frexp(x.astype(np.float64))  # exact: x < 2^53, exp = bit length
    return np.where(x == 0, 32, 32 - exp).astype(np.int64)


def rounding_half_sum(a, b) -> np.ndarray:
    """(a + b) / 2 rounded half away from zero."""
    s = np.asarray(a, dtype=np.int64) + b
    return np.where(s >= 0, (s + 1) // 2, -((-s + 1) // 2))


def _exp_quarter_interval(a: np.ndarray) -> np.ndarray:
    """exp on [-1/4, 0), Q0.31 in and out: Taylor expansion around -1/8."""
    constant_term, one_third = 1895147668, 715827883
    x = wrap_int32(a + (1 << 28))
    x2 = fp_mul(x, x)
    x3 = fp_mul(x2, x)
    x4 = fp_mul(x2, x2)
    x4_over_4 = rounding_divide_by_pot(x4, 2)
    poly = rounding_divide_by_pot(wrap_int32(fp_mul(wrap_int32(x4_over_4 + x3), one_third) + x2), 1)
    return wrap_int32(constant_term + fp_mul(constant_term, wrap_int32(x + poly)))


# exp(-2^k) in Q0.31 for the barrel shifter over the integer bits of the input.
_EXP_BARREL = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308),
               (2, 39332535), (3, 720401), (4, 242))


def exp_on_negative_values(a, integer_bits: int) -> np.ndarray:
    """exp of a FixedPoint<integer_bits> value <= 0, as Q0.31."""
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


def newton_reciprocal(half_denominator: np.ndarray) -> np.ndarray:
    """1 / (2 * half_denominator) in Q2.29: three Newton-Raphson steps from 48/17 - 32/17 d."""
    x = wrap_int32(1515870810 + fp_mul(half_denominator, -1010580540))
    for _ in range(3):
        one_minus = wrap_int32((1 << 29) - fp_mul(half_denominator, x))
        x = wrap_int32(x + sat_shift_left(fp_mul(x, one_minus), 2))
    return x


def one_over_one_plus_x_for_x_in_0_1(a) -> np.ndarray:
    """1 / (1 + x), Q0.31 in and out."""
    return sat_shift_left(newton_reciprocal(rounding_half_sum(a, INT32_MAX)), 1)


def logistic(a: np.ndarray, integer_bits: int = 4) -> np.ndarray:
    """gemmlowp::logistic: FixedPoint<integer_bits> input, Q0.31 output."""
    positive = a > 0
    e = exp_on_negative_values(np.where(positive, -a, a), integer_bits)
    r_pos = one_over_one_plus_x_for_x_in_0_1(e)
    r_neg = wrap_int32(INT32_MAX - r_pos)
    return np.where(a == 0, 1 << 30, np.where(positive, r_pos, r_neg))


def tanh(a: np.ndarray, integer_bits: int = 4) -> np.ndarray:
    """gemmlowp::tanh: FixedPoint<integer_bits> input, Q0.31 output."""
    negative = a < 0
    e = exp_on_negative_values(np.where(negative, a, -a), integer_bits + 1)  # exp(-2|a|)
    t = sat_shift_left(wrap_int32(newton_reciprocal(rounding_half_sum(e, INT32_MAX)) - (1 << 29)), 2)
    return np.where(a == 0, 0, np.where(negative, -t, t))
