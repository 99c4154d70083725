"""Activations: RELU, RELU1, RELU6, LOGISTIC, TANH, PRELU, HARD_SWISH, ELU.

Quantized LOGISTIC and TANH reproduce the reference's gemmlowp fixed-point evaluation (input
rescaled to Q4.27, exp by barrel shifter, Newton-Raphson reciprocal); quantized HARD_SWISH is
TFLite's 16-bit fixed-point kernel; quantized PRELU requantizes with two multipliers.

On the device, float activations are the reference's float32 expressions; quantized RELU*
clamp the stored value, quantized LOGISTIC / TANH / HARD_SWISH read a table of the reference
over all 256 inputs, and quantized PRELU runs the reference's fixed-point requantization.
"""
from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np

from ..hal.types import FusedActivationFunc as Act
from ..hal.types import OperandType as T
from ..hal.types import OperationType as Op
from ..ir import Compute, Expr, clamp, fn
from .lib import fixedpoint as fp
from .lib.broadcast import (
    broadcast_two,
    check_rank,
    float_compute,
    np_clip,
    quant_params,
    same_type_sigs,
    validate_broadcast,
)
from .lib.byte_tables import reference_byte_table
from .lib.device import activation, floats
from .lib.dtypes import dtype_of, quant_range
from .lib.elementwise_device import clamped, per_element, quantized, rescale, table_of, unary
from .lib.quant import (
    INT32_MAX,
    QUANT8_TYPES,
    activation_range_quant,
    multiply_by_quantized_multiplier,
    quantize_multiplier,
    rounding_divide_by_pot,
)
from .node import OpNode
from .registry import Alias, Kernel, OpContext, OpError, OpSpec, Pattern, register, same_shape, sig
from .registry import HalVersion as V

_F32, _F16, _Q8, _Q8S = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED


# ---- RELU family ---------------------------------------------------------------------------
def _validate_same_quant(ctx: OpContext) -> None:
    check_rank(ctx, (0,))
    if ctx.in_operand(0).type in QUANT8_TYPES:
        i, o = ctx.in_operand(0), ctx.out_operand(0)
        if np.float32(i.scale) != np.float32(o.scale) or i.zeroPoint != o.zeroPoint:
            raise OpError("output scale and zeroPoint must equal the input's")


_RELU_RANGE = {Act.RELU: (0.0, math.inf), Act.RELU1: (-1.0, 1.0), Act.RELU6: (0.0, 6.0)}


def _relu_reference(act: Act):
    lo_f, hi_f = _RELU_RANGE[act]

    def reference(ctx: OpContext) -> list[np.ndarray]:
        x = ctx.input(0)
        t = ctx.in_operand(0).type
        if t in QUANT8_TYPES:
            _validate_same_quant(ctx)
            s, z = quant_params(ctx, 0)
            lo, hi = activation_range_quant(act, s, z, t)
            return [np.clip(x, lo, hi).astype(x.dtype, copy=False)]
        return [np.clip(x, lo_f, hi_f).astype(x.dtype, copy=False)]

    return reference


def _relu_bind(act: Act):
    def bind(node: OpNode) -> Kernel:
        t = node.in_operand(0).type
        if t in QUANT8_TYPES:
            _validate_same_quant(node)
            lo, hi = activation_range_quant(act, *quant_params(node, 0), t)
        else:
            lo, hi = _RELU_RANGE[act]

        def kernel(ins: Sequence[np.ndarray], outs: list[np.ndarray]) -> list[np.ndarray]:
            np_clip(ins[0], lo, hi, out=outs[0])
            return outs
        return kernel
    return bind


def _quant_relu(act: Act):
    """The reference's clamp of the stored value to the activation's quantized range."""
    def build(node: OpNode, ins: list) -> Compute:
        _validate_same_quant(node)
        lo, hi = activation_range_quant(act, *quant_params(node, 0), node.in_operand(0).type)
        return per_element(node, ins, "int", lambda x: clamp(x, lo, hi), (0,))
    build.__name__ = f"quant_{act.name.lower()}"
    return build


def _float32_bind(kernel: Kernel) -> Callable[[OpNode], Kernel | None]:
    """The numpy plan binds `kernel` for float32 operands; other types run the reference."""
    return lambda node: kernel if node.in_operand(0).type == _F32 else None


def _table_bind(float_kernel: Kernel) -> Callable[[OpNode], Kernel | None]:
    """`float_kernel` for float32; for 8-bit operands a lookup in the reference's table over all
    256 inputs, indexed by the stored byte; other types run the reference."""
    def bind(node: OpNode) -> Kernel | None:
        return float_kernel if node.in_operand(0).type == _F32 else reference_byte_table(node)
    return bind


def _unary_spec(op: Op, types: list, reference: Callable, float_expr: Callable[[Expr], Expr],
                validate: Callable | None = None, quant: Callable = table_of,
                bind: Callable[[OpNode], Kernel | None] | None = None, alias: Alias = Alias.NONE) -> OpSpec:
    """An activation of one tensor: its float expression and quantized device implementation."""
    spec = register(OpSpec(op, same_type_sigs(types, 1), reference, validate=validate, shape=same_shape(0),
                           pattern=Pattern.ELEMENTWISE, bind=bind, alias=alias))
    spec.device(floats(0))(unary("float", float_expr, f"float_{op.name.lower()}"))
    spec.device(quantized)(quant)
    return spec


_RELU_TYPES = [(_F32, V.V1_0), (_Q8, V.V1_0), (_F16, V.V1_2), (_Q8S, V.V1_3)]
for _op, _act in {Op.RELU: Act.RELU, Op.RELU1: Act.RELU1, Op.RELU6: Act.RELU6}.items():
    _unary_spec(_op, _RELU_TYPES, _relu_reference(_act), lambda x, _act=_act: activation(x, _act),
                _validate_same_quant, _quant_relu(_act), _relu_bind(_act), Alias.IN_PLACE)


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
            return [(np.float32(1) / (np.float32(1) + np.exp(-xf))).astype(x.dtype, copy=False)]
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
        return [np.tanh(float_compute(x)).astype(x.dtype, copy=False)]
    _validate_out_quant(Op.TANH)(ctx)
    rescaled, low, high = _rescaled_input(ctx, x)
    y = rounding_divide_by_pot(fp.tanh(rescaled), 24)       # Q0.31 -> units of 1/128
    if t == _Q8:
        y = np.where(high, 255, np.where(low, 0, np.minimum(y + 128, 255)))
    else:
        y = np.where(high, 127, np.where(low, -128, np.clip(y, -128, 127)))
    return [y.astype(dtype_of(t))]


def _logistic_f32(ins: Sequence[np.ndarray], outs: list[np.ndarray]) -> list[np.ndarray]:
    """_logistic's float expression, in place: 1 / (1 + exp(-x))."""
    y = outs[0]
    np.negative(ins[0], out=y)
    np.exp(y, out=y)
    np.add(y, np.float32(1), out=y)
    np.divide(np.float32(1), y, out=y)
    return outs


def _tanh_f32(ins: Sequence[np.ndarray], outs: list[np.ndarray]) -> list[np.ndarray]:
    np.tanh(ins[0], out=outs[0])
    return outs


_unary_spec(Op.LOGISTIC, _RELU_TYPES, _logistic, lambda x: 1.0 / (1.0 + fn("exp", -x)),
            _validate_out_quant(Op.LOGISTIC), bind=_table_bind(_logistic_f32), alias=Alias.IN_PLACE)
_unary_spec(Op.TANH, [(_F32, V.V1_0), (_F16, V.V1_2), (_Q8, V.V1_2), (_Q8S, V.V1_3)], _tanh, lambda x: fn("tanh", x),
            _validate_out_quant(Op.TANH), bind=_table_bind(_tanh_f32), alias=Alias.IN_PLACE)


# ---- PRELU ---------------------------------------------------------------------------------
def _prelu_params(ctx: OpContext) -> tuple[tuple[int, int], tuple[int, int]]:
    """(multiplier, shift) for x >= 0 (s / so) and for x * alpha (s * sa / so), the float
    products and ratios formed as the reference forms them (float * float stays float)."""
    s, sa, so = (np.float32(o.scale) for o in (ctx.in_operand(0), ctx.in_operand(1), ctx.out_operand(0)))
    return quantize_multiplier(float(s / so)), quantize_multiplier(float(s * sa) / float(so))


def _prelu(ctx: OpContext) -> list[np.ndarray]:
    x, alpha = ctx.input(0), ctx.input(1)
    broadcast_two(ctx)
    t = ctx.in_operand(0).type
    if t not in QUANT8_TYPES:
        xf, af = float_compute(x), float_compute(alpha)
        # min(x, 0) * alpha + max(x, 0): the same values as where(x >= 0, x, alpha * x), 4x faster.
        y = np.minimum(xf, 0)
        y = y * af if y.shape != np.broadcast_shapes(y.shape, af.shape) else np.multiply(y, af, out=y)
        y += np.maximum(xf, 0)
        return [y.astype(x.dtype, copy=False)]
    (m_pos, sh_pos), (m_neg, sh_neg) = _prelu_params(ctx)
    xi = x.astype(np.int64) - ctx.in_operand(0).zeroPoint
    ai = alpha.astype(np.int64) - ctx.in_operand(1).zeroPoint
    xi, ai = np.broadcast_arrays(xi, ai)
    pos = multiply_by_quantized_multiplier(xi, m_pos, sh_pos)
    neg = multiply_by_quantized_multiplier(xi * ai, m_neg, sh_neg)
    lo, hi = quant_range(t)
    return [np.clip(np.where(xi >= 0, pos, neg) + ctx.out_operand(0).zeroPoint, lo, hi).astype(dtype_of(t))]


def _prelu_f32(ins: Sequence[np.ndarray], outs: list[np.ndarray]) -> list[np.ndarray]:
    """_prelu's float expression into the output: min(x, 0) * alpha + max(x, 0)."""
    x, y = ins[0], outs[0]
    np.minimum(x, 0, out=y)
    np.multiply(y, ins[1], out=y)
    np.add(y, np.maximum(x, 0), out=y)
    return outs


def _prelu_bind(node: OpNode) -> Kernel | None:
    broadcast_two(node)
    return _float32_bind(_prelu_f32)(node)


PRELU = register(OpSpec(Op.PRELU, same_type_sigs([(_F16, V.V1_2), (_F32, V.V1_2), (_Q8, V.V1_2), (_Q8S, V.V1_3)], 2),
                        _prelu, validate=validate_broadcast, shape=broadcast_two, pattern=Pattern.ELEMENTWISE,
                        bind=_prelu_bind))


@PRELU.device(floats(0, 1))
def _float_prelu(node: OpNode, ins: list) -> Compute:
    # min(x, 0) * alpha + max(x, 0) by comparisons: NaN stays NaN, as np.minimum / np.maximum
    return per_element(node, ins, "float", lambda x, a: (x > 0.0).where(0.0, x) * a + (x < 0.0).where(0.0, x))


@PRELU.device(quantized)
def _quant_prelu(node: OpNode, ins: list) -> Compute:
    """The reference's two requantizations: x >= 0 by s / so, else x * alpha by s * sa / so."""
    (m_pos, sh_pos), (m_neg, sh_neg) = _prelu_params(node)
    z, za, zo = node.in_operand(0).zeroPoint, node.in_operand(1).zeroPoint, node.out_operand(0).zeroPoint
    lo, hi = quant_range(node.out_operand(0).type)

    def value(x: Expr, a: Expr) -> Expr:
        xi = (x - z).cast("long")
        pos, neg = rescale(xi, m_pos, sh_pos), rescale(xi * (a - za), m_neg, sh_neg)
        return clamped((xi >= 0).where(pos, neg) + zo, lo, hi)

    return per_element(node, ins, "int", value)


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
    return [(xf * np.clip(xf + np.float32(3), 0, 6) / np.float32(6)).astype(x.dtype, copy=False)]


def _hard_swish_f32(ins: Sequence[np.ndarray], outs: list[np.ndarray]) -> list[np.ndarray]:
    """_hard_swish's float expression, in place: x * clip(x + 3, 0, 6) / 6."""
    x, y = ins[0], outs[0]
    np.add(x, np.float32(3), out=y)
    np_clip(y, 0, 6, out=y)
    np.multiply(x, y, out=y)
    np.divide(y, np.float32(6), out=y)
    return outs


_unary_spec(Op.HARD_SWISH, [(t, V.V1_3) for t in (_F16, _F32, _Q8, _Q8S)], _hard_swish,
            lambda x: x * fn("fmin", fn("fmax", x + 3.0, 0.0), 6.0) / 6.0, bind=_table_bind(_hard_swish_f32))


# ---- ELU -----------------------------------------------------------------------------------
def _elu(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.input(0)
    alpha = np.float32(ctx.scalar(1))
    xf = float_compute(x)
    with np.errstate(over="ignore"):
        y = np.maximum(xf, 0) + np.minimum(0, alpha * (np.exp(xf) - 1))
    return [y.astype(x.dtype, copy=False)]


ELU = register(OpSpec(Op.ELU, [sig([_F16, T.FLOAT16], [_F16], V.V1_3), sig([_F32, T.FLOAT32], [_F32], V.V1_3)],
                      _elu, shape=same_shape(0), pattern=Pattern.ELEMENTWISE))


@ELU.device(floats(0))
def _float_elu(node: OpNode, ins: list) -> Compute:
    alpha = float(np.float32(node.scalar(1)))

    def elu(x: Expr) -> Expr:
        # max(x, 0) + min(0, alpha * (exp(x) - 1)) by comparisons, NaN staying NaN as in
        # np.maximum / np.minimum (fmax and fmin would drop it)
        t = alpha * (fn("exp", x) - 1.0)
        return (x < 0.0).where(0.0, x) + (t > 0.0).where(0.0, t)
    return per_element(node, ins, "float", elu, (0,))
