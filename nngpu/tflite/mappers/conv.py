"""Convolutions, pooling, FULLY_CONNECTED and BATCH_MATMUL."""
from __future__ import annotations

import struct

import numpy as np

from ...hal.types import OperandType, OperationType
from ..context import OpCtx
from ..tensors import FLOAT32
from .common import act, bias, padding, registry, same_scale_output

Op = OperationType
T = OperandType
MAPPERS, mapper = registry()


def _dilation(c: OpCtx, ins: list[int]) -> list[int]:
    dw, dh = int(c.opts.DilationWFactor()), int(c.opts.DilationHFactor())
    if dw != 1 or dh != 1:
        ins += [c.b.boolean(False), c.b.i32(dw), c.b.i32(dh)]
    return ins


@mapper("CONV_2D")
def _conv_2d(c: OpCtx) -> None:
    o = c.opts
    x, w = c.inp(0), c.inp(1, c.hybrid())
    b = bias(c, 2, c.t_in(1).shape[0], x, w)
    code = c.activation(act(c))
    ins = [x, w, b, c.b.i32(padding(o.Padding())), c.b.i32(o.StrideW()), c.b.i32(o.StrideH()), c.b.i32(code)]
    c.emit(Op.CONV_2D, _dilation(c, ins), [c.out()])


@mapper("DEPTHWISE_CONV_2D")
def _depthwise_conv_2d(c: OpCtx) -> None:
    o = c.opts
    x, w = c.inp(0), c.inp(1, c.hybrid())
    out_channels, in_channels = c.t_in(1).shape[3], c.t_in(0).shape[3]
    b = bias(c, 2, out_channels, x, w)
    code = c.activation(act(c))
    # The multiplier follows from the shapes (some converters leave the option stale).
    multiplier = out_channels // in_channels if in_channels else int(o.DepthMultiplier())
    ins = [x, w, b, c.b.i32(padding(o.Padding())), c.b.i32(o.StrideW()), c.b.i32(o.StrideH()),
           c.b.i32(multiplier), c.b.i32(code)]
    c.emit(Op.DEPTHWISE_CONV_2D, _dilation(c, ins), [c.out()])


def _transpose_conv(c: OpCtx, x_k: int, w_k: int, b_k: int | None, pad: int, sw: int, sh: int,
                    activation: int) -> None:
    x, w = c.inp(x_k), c.inp(w_k, c.t_in(x_k).type == FLOAT32)
    b = bias(c, b_k, c.t_in(w_k).shape[0], x, w)
    shape = c.b.i32_tensor(c.t_out().shape)
    code = c.activation(activation)
    c.emit(Op.TRANSPOSE_CONV_2D, [x, w, b, shape, c.b.i32(pad), c.b.i32(sw), c.b.i32(sh), c.b.i32(code),
                                  c.b.boolean(False)], [c.out()])


@mapper("TRANSPOSE_CONV")
def _transpose_conv_builtin(c: OpCtx) -> None:
    # TFLite order: output_shape, weights [O, H, W, I], input, optional bias.
    o = c.opts
    a = int(o.FusedActivationFunction()) if hasattr(o, "FusedActivationFunction") else 0
    _transpose_conv(c, 2, 1, 3 if c.has(3) else None, padding(o.Padding()), o.StrideW(), o.StrideH(), a)


@mapper("Convolution2DTransposeBias")
def _mediapipe_transpose_conv_bias(c: OpCtx) -> None:
    # MediaPipe custom op: inputs (input, weights, bias); options are a raw TfLiteTransposeConvParams
    # {padding (TfLitePadding: 1 SAME, 2 VALID, = NNAPI codes), stride_width, stride_height}.
    if len(c.op.custom_options) < 12:
        c.unsupported("custom options shorter than TfLiteTransposeConvParams")
    pad, sw, sh = struct.unpack_from("<3i", c.op.custom_options)
    if pad not in (1, 2):
        c.unsupported(f"padding code {pad}")
    _transpose_conv(c, 0, 1, 2, pad, sw, sh, 0)


@mapper("FULLY_CONNECTED")
def _fully_connected(c: OpCtx) -> None:
    o = c.opts
    if o is not None and o.WeightsFormat() != 0:
        c.unsupported("shuffled weights format")
    x, w = c.inp(0), c.inp(1, c.hybrid())
    units, in_size = c.t_in(1).shape
    b = bias(c, 2, units, x, w)
    final = c.out()
    batch = int(np.prod(c.t_in(0).shape)) // in_size if in_size else 0
    code = c.b.i32(c.activation(act(c)))
    if c.b.operands[w].type == T.TENSOR_QUANT8_SYMM_PER_CHANNEL:
        _per_channel_fc(c, x, w, b, code, batch, units, in_size, final)
        return
    # NNAPI's output is [batch, units]; keep_num_dims (or any other TFLite shape) gets a RESHAPE.
    reshape = list(c.t_out().shape) != [batch, units]
    fc_out = c.b.like(final, [batch, units]) if reshape else final
    c.emit(Op.FULLY_CONNECTED, [x, w, b, code], [fc_out])
    if reshape:
        c.emit(Op.RESHAPE, [fc_out, c.b.i32_tensor(c.t_out().shape or [1])], [final])


def _per_channel_fc(c: OpCtx, x: int, w: int, b: int, code: int, batch: int, units: int, in_size: int,
                    final: int) -> None:
    """NNAPI's FULLY_CONNECTED has no per-channel weights: a 1x1 CONV_2D has, with the same
    arithmetic (per-channel multipliers of input scale x weight scale / output scale)."""
    x4 = c.b.like(x, [batch, 1, 1, in_size])
    c.emit(Op.RESHAPE, [x, c.b.i32_tensor([batch, 1, 1, in_size])], [x4])
    wo = c.b.operands[w]
    cq = wo.extraParams.channelQuant
    w4 = c.b.constant(wo.type, c.value(1).reshape(units, 1, 1, in_size), channel_quant=(cq.scales, 0))
    y4 = c.b.like(final, [batch, 1, 1, units])
    one = c.b.i32(1)
    c.emit(Op.CONV_2D, [x4, w4, b, c.b.i32(2), one, one, code], [y4])
    c.emit(Op.RESHAPE, [y4, c.b.i32_tensor(c.t_out().shape or [1])], [final])


_POOLS = {"AVERAGE_POOL_2D": Op.AVERAGE_POOL_2D, "MAX_POOL_2D": Op.MAX_POOL_2D, "L2_POOL_2D": Op.L2_POOL_2D}


@mapper(*_POOLS)
def _pool(c: OpCtx) -> None:
    o = c.opts
    code = c.activation(act(c))
    x = c.inp(0)
    ins = [x, c.b.i32(padding(o.Padding())), c.b.i32(o.StrideW()), c.b.i32(o.StrideH()),
           c.b.i32(o.FilterWidth()), c.b.i32(o.FilterHeight()), c.b.i32(code)]
    same_scale_output(c, x, c.out(), lambda target: c.emit(_POOLS[c.op.name], ins, [target]))


@mapper("BATCH_MATMUL")
def _batch_matmul(c: OpCtx) -> None:
    o = c.opts
    adj_x = bool(o.AdjX()) if o is not None else False
    adj_y = bool(o.AdjY()) if o is not None else False
    c.emit(Op.BATCH_MATMUL, [c.inp(0), c.inp(1, c.hybrid()), c.b.boolean(adj_x), c.b.boolean(adj_y)], [c.out()])
