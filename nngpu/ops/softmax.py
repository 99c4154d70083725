"""SOFTMAX and LOG_SOFTMAX along one axis, with beta.

Float kernels subtract the slice maximum first (as the reference) and compute float16 in float32.
Quantized SOFTMAX is the reference's fixed-point kernel (gemmlowp / TFLite Softmax): input
differences from the slice maximum are rescaled by beta * scale to a Q5.26 value, exponentiated
with gemmlowp's exp_on_negative_values, summed in Q12.19, and divided with the Newton-Raphson
reciprocal; the output has scale 1/256.

On the device (both float and quantized, bit-exact for the latter) one kernel stores each slice's
maximum and one its sum of exponentials, each read once per slice; the elements then read both
stored values, so the work is linear in the axis length (it was quadratic: every element re-read
its slice twice).
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from ..hal.types import OperandType as T
from ..hal.types import OperationType as Op
from ..ir import Compute, broadcast, clamp, fn, reduce_sum
from ..ir import fixedpoint as fx
from .lib import reduce_device as rd
from .lib.axes import check_max_rank, const_scalar, ranks_before_v1_2, resolve_axis
from .lib.device import QUANT8, floats, types_in
from .lib.dtypes import quant_range
from .lib.fixedpoint import clz32, exp_on_negative_values, fp_mul, one_over_one_plus_x_for_x_in_0_1
from .lib.quant import quantize_multiplier_greater_than_one, rounding_divide_by_pot, wrap_int32
from .node import OpNode
from .registry import HalVersion as V
from .registry import OpContext, OpError, OpSpec, Pattern, register, same_shape, sig

_F32, _F16, _Q8, _Q8S = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED
_SOFTMAX_OUT_ZP = {_Q8: 0, _Q8S: -128}


# ---- SOFTMAX -------------------------------------------------------------------------------
_INT_BITS, _ACC_BITS = 5, 12   # exp input in Q5.26, the sum of exps in Q12.19


@dataclass(frozen=True)
class QuantSoftmax:
    """The quantized kernel's constants: beta * input scale as a Q5.26 multiplier and left
    shift, and the radius beyond which a difference from the maximum gives 0."""

    multiplier: int
    left_shift: int
    radius: int

    @staticmethod
    @functools.lru_cache(maxsize=64)   # a model's softmax runs with the same constants each time
    def of(beta: float, in_scale: float) -> "QuantSoftmax":
        real = min(1.0 * beta * float(np.float32(in_scale)) * (1 << (31 - _INT_BITS)), (1 << 31) - 1.0)
        if real <= 1.0:
            raise OpError("SOFTMAX: beta * input scale is too small for the quantized kernel")
        multiplier, left_shift = quantize_multiplier_greater_than_one(real)
        radius = math.floor(((1 << _INT_BITS) - 1) * (1 << (31 - _INT_BITS)) / (1 << left_shift))
        return QuantSoftmax(multiplier, left_shift, radius)

    def exps(self, diff: np.ndarray) -> np.ndarray:
        """exp of the rescaled differences from the slice maximum (<= 0), Q0.31."""
        return exp_on_negative_values(fp_mul(wrap_int32(diff * (1 << self.left_shift)), self.multiplier), _INT_BITS)

    def terms(self, diff: np.ndarray, exps: np.ndarray) -> np.ndarray:
        """What each element adds to the Q12.19 sum: its exp, or 0 beyond the radius."""
        return np.where(diff >= -self.radius, rounding_divide_by_pot(exps, _ACC_BITS), 0)

    @functools.cached_property
    def tables(self) -> tuple[np.ndarray, np.ndarray]:
        """exps and terms of every 8-bit difference, -255 .. 0 (index diff + 255), read only:
        the fixed-point exp is some 40 passes, made once per set of constants."""
        every = np.arange(-255, 1, dtype=np.int64)
        exps = self.exps(every)
        terms = self.terms(every, exps)
        exps.setflags(write=False)
        terms.setflags(write=False)
        return exps, terms


def _softmax_quant(x: np.ndarray, q: QuantSoftmax, out_type: int) -> np.ndarray:
    """Softmax over the last axis of raw quantized values, the reference's fixed-point way."""
    diff = x.astype(np.int64) - np.max(x, axis=-1, keepdims=True).astype(np.int64)
    exp_table, term_table = q.tables             # 8-bit differences are in [-255, 0]
    index = diff + 255
    exps = exp_table[index]
    sum_exps = wrap_int32(np.sum(term_table[index], axis=-1, keepdims=True))
    headroom = clz32(sum_exps)
    shifted_minus_one = wrap_int32(((sum_exps & 0xFFFFFFFF) << headroom) - (1 << 31))
    scale = one_over_one_plus_x_for_x_in_0_1(shifted_minus_one)
    out = rounding_divide_by_pot(fp_mul(scale, exps), _ACC_BITS - headroom + 31 - 8)
    lo, hi = quant_range(out_type)
    out = out + _SOFTMAX_OUT_ZP[out_type]
    return np.where(diff >= -q.radius, np.clip(out, lo, hi), lo)


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
        y = _softmax_quant(xt, QuantSoftmax.of(beta, ctx.in_operand(0).scale), ctx.in_operand(0).type)
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


# ---- device ----------------------------------------------------------------------------------
def _float_softmax(log: bool):
    def build(node: OpNode, ins: list) -> Compute:
        x, axis, beta = ins[0], rd.slice_axis(node, 2, rd.MAX_REDUCED), float(node.scalar(1))
        stats_shape, first = rd.slice_stats(node, axis)
        mx = node.materialize(Compute(stats_shape, "float", lambda c: rd.slice_extreme(x, first(c), axis)),
                              "softmax_max")

        def slice_sum(c):
            m = mx.load(c)
            loop, at, _ = rd.axis_loop(first(c), axis)
            return rd.float_sum([loop], fn("exp", (x.load(at) - m) * beta))

        total = node.materialize(Compute(stats_shape, "float", slice_sum), "softmax_sum")

        def value(c):
            at = broadcast(c, stats_shape)
            own = (x.load(c) - mx.load(at)) * beta
            return own - fn("log", total.load(at)) if log else fn("exp", own) / total.load(at)

        return Compute(node.in_shape(0), "float", value)
    build.__name__ = "float_log_softmax" if log else "float_softmax"
    return build


def _quant_softmax(node: OpNode, ins: list) -> Compute:
    """The reference's fixed-point softmax. exp of a difference from the slice maximum takes
    one of 256 values: they (and each one's term of the sum) are tables computed by the
    reference's own functions; the sum's reciprocal is computed on the device."""
    x, axis, t = ins[0], rd.slice_axis(node, 2, rd.MAX_REDUCED), node.in_operand(0).type
    q = QuantSoftmax.of(float(node.scalar(1)), node.in_operand(0).scale)
    lo, hi = quant_range(t)
    span = hi - lo
    diffs = np.arange(-span, 1, dtype=np.int64)
    exps = q.exps(diffs)
    exp_table = node.constant(exps.astype(np.int32), T.TENSOR_INT32)
    term_table = node.constant(q.terms(diffs, exps).astype(np.int32), T.TENSOR_INT32)

    stats_shape, first = rd.slice_stats(node, axis)
    mx = node.materialize(Compute(stats_shape, "int", lambda c: rd.slice_extreme(x, first(c), axis)), "softmax_max")

    def slice_sum(c):
        m = mx.load(c)
        loop, at, _ = rd.axis_loop(first(c), axis)
        return fx.wrap32(reduce_sum([loop], term_table.at(x.load(at) - m + span).cast("long")))

    sums = node.materialize(Compute(stats_shape, "int", slice_sum), "softmax_sum")

    def value(c):
        at = broadcast(c, stats_shape)
        diff = x.load(c) - mx.load(at)
        total = sums.load(at)
        headroom = rd.clz32(total)
        scale = rd.one_over_one_plus_x(fx.wrap32(((total & 0xFFFFFFFF) << headroom) - (1 << 31)))
        out = fx.rdbpot(fx.srdhm(scale, exp_table.at(diff + span)), (_ACC_BITS + 31 - 8) - headroom)
        return (diff >= -q.radius).where(clamp(out + _SOFTMAX_OUT_ZP[t], lo, hi), lo)

    return Compute(node.in_shape(0), "int", value)


SOFTMAX = register(OpSpec(Op.SOFTMAX, _softmax_sigs(), _softmax_reference, validate=_model_rules_softmax,
                          shape=same_shape(0), pattern=Pattern.REDUCTION))
SOFTMAX.device(floats(0))(_float_softmax(False))
SOFTMAX.device(types_in(QUANT8, 0))(_quant_softmax)
register(OpSpec(Op.LOG_SOFTMAX,
                [sig([t, s, T.INT32], [t], V.V1_2) for t, s in ((_F32, T.FLOAT32), (_F16, T.FLOAT16))],
                _log_softmax_reference, validate=_validate_log_softmax, shape=same_shape(0),
                pattern=Pattern.REDUCTION)).device(floats(0))(_float_softmax(True))
