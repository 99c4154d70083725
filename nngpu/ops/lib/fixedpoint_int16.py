"""gemmlowp's int16 fixed-point primitives (logistic, tanh and the arithmetic under them), on
int64 numpy arrays holding int16 values, wrapping and saturating exactly where the C++ does; the
reference's QUANTIZED_16BIT_LSTM and QUANTIZED_LSTM cells share them."""
from __future__ import annotations

import numpy as np

I16_MIN, I16_MAX = -32768, 32767


def _wrap(x):
    return ((np.asarray(x, dtype=np.int64) + 32768) & 0xFFFF) - 32768


def _tdiv(a, d: int):
    """C integer division (truncates toward zero)."""
    q = np.abs(a) // d
    return np.where(a < 0, -q, q)


def fx_mul(a, b):
    """SaturatingRoundingDoublingHighMul for int16."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    ab = a * b
    nudge = np.where(ab >= 0, 1 << 14, 1 - (1 << 14))
    res = _wrap(_tdiv(ab + nudge, 1 << 15))
    return np.where((a == b) & (a == I16_MIN), I16_MAX, res)


def fx_rdpot(x, exponent: int):
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
        return fx_rdpot(x, -exponent)
    threshold = (1 << (15 - exponent)) - 1
    res = _wrap(x << exponent)
    res = np.where(x > threshold, I16_MAX, res)
    return np.where(x < -threshold, I16_MIN, res)


def fx_rescale(x, src_bits: int, dst_bits: int):
    return _mul_pot(x, src_bits - dst_bits)


def _const(raw32: int) -> int:
    """A gemmlowp constant given as int32 raw, rounding-shifted to int16."""
    return int(fx_rdpot(np.int64(raw32), 16))


def _add(a, b):
    return _wrap(np.asarray(a, dtype=np.int64) + b)


def _sub(a, b):
    return _wrap(np.asarray(a, dtype=np.int64) - b)


def fx_sat_add(a, b):
    return np.clip(np.asarray(a, dtype=np.int64) + b, I16_MIN, I16_MAX)


def _half_sum(a, b):
    s = np.asarray(a, dtype=np.int64) + b
    return _wrap(_tdiv(s + np.where(s >= 0, 1, -1), 2))


def _exp_quarter(a):
    """exp(x) for x in [-1/4, 0), F0 -> F0."""
    constant_term = _const(1895147668)
    one_third = _const(715827883)
    x = _add(a, 1 << 12)
    x2 = fx_mul(x, x)
    x3 = fx_mul(x2, x)
    x4 = fx_mul(x2, x2)
    x4_over_4 = _mul_pot(x4, -2)
    poly = _mul_pot(_add(fx_mul(_add(x4_over_4, x3), one_third), x2), -1)
    return fx_sat_add(constant_term, fx_mul(constant_term, _add(x, poly)))


_BARREL = ((-2, 1672461947), (-1, 1302514674), (0, 790015084), (1, 290630308), (2, 39332535),
           (3, 720401), (4, 242))


def _exp_negative(a, int_bits: int):
    """exp(x) for x <= 0 given with `int_bits` integer bits; result F0."""
    frac = 15 - int_bits
    quarter = 1 << (frac - 2)
    a_mod = _sub(np.asarray(a, dtype=np.int64) & (quarter - 1), quarter)
    result = _exp_quarter(fx_rescale(a_mod, int_bits, 0))
    remainder = _sub(a_mod, a)
    for exponent, multiplier in _BARREL:
        if int_bits > exponent:
            bit = int(_wrap(1 << (frac + exponent)))
            result = np.where((remainder & bit) != 0, fx_mul(result, _const(multiplier)), result)
    if int_bits > 5:
        clamp = _const(-(1 << (36 - int_bits)))
        result = np.where(a < clamp, 0, result)
    return np.where(np.asarray(a) == 0, I16_MAX, result)


def _newton_reciprocal(a):
    """The shared Newton-Raphson loop: x ~ 1 / ((1 + a) / 2) in F2."""
    half_den = _half_sum(a, I16_MAX)
    x = _add(_const(1515870810), fx_mul(half_den, _const(-1010580540)))
    one = 1 << 13
    for _ in range(3):
        x = _add(x, fx_rescale(fx_mul(x, _sub(one, fx_mul(half_den, x))), 4, 2))
    return x


def fx_logistic(a, int_bits: int):
    a = np.asarray(a, dtype=np.int64)
    positive = a > 0
    abs_in = np.where(positive, a, _wrap(-a))
    if_positive = fx_rescale(_newton_reciprocal(_exp_negative(_wrap(-abs_in), int_bits)), 1, 0)
    if_negative = _sub(I16_MAX, if_positive)
    return np.where(a == 0, _const(1 << 30), np.where(positive, if_positive, if_negative))


def fx_tanh(a, int_bits: int):
    a = np.asarray(a, dtype=np.int64)
    negative = a < 0
    n = np.where(negative, a, _wrap(-a))
    # ExactMulByPot<1>: same raw, one more integer bit
    t = fx_rescale(_sub(_newton_reciprocal(_exp_negative(n, int_bits + 1)), 1 << 13), 2, 0)
    return np.where(a == 0, 0, np.where(negative, _wrap(-t), t))
