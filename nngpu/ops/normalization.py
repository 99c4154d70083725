"""Normalizations: L2_NORMALIZATION, LOCAL_RESPONSE_NORMALIZATION, INSTANCE_NORMALIZATION.

Float kernels follow the reference formulas (float16 computed in float32). L2 normalization
divides by max(sqrt(sum of squares), 1e-6), so an all-zero slice gives zeros (the 1.3 rule).
Quantized L2 normalization is the reference's fixed-point kernel: the int32 sum of squared
offsets goes through TFLite's GetInvSqrtQuantizedMultiplierExp (a Newton-Raphson 1/sqrt in Q3),
then each offset * 128 is scaled by it; the output has scale 1/128.

On the device, L2 and local response normalization compute each element from its slice (the
quantized L2 bit-exactly, its inverse square root a device helper); instance normalization
stores each plane's mean, then its variance, before normalizing elementwise.
"""
from __future__ import annotations

import numpy as np

from ..hal.types import OperandType as T
from ..hal.types import OperationType as Op
from ..ir import Compute, Coords, Expr, broadcast, clamp, fn, reduce_sum
from ..ir import fixedpoint as fx
from .lib import reduce_device as rd
from .lib.axes import check_max_rank, const_scalar, ranks_before_v1_2, resolve_axis
from .lib.device import QUANT8, floats, types_in
from .lib.dtypes import quant_range
from .lib.fixedpoint import clz32, fp_mul, sat_shift_left
from .lib.quant import INT32_MAX, multiply_by_quantized_multiplier, rounding_divide_by_pot, wrap_int32
from .node import OpNode
from .registry import HalVersion as V
from .registry import OpContext, OpError, OpSpec, Pattern, register, same_shape, sig

_F32, _F16, _Q8, _Q8S = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED
_L2_OUT_ZP = {_Q8: 128, _Q8S: 0}
_SCALAR_OF = {_F32: T.FLOAT32, _F16: T.FLOAT16}


def _check_axis(ctx: OpContext, i: int) -> None:
    dims = ctx.in_operand(0).dimensions
    axis = const_scalar(ctx, i)
    if dims and axis is not None:
        resolve_axis(int(axis), len(dims))


def _input_up_to_rank4(ctx: OpContext) -> np.ndarray:
    x = ctx.input(0)
    if not 1 <= x.ndim <= 4:
        raise OpError(f"input rank {x.ndim} not in [1, 4]")
    return x


# ---- L2_NORMALIZATION ----------------------------------------------------------------------
def inv_sqrt_multiplier(n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """GetInvSqrtQuantizedMultiplierExp(n, reverse_shift=-1), vectorised: (multiplier, shift)
    with 1/sqrt(n) ≈ multiplier * 2^(shift - 31); shift <= 0 (a right shift)."""
    n = np.asarray(n, dtype=np.int64)
    small = n <= 1  # 0 and 1 map to the largest multiplier, no shift
    x = np.where(small, 4, n)
    shift = np.full(x.shape, 11, dtype=np.int64)
    for _ in range(2):  # input < 2^31 needs at most two divisions by 4 to go below 2^29
        big = x >= (1 << 29)
        x = np.where(big, x // 4, x)
        shift += big
    pairs = (clz32(x) - 1) // 2 - 1
    shift -= pairs
    x = x << (2 * pairs)
    f_input = x >> 1                                   # Q3.28
    half_input = rounding_divide_by_pot(f_input, 1)
    half_three = (1 << 28) + (1 << 27)                 # 1.5 in Q3.28
    r = np.full(x.shape, 1 << 28, dtype=np.int64)      # 1.0 in Q3.28
    for _ in range(5):
        r3 = sat_shift_left(fp_mul(fp_mul(r, r), r), 6)    # Q9 -> Q3
        r = sat_shift_left(wrap_int32(fp_mul(half_three, r) - fp_mul(half_input, r3)), 3)
    r = fp_mul(r, 1518500250)                            # * sqrt(2)/2
    neg = shift < 0
    r = np.where(neg, wrap_int32(r << np.where(neg, -shift, 0)), r)
    shift = np.where(neg, 0, shift)
    return np.where(small, INT32_MAX, r), np.where(small, 0, -shift)


def _l2_quant(x: np.ndarray, zero_point: int, out_type: int) -> np.ndarray:
    """l2normQuant8 of the reference, over the last axis."""
    v = x.astype(np.int64) - zero_point
    total = wrap_int32(np.sum(v * v, axis=-1, keepdims=True))
    mult, shift = inv_sqrt_multiplier(total)
    y = multiply_by_quantized_multiplier(v * 128, mult, shift) + _L2_OUT_ZP[out_type]
    lo, hi = quant_range(out_type)
    return np.clip(y, lo, hi)


def _check_l2_output(ctx: OpContext) -> None:
    t = ctx.in_operand(0).type
    if t in _L2_OUT_ZP:
        o = ctx.out_operand(0)
        if np.float32(o.scale) != np.float32(1.0 / 128) or o.zeroPoint != _L2_OUT_ZP[t]:
            raise OpError(f"L2_NORMALIZATION: output needs scale 1/128 and zeroPoint {_L2_OUT_ZP[t]}")


def _validate_l2(ctx: OpContext) -> None:
    check_max_rank(ctx)
    _check_axis(ctx, 1)
    _check_l2_output(ctx)


def _l2_reference(ctx: OpContext) -> list[np.ndarray]:
    x = _input_up_to_rank4(ctx)
    axis = resolve_axis(int(ctx.scalar(1, -1)), x.ndim)
    _validate_l2(ctx)
    if x.size == 0:
        return [x.copy()]
    xt = np.moveaxis(x, axis, -1)
    if x.dtype in (np.uint8, np.int8):
        y = _l2_quant(xt, int(ctx.in_operand(0).zeroPoint), ctx.in_operand(0).type)
    else:
        xf = xt.astype(np.float32)
        norm = np.maximum(np.sqrt(np.sum(xf * xf, axis=-1, keepdims=True)), np.float32(1e-6))
        y = xf / norm
    return [np.moveaxis(y, -1, axis)]


def _l2_sigs() -> list:
    out = [sig([_F32], [_F32], V.V1_0)]  # the axis input arrived in 1.2
    for t, v in ((_F32, V.V1_2), (_F16, V.V1_2), (_Q8, V.V1_2), (_Q8S, V.V1_3)):
        out.append(sig([t, T.INT32], [t], v, min_inputs=1))
    return out


# ---- LOCAL_RESPONSE_NORMALIZATION ----------------------------------------------------------
def _validate_lrn(ctx: OpContext) -> None:
    check_max_rank(ctx)
    _check_axis(ctx, 5)
    radius, bias = const_scalar(ctx, 1), const_scalar(ctx, 2)
    if radius is not None and radius < 0:
        raise OpError("LOCAL_RESPONSE_NORMALIZATION: radius must be non-negative")
    if bias is not None and bias == 0:
        raise OpError("LOCAL_RESPONSE_NORMALIZATION: bias must not be zero")


def _lrn_reference(ctx: OpContext) -> list[np.ndarray]:
    x = _input_up_to_rank4(ctx)
    radius = int(ctx.scalar(1))
    bias, alpha, beta = (np.float32(ctx.scalar(i)) for i in (2, 3, 4))
    axis = resolve_axis(int(ctx.scalar(5, -1)), x.ndim)
    _validate_lrn(ctx)
    if x.size == 0:
        return [x.copy()]
    xt = np.moveaxis(x.astype(np.float32), axis, -1)
    n = xt.shape[-1]
    # windowed sums of squares from a prefix sum: [i - radius, i + radius] clipped to the axis
    prefix = np.concatenate([np.zeros(xt.shape[:-1] + (1,)), np.cumsum(xt.astype(np.float64) ** 2, axis=-1)], axis=-1)
    i = np.arange(n)
    sqr_sum = (prefix[..., np.minimum(i + radius + 1, n)] - prefix[..., np.maximum(i - radius, 0)]).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        y = xt * np.power(bias + alpha * sqr_sum, -beta)
    return [np.moveaxis(y, -1, axis)]


def _lrn_sigs() -> list:
    out = [sig([_F32, T.INT32, T.FLOAT32, T.FLOAT32, T.FLOAT32], [_F32], V.V1_0)]
    for t in (_F32, _F16):
        s = _SCALAR_OF[t]
        out.append(sig([t, T.INT32, s, s, s, T.INT32], [t], V.V1_2, min_inputs=5))
    return out


# ---- INSTANCE_NORMALIZATION ----------------------------------------------------------------
def _validate_instance(ctx: OpContext) -> None:
    dims = ctx.in_operand(0).dimensions
    if dims and len(dims) != 4:
        raise OpError("INSTANCE_NORMALIZATION: input must have rank 4")


def _instance_reference(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.input(0)
    if x.ndim != 4:
        raise OpError("INSTANCE_NORMALIZATION: input must have rank 4")
    _validate_instance(ctx)
    gamma, beta, epsilon = (np.float32(ctx.scalar(i)) for i in (1, 2, 3))
    spatial = (2, 3) if ctx.scalar(4) else (1, 2)
    if x.size == 0:
        return [x.copy()]
    xf = x.astype(np.float32)
    mean = np.mean(xf, axis=spatial, keepdims=True, dtype=np.float64).astype(np.float32)
    diff = xf - mean
    var = np.mean(diff.astype(np.float64) ** 2, axis=spatial, keepdims=True).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        sigma = np.sqrt(var + epsilon)
        y = diff * gamma / sigma + beta
    return [y]


def _model_rules_l2(ctx: OpContext) -> None:
    _validate_l2(ctx)
    ranks_before_v1_2(ctx, (4,))


def _model_rules_lrn(ctx: OpContext) -> None:
    _validate_lrn(ctx)
    ranks_before_v1_2(ctx, (4,))


# ---- device ----------------------------------------------------------------------------------
def _square(v):
    return v * v


def _float_l2(node: OpNode, ins: list) -> Compute:
    """A kernel stores each slice's sum of squares; every element is divided by its norm."""
    x, axis = ins[0], rd.slice_axis(node, 1, rd.MAX_REDUCED)
    stats_shape, first = rd.slice_stats(node, axis)

    def squares(c):
        loop, at, _ = rd.axis_loop(first(c), axis)
        return rd.float_sum([loop], _square(x.load(at)))

    total = node.materialize(Compute(stats_shape, "float", squares), "l2_squares")

    def normalized(c: Coords) -> Expr:
        norm = fn("sqrt", total.load(broadcast(c, stats_shape)))
        return x.load(c) / (norm < 1e-6).where(1e-6, norm)   # a NaN norm stays NaN (fmax would drop it)
    return Compute(node.in_shape(0), "float", normalized)


def _quant_l2(node: OpNode, ins: list) -> Compute:
    """l2normQuant8: the int32 sum of squared offsets (stored once per slice), its inverse square
    root as a multiplier and shift (a device helper), each offset * 128 scaled by it."""
    x, axis, t = ins[0], rd.slice_axis(node, 1, rd.MAX_REDUCED), node.in_operand(0).type
    zp = int(node.in_operand(0).zeroPoint)
    lo, hi = quant_range(t)

    stats_shape, first = rd.slice_stats(node, axis)

    def squares(c):
        loop, at, _ = rd.axis_loop(first(c), axis)
        return fx.wrap32(reduce_sum([loop], _square(x.load(at) - zp).cast("long")))

    total = node.materialize(Compute(stats_shape, "int", squares), "l2_squares")

    def value(c):
        multiplier, shift = rd.inv_sqrt(total.load(broadcast(c, stats_shape)))
        return clamp(fx.mbqm((x.load(c) - zp) * 128, multiplier, shift) + _L2_OUT_ZP[t], lo, hi)

    return Compute(node.in_shape(0), "int", value)


def _float_lrn(node: OpNode, ins: list) -> Compute:
    """x * (bias + alpha * sum of squares over [c - radius, c + radius] on the axis) ^ -beta."""
    x, axis, radius = ins[0], rd.slice_axis(node, 5), int(node.scalar(1))
    bias, alpha, beta = (float(np.float32(node.scalar(k))) for k in (2, 3, 4))
    extent = node.in_shape(0)[axis]

    def value(c):
        lo, hi = c[axis] - radius, c[axis] + radius + 1
        loop, at, _ = rd.axis_loop(c, axis, (lo < 0).where(0, lo), (hi > extent).where(extent, hi))
        return x.load(c) * fn("pow", bias + alpha * rd.float_sum([loop], _square(x.load(at))), -beta)

    return Compute(node.in_shape(0), "float", value)


def _float_instance(node: OpNode, ins: list) -> Compute:
    """Per (batch, channel) plane: a kernel storing the means, one the variances (from the
    stored means), then the normalization itself, elementwise."""
    x, shape = ins[0], node.in_shape(0)
    gamma, beta, epsilon = (float(np.float32(node.scalar(i))) for i in (1, 2, 3))
    nchw = bool(node.scalar(4))
    spatial = (2, 3) if nchw else (1, 2)
    count = float(rd.reduced_count(node, spatial))
    stats_shape = tuple(1 if k in spatial else d for k, d in enumerate(shape))

    def plane_sum(c, term):
        loops, at = rd.reduced_slice(shape, spatial, True, c)
        return rd.float_sum(loops, term(x.load(at)))

    mean = node.materialize(Compute(stats_shape, "float", lambda c: plane_sum(c, lambda v: v) / count),
                            "instance_mean")

    def variance(c):
        m = mean.load(c)
        return plane_sum(c, lambda v: _square(v - m)) / count

    var = node.materialize(Compute(stats_shape, "float", variance), "instance_variance")

    def value(c):
        at = broadcast(c, stats_shape)
        return (x.load(c) - mean.load(at)) * gamma / fn("sqrt", var.load(at) + epsilon) + beta

    return Compute(shape, "float", value)


L2 = register(OpSpec(Op.L2_NORMALIZATION, _l2_sigs(), _l2_reference, validate=_model_rules_l2,
                     shape=same_shape(0), pattern=Pattern.REDUCTION))
L2.device(floats(0))(_float_l2)
L2.device(types_in(QUANT8, 0))(_quant_l2)
register(OpSpec(Op.LOCAL_RESPONSE_NORMALIZATION, _lrn_sigs(), _lrn_reference, validate=_model_rules_lrn,
                shape=same_shape(0), pattern=Pattern.REDUCTION)).device(floats(0))(_float_lrn)
register(OpSpec(Op.INSTANCE_NORMALIZATION,
                [sig([t, _SCALAR_OF[t], _SCALAR_OF[t], _SCALAR_OF[t], T.BOOL], [t], V.V1_2) for t in (_F32, _F16)],
                _instance_reference, validate=_validate_instance, shape=same_shape(0),
                pattern=Pattern.REDUCTION)).device(floats(0))(_float_instance)
