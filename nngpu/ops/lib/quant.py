"""Fixed-point primitives of the reference quantized kernels (gemmlowp / TFLite semantics).

All functions are vectorised over int64 numpy arrays and reproduce the C integer arithmetic
bit-exactly: rounding doubling high multiply, rounding right shift, multiplier/shift encoding
of a real scale, activation clamps. Op modules build their quantized kernels from these.
"""
from __future__ import annotations

import math

import numpy as np

from ...hal.types import FusedActivationFunc as Act
from ...hal.types import OperandType as T
from .dtypes import quant_range

INT32_MIN = -(1 << 31)
INT32_MAX = (1 << 31) - 1


def round_half_away(x):
    """std::round: halves away from zero (numpy's round is half-to-even). Computed in float64:
    in float32, |x| + 0.5 itself can round up (0.49999997 would give 1)."""
    x = np.asarray(x, dtype=np.float64)
    return np.sign(x) * np.floor(np.abs(x) + 0.5)


def wrap_int32(x):
    """C int32 wrap-around of an int64 array."""
    x = np.asarray(x, dtype=np.int64)
    return ((x + (1 << 31)) & 0xFFFFFFFF) - (1 << 31)


def saturating_rounding_doubling_high_mul(a, b):
    """gemmlowp SaturatingRoundingDoublingHighMul: (a * b * 2 + 2^31 rounding) >> 32, in
    branch-free int64 arithmetic (the nudge and the truncating shift need no np.where)."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    ab = a * b
    s = ab + ((1 << 30) - (ab < 0) * ((1 << 31) - 1))   # nudge: 2^30, or 1 - 2^30 when negative
    high = (s + ((s >> 63) & ((1 << 31) - 1))) >> 31    # C division by 2^31: toward zero
    if np.any(a == INT32_MIN):                          # the one overflow: INT32_MIN * INT32_MIN
        high = np.where((a == INT32_MIN) & (b == INT32_MIN), INT32_MAX, high)
    return high


def rounding_divide_by_pot(x, exponent):
    x = np.asarray(x, dtype=np.int64)
    exponent = np.asarray(exponent, dtype=np.int64)
    mask = (np.int64(1) << exponent) - 1
    remainder = x & mask
    threshold = (mask >> 1) + (x < 0)
    return (x >> exponent) + (remainder > threshold)


def multiply_by_quantized_multiplier(x, multiplier, shift):
    """TFLite MultiplyByQuantizedMultiplier: shift > 0 is a left shift, < 0 a right shift."""
    shift = np.asarray(shift, dtype=np.int64)
    left = np.maximum(shift, 0)
    right = np.maximum(-shift, 0)
    shifted = wrap_int32(np.asarray(x, dtype=np.int64) * (np.int64(1) << left))
    return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(shifted, multiplier), right)


def multiply_by_quantized_multiplier_smaller_than_one(x, multiplier, right_shift):
    return rounding_divide_by_pot(saturating_rounding_doubling_high_mul(x, multiplier), right_shift)


def multiply_by_quantized_multiplier_greater_than_one(x, multiplier, left_shift):
    shifted = wrap_int32(np.asarray(x, dtype=np.int64) * (np.int64(1) << np.asarray(left_shift, dtype=np.int64)))
    return saturating_rounding_doubling_high_mul(shifted, multiplier)


def quantize_multiplier(real: float) -> tuple[int, int]:
    """TFLite QuantizeMultiplier: real ≈ multiplier * 2^(shift - 31), multiplier in [2^30, 2^31)."""
    if real == 0.0:
        return 0, 0
    q, shift = math.frexp(real)
    q_fixed = int(round_half_away(q * (1 << 31)))
    if q_fixed == 1 << 31:
        q_fixed //= 2
        shift += 1
    if shift < -31:
        shift, q_fixed = 0, 0
    return q_fixed, shift


def quantize_multiplier_smaller_than_one(real: float) -> tuple[int, int]:
    """(multiplier, right_shift) for 0 <= real < 1, as the reference's ...SmallerThanOneExp."""
    if real == 0.0:
        return 0, 0
    q, exp = math.frexp(real)
    right_shift = -exp
    q_fixed = int(round_half_away(q * (1 << 31)))
    if q_fixed == 1 << 31:
        q_fixed //= 2
        right_shift -= 1
    return q_fixed, right_shift


def quantize_multiplier_greater_than_one(real: float) -> tuple[int, int]:
    """(multiplier, left_shift) for real > 1."""
    q, exp = math.frexp(real)
    q_fixed = int(round_half_away(q * (1 << 31)))
    if q_fixed == 1 << 31:
        q_fixed //= 2
        exp += 1
    return q_fixed, exp


def convolution_multiplier(input_scale: float, filter_scale: float, output_scale: float) -> float:
    """GetQuantizedConvolutionMultipler: the product is formed in float32, the ratio in double."""
    product = float(np.float32(input_scale) * np.float32(filter_scale))
    return product / float(np.float32(output_scale))


def activation_range_quant(activation: int, scale: float, zero_point: int, operand_type: int) -> tuple[int, int]:
    """CalculateActivationRange{Uint8,Int8}: the clamp bounds of a fused activation, quantized."""
    qmin, qmax = quant_range(operand_type)
    scale32 = np.float32(scale)

    def q(f: float) -> int:
        return zero_point + int(round_half_away(np.float32(f) / scale32))

    if activation == Act.RELU:
        return max(qmin, q(0.0)), qmax
    if activation == Act.RELU6:
        return max(qmin, q(0.0)), min(qmax, q(6.0))
    if activation == Act.RELU1:
        return max(qmin, q(-1.0)), min(qmax, q(1.0))
    return qmin, qmax


def activation_range_float(activation: int) -> tuple[float, float]:
    return {
        Act.RELU: (0.0, math.inf),
        Act.RELU1: (-1.0, 1.0),
        Act.RELU6: (0.0, 6.0),
    }.get(activation, (-math.inf, math.inf))


def apply_activation_float(x: np.ndarray, activation: int) -> np.ndarray:
    if activation == Act.NONE:
        return x
    lo, hi = activation_range_float(activation)
    return np.clip(x, lo, hi).astype(x.dtype, copy=False)


def quantize(real: np.ndarray, scale: float, zero_point: int, operand_type: int) -> np.ndarray:
    """Float → quantized with round-half-away and saturation (the reference QUANTIZE)."""
    lo, hi = quant_range(operand_type)
    q = round_half_away(np.asarray(real, dtype=np.float64) / scale) + zero_point
    from .dtypes import dtype_of
    return np.clip(q, lo, hi).astype(dtype_of(operand_type))


def dequantize(q: np.ndarray, scale: float, zero_point: int) -> np.ndarray:
    return ((q.astype(np.int32) - zero_point) * np.float32(scale)).astype(np.float32)


VALID_ACTIVATIONS = frozenset(int(a) for a in Act)
QUANT8_TYPES = frozenset({T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED})
