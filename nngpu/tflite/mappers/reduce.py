"""Reductions: MEAN, SUM and the REDUCE_* family, ARG_MAX / ARG_MIN, TOPK_V2.

NNAPI's quantized REDUCE_MAX / REDUCE_MIN keep the input's scale and zero point: a requantize
follows when TFLite's output has others (common.same_scale_output); MEAN then goes through
float32 (see _mean). NNAPI's
REDUCE_SUM / REDUCE_PROD are float only: 8-bit inputs are dequantized, reduced in float32 and
quantized again. ARG_MAX / ARG_MIN with an int64 output compute int32 (the rewrite pass made
the tensor int32; the model's output still reads as int64)."""
from __future__ import annotations

import numpy as np

from ...hal.types import OperandType, OperationType
from ..context import OpCtx
from ..tensors import INT32
from .common import axis, is_quant8, registry, same_scale_output

Op = OperationType
T = OperandType
MAPPERS, mapper = registry()

_REDUCE = {"SUM": Op.REDUCE_SUM, "REDUCE_MAX": Op.REDUCE_MAX, "REDUCE_MIN": Op.REDUCE_MIN,
           "REDUCE_PROD": Op.REDUCE_PROD, "REDUCE_ANY": Op.REDUCE_ANY, "REDUCE_ALL": Op.REDUCE_ALL}
_FLOAT_ONLY = {"SUM", "REDUCE_PROD"}


def _axes(c: OpCtx) -> int:
    rank = len(c.t_in(0).shape)
    if c.t_in(1).data is not None:
        return c.b.i32_tensor([axis(a, rank) for a in c.ints(1)])
    return c.inp(1)


def _keep(c: OpCtx) -> bool:
    return bool(c.opts.KeepDims()) if c.opts is not None else False


def _via_float(c: OpCtx, op_type: OperationType, x: int, params: list[int], out: int) -> None:
    fx = c.b.operand(T.TENSOR_FLOAT32, list(c.b.operands[x].dimensions))
    fy = c.b.operand(T.TENSOR_FLOAT32, list(c.b.operands[out].dimensions))
    c.emit(Op.DEQUANTIZE, [x], [fx])
    c.emit(op_type, [fx] + params, [fy])
    c.emit(Op.QUANTIZE, [fy], [out])


@mapper("MEAN")
def _mean(c: OpCtx) -> None:
    # TFLite's quantized MEAN rescales the exact integer sum once; NNAPI's rounds the mean at the
    # input's scale. With another output scale, the float32 mean (exact but for float rounding)
    # quantized once agrees with TFLite far more often than MEAN + requantize (measured: all
    # outputs of tests/data/tflite/cnn_*8 against 16% off by one).
    x, out = c.inp(0), c.out()
    xo, oo = c.b.operands[x], c.b.operands[out]
    params = [_axes(c), c.b.i32(int(_keep(c)))]
    if is_quant8(c, x) and (np.float32(xo.scale) != np.float32(oo.scale) or xo.zeroPoint != oo.zeroPoint):
        _via_float(c, Op.MEAN, x, params, out)
    else:
        c.emit(Op.MEAN, [x] + params, [out])


@mapper(*_REDUCE)
def _reduce(c: OpCtx) -> None:
    x, out = c.inp(0), c.out()
    op_type = _REDUCE[c.op.name]
    if c.op.name in _FLOAT_ONLY and is_quant8(c, x):
        _via_float(c, op_type, x, [_axes(c), c.b.boolean(_keep(c))], out)
        return
    ins = [x, _axes(c), c.b.boolean(_keep(c))]
    same_scale_output(c, x, out, lambda target: c.emit(op_type, ins, [target]))


@mapper("ARG_MAX", "ARG_MIN")
def _arg(c: OpCtx) -> None:
    if c.t_out().type != INT32:
        c.unsupported(f"NNAPI ARGMAX/ARGMIN output int32, not {c.t_out().type_name}")
    rank = len(c.t_in(0).shape)
    op_type = Op.ARGMAX if c.op.name == "ARG_MAX" else Op.ARGMIN
    c.emit(op_type, [c.inp(0), c.b.i32(axis(c.ints(1)[0], rank))], [c.out()])


@mapper("TOPK_V2")
def _topk(c: OpCtx) -> None:
    c.emit(Op.TOPK_V2, [c.inp(0), c.b.i32(c.ints(1)[0])], [c.out(0), c.out(1)])
