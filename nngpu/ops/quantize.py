"""QUANTIZE (float -> quant8) and DEQUANTIZE (quant8, symmetric and per-channel -> float).

Both follow the reference's float32 arithmetic: QUANTIZE rounds x / scale (a float32 division)
half away from zero, adds the zero point and saturates; DEQUANTIZE forms scale * (q - zp) in
float32 and rounds to the output type.
"""
from __future__ import annotations

import numpy as np

from ..hal.types import OperandType as T
from ..hal.types import OperationType as Op
from .dtypes import dtype_of, quant_range
from .elementwise import check_rank
from .quant import round_half_away
from .registry import HalVersion as V
from .registry import OpContext, OpError, OpSpec, register, sig

_F32, _F16 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16
_Q8, _Q8S, _Q8SYMM, _Q8PC = (T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED, T.TENSOR_QUANT8_SYMM,
                             T.TENSOR_QUANT8_SYMM_PER_CHANNEL)


def _quantize(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.input(0).astype(np.float32)
    o = ctx.out_operand(0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        # divide in float32 as the reference, round in float64 (float32 x + 0.5 can round up)
        q = round_half_away((x / np.float32(o.scale)).astype(np.float64)) + o.zeroPoint
    lo, hi = quant_range(o.type)
    q = np.nan_to_num(q, nan=0.0)  # NaN has no defined quantized value; pick the zero point's side
    return [np.clip(q, lo, hi).astype(dtype_of(o.type))]


register(OpSpec(Op.QUANTIZE, [sig([f], [q], v) for f in (_F16, _F32)
                              for q, v in ((_Q8, V.V1_2), (_Q8S, V.V1_3))], _quantize))


def _dequantize(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.input(0)
    operand = ctx.in_operand(0)
    if operand.type == _Q8PC:
        cq = operand.extraParams.channelQuant if operand.extraParams is not None else None
        if cq is None or not 0 <= cq.channelDim < x.ndim or len(cq.scales) != x.shape[cq.channelDim]:
            raise OpError("DEQUANTIZE: bad per-channel quantization parameters")
        shape = [1] * x.ndim
        shape[cq.channelDim] = -1
        scale = np.asarray(cq.scales, dtype=np.float32).reshape(shape)
        y = scale * x.astype(np.float32)
    else:
        y = np.float32(operand.scale) * (x.astype(np.int32) - operand.zeroPoint).astype(np.float32)
    return [y.astype(dtype_of(ctx.out_operand(0).type))]


_DEQ_SIGS = [sig([_Q8], [_F32], V.V1_0), sig([_Q8], [_F16], V.V1_2)]
_DEQ_SIGS += [sig([q], [f], V.V1_2) for q in (_Q8SYMM, _Q8PC) for f in (_F16, _F32)]
_DEQ_SIGS += [sig([_Q8S], [f], V.V1_3) for f in (_F16, _F32)]
register(OpSpec(Op.DEQUANTIZE, _DEQ_SIGS, _dequantize, validate=lambda ctx: check_rank(ctx, (0,))))
