"""QUANTIZE (float -> quant8) and DEQUANTIZE (quant8, symmetric and per-channel -> float).

Both follow the reference's float32 arithmetic: QUANTIZE rounds x / scale (a float32 division)
half away from zero, adds the zero point and saturates; DEQUANTIZE forms scale * (q - zp) in
float32 and rounds to the output type. On the device QUANTIZE divides the same way (the
backends divide correctly rounded) and rounds exactly in float; DEQUANTIZE reads a table of the
reference over the 256 stored values, or per channel multiplies by the channel's scale.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..hal.types import OperandType as T
from ..hal.types import OperationType as Op
from ..ir import Compute, Expr, Tensor, const, fn
from .lib.broadcast import check_rank
from .lib.byte_tables import ElementwiseMap, reference_byte_table
from .lib.device import FLOATS, QUANT8
from .lib.dtypes import dtype_of, quant_range
from .lib.elementwise_device import clamped, input_type_in, per_element, table_of
from .lib.quant import round_half_away
from .node import OpNode
from .registry import HalVersion as V
from .registry import OpContext, OpError, OpSpec, Pattern, register, same_shape, sig

_F32, _F16 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16
_Q8, _Q8S, _Q8SYMM, _Q8PC = (T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED, T.TENSOR_QUANT8_SYMM,
                             T.TENSOR_QUANT8_SYMM_PER_CHANNEL)
# |x / scale| from which every quantized type saturates: exact in float32, and safe to convert
_SATURATED = 1.0e9


def _quantizer(ctx: OpContext) -> Callable[[np.ndarray], np.ndarray]:
    """x (float) -> the output operand's quantized values, as the reference computes them."""
    o = ctx.out_operand(0)
    scale, zero_point, (lo, hi), dtype = np.float32(o.scale), o.zeroPoint, quant_range(o.type), dtype_of(o.type)

    def quantize(x: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            # divide in float32 as the reference, round in float64 (float32 x + 0.5 can round up)
            q = round_half_away((x.astype(np.float32) / scale).astype(np.float64)) + zero_point
        q = np.nan_to_num(q, nan=0.0)  # NaN has no defined quantized value; pick the zero point's side
        return np.clip(q, lo, hi).astype(dtype)
    return quantize


def _quantize(ctx: OpContext) -> list[np.ndarray]:
    return [_quantizer(ctx)(ctx.input(0))]


QUANTIZE = register(OpSpec(Op.QUANTIZE, [sig([f], [q], v) for f in (_F16, _F32)
                                         for q, v in ((_Q8, V.V1_2), (_Q8S, V.V1_3))], _quantize,
                           shape=same_shape(0), pattern=Pattern.ELEMENTWISE,
                           bind=lambda node: ElementwiseMap(_quantizer(node))))


@QUANTIZE.device(input_type_in(FLOATS, 0))
def _quantize_device(node: OpNode, ins: list) -> Compute:
    """round_half_away(x / scale) + zeroPoint, saturated, with NaN as 0 before the clamp."""
    o = node.out_operand(0)
    scale = np.float32(o.scale)
    if not (np.isfinite(scale) and scale >= np.float32(1e-30)):
        raise ValueError("scale near the subnormal range: a device may flush the quotients")
    lo, hi = quant_range(o.type)

    def value(x: Expr) -> Expr:
        v = x / float(scale)                               # float32 division, as the reference
        a = fn("fmin", fn("fabs", v), _SATURATED)          # NaN becomes _SATURATED here
        t = fn("floor", a)
        mag = t.cast("long") + (a - t >= 0.5).cast("long")  # a - t is exact: half away, exactly
        n = (v < 0.0).where(-mag, mag) + int(o.zeroPoint)
        n = (a >= _SATURATED).where((v > 0.0).where(const(hi, "long"), lo), n)
        return clamped(v.ne(v).where(0, n), lo, hi)

    return per_element(node, ins, "int", value, (0,))


def _channel_scales(ctx: OpContext) -> tuple[np.ndarray, int]:
    """Per-channel DEQUANTIZE's float32 scales and channel dimension, checked."""
    operand = ctx.in_operand(0)
    rank = len(ctx.in_shape(0))
    cq = operand.extraParams.channelQuant if operand.extraParams is not None else None
    if cq is None or not 0 <= cq.channelDim < rank or len(cq.scales) != ctx.in_shape(0)[cq.channelDim]:
        raise OpError("DEQUANTIZE: bad per-channel quantization parameters")
    return np.asarray(cq.scales, dtype=np.float32), int(cq.channelDim)


def _dequantize(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.input(0)
    operand = ctx.in_operand(0)
    if operand.type == _Q8PC:
        scales, dim = _channel_scales(ctx)
        shape = [1] * x.ndim
        shape[dim] = -1
        y = scales.reshape(shape) * x.astype(np.float32)
    else:
        y = np.float32(operand.scale) * (x.astype(np.int32) - operand.zeroPoint).astype(np.float32)
    return [y.astype(dtype_of(ctx.out_operand(0).type))]


_DEQ_SIGS = [sig([_Q8], [_F32], V.V1_0), sig([_Q8], [_F16], V.V1_2)]
_DEQ_SIGS += [sig([q], [f], V.V1_2) for q in (_Q8SYMM, _Q8PC) for f in (_F16, _F32)]
_DEQ_SIGS += [sig([_Q8S], [f], V.V1_3) for f in (_F16, _F32)]
DEQUANTIZE = register(OpSpec(Op.DEQUANTIZE, _DEQ_SIGS, _dequantize, validate=lambda ctx: check_rank(ctx, (0,)),
                             shape=same_shape(0), pattern=Pattern.ELEMENTWISE, bind=reference_byte_table))
DEQUANTIZE.device(input_type_in(QUANT8 | {_Q8SYMM}, 0))(table_of)


@DEQUANTIZE.device(input_type_in(frozenset({_Q8PC}), 0))
def _dequantize_per_channel(node: OpNode, ins: list) -> Compute:
    """scale[channel] * q in float32, as the reference."""
    scales, dim = _channel_scales(node)
    table: Tensor = node.constant(scales, _F32)
    x = ins[0]
    return Compute(node.out_shape(0), "float", lambda c: table.at(c[dim]) * x.load(c).cast("float"))
