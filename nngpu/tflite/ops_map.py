"""TFLite operator -> NNAPI operation(s), following the TFLite NNAPI delegate's conventions.

Each mapper takes an OpCtx (context.py) and emits one or more NNAPI operations. Names are the
TFLite builtin names, or the custom code for custom operators."""
from __future__ import annotations

import struct
from typing import Callable

import numpy as np

from ..hal.types import OperandType, OperationType
from .context import OpCtx
from .tensors import FLOAT16, FLOAT32

Op = OperationType
T = OperandType
MAPPERS: dict[str, Callable[[OpCtx], None]] = {}


def mapper(*names: str):
    def deco(fn):
        for n in names:
            MAPPERS[n] = fn
        return fn
    return deco


def _padding(tfl_padding: int) -> int:
    # tflite.Padding SAME=0 / VALID=1 -> NNAPI PaddingCode SAME=1 / VALID=2
    return {0: 1, 1: 2}[tfl_padding]


def _act(c: OpCtx) -> int:
    o = c.opts
    return int(o.FusedActivationFunction()) if o is not None and hasattr(o, "FusedActivationFunction") else 0


def _axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def _bias(c: OpCtx, k: int | None, channels: int, x: int, w: int) -> int:
    """Bias operand k, or a zero bias of the type NNAPI requires when TFLite left it out."""
    xo, wo = c.b.operands[x], c.b.operands[w]
    if k is not None and c.has(k):
        return c.inp(k, as_float=xo.type == T.TENSOR_FLOAT32)
    if xo.type in (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16):
        return c.b.constant(xo.type, np.zeros(channels, np.float32 if xo.type == T.TENSOR_FLOAT32 else np.float16))
    scale = 0.0 if wo.type == T.TENSOR_QUANT8_SYMM_PER_CHANNEL else xo.scale * wo.scale
    return c.b.constant(T.TENSOR_INT32, np.zeros(channels, np.int32), scale=scale)


# ---- elementwise -----------------------------------------------------------------------------
_BINARY_FUSED = {"ADD": Op.ADD, "SUB": Op.SUB, "MUL": Op.MUL, "DIV": Op.DIV}


@mapper(*_BINARY_FUSED)
def _binary_fused(c: OpCtx) -> None:
    code = c.activation(_act(c))
    c.emit(_BINARY_FUSED[c.op.name], [c.inp(0), c.inp(1), c.b.i32(code)], [c.out()])


_BINARY = {"MAXIMUM": Op.MAXIMUM, "MINIMUM": Op.MINIMUM, "POW": Op.POW, "LESS": Op.LESS,
           "LESS_EQUAL": Op.LESS_EQUAL, "GREATER": Op.GREATER, "GREATER_EQUAL": Op.GREATER_EQUAL,
           "EQUAL": Op.EQUAL, "NOT_EQUAL": Op.NOT_EQUAL, "LOGICAL_AND": Op.LOGICAL_AND,
           "LOGICAL_OR": Op.LOGICAL_OR, "PRELU": Op.PRELU}


@mapper(*_BINARY)
def _binary(c: OpCtx) -> None:
    c.emit(_BINARY[c.op.name], [c.inp(0), c.inp(1)], [c.out()])


@mapper("SQUARED_DIFFERENCE")
def _squared_difference(c: OpCtx) -> None:
    if not c.is_float(0):
        c.unsupported("quantized SQUARED_DIFFERENCE")
    out = c.out()
    diff = c.b.like(out)
    c.emit(Op.SUB, [c.inp(0), c.inp(1), c.b.i32(0)], [diff])
    c.emit(Op.MUL, [diff, diff, c.b.i32(0)], [out])


_UNARY = {"RELU": Op.RELU, "RELU6": Op.RELU6, "RELU_N1_TO_1": Op.RELU1, "LOGISTIC": Op.LOGISTIC,
          "TANH": Op.TANH, "HARD_SWISH": Op.HARD_SWISH, "EXP": Op.EXP, "LOG": Op.LOG, "ABS": Op.ABS,
          "SQRT": Op.SQRT, "RSQRT": Op.RSQRT, "NEG": Op.NEG, "SIN": Op.SIN, "FLOOR": Op.FLOOR,
          "LOGICAL_NOT": Op.LOGICAL_NOT, "CAST": Op.CAST, "QUANTIZE": Op.QUANTIZE,
          "DEQUANTIZE": Op.DEQUANTIZE, "RANK": Op.RANK}


@mapper(*_UNARY)
def _unary(c: OpCtx) -> None:
    c.emit(_UNARY[c.op.name], [c.inp(0)], [c.out()])


@mapper("ELU")
def _elu(c: OpCtx) -> None:
    c.emit(Op.ELU, [c.inp(0), c.b.f32(1.0)], [c.out()])


@mapper("LEAKY_RELU")
def _leaky_relu(c: OpCtx) -> None:
    # The delegate's mapping: PRELU with a one-element constant alpha.
    if not c.is_float(0):
        c.unsupported("quantized LEAKY_RELU")
    x = c.inp(0)
    dtype = np.float16 if c.t_in(0).type == FLOAT16 else np.float32
    alpha = c.b.constant(c.b.operands[x].type, np.asarray([c.opts.Alpha()], dtype))
    c.emit(Op.PRELU, [x, alpha], [c.out()])


@mapper("L2_NORMALIZATION")
def _l2_norm(c: OpCtx) -> None:
    c.activation(_act(c), fusable=False)
    c.emit(Op.L2_NORMALIZATION, [c.inp(0)], [c.out()])


@mapper("LOCAL_RESPONSE_NORMALIZATION")
def _lrn(c: OpCtx) -> None:
    o = c.opts
    c.emit(Op.LOCAL_RESPONSE_NORMALIZATION,
           [c.inp(0), c.b.i32(o.Radius()), c.b.f32(o.Bias()), c.b.f32(o.Alpha()), c.b.f32(o.Beta())], [c.out()])


@mapper("SOFTMAX")
def _softmax(c: OpCtx) -> None:
    c.emit(Op.SOFTMAX, [c.inp(0), c.b.f32(c.opts.Beta() if c.opts is not None else 1.0)], [c.out()])


@mapper("LOG_SOFTMAX")
def _log_softmax(c: OpCtx) -> None:
    c.emit(Op.LOG_SOFTMAX, [c.inp(0), c.b.f32(1.0), c.b.i32(-1)], [c.out()])


@mapper("SELECT", "SELECT_V2")
def _select(c: OpCtx) -> None:
    c.emit(Op.SELECT, [c.inp(0), c.inp(1), c.inp(2)], [c.out()])


# ---- convolution and pooling -----------------------------------------------------------------
def _dilation(c: OpCtx, ins: list[int]) -> list[int]:
    dw, dh = int(c.opts.DilationWFactor()), int(c.opts.DilationHFactor())
    if dw != 1 or dh != 1:
        ins += [c.b.boolean(False), c.b.i32(dw), c.b.i32(dh)]
    return ins


@mapper("CONV_2D")
def _conv_2d(c: OpCtx) -> None:
    o = c.opts
    x, w = c.inp(0), c.inp(1, c.hybrid())
    b = _bias(c, 2, c.t_in(1).shape[0], x, w)
    code = c.activation(_act(c))
    ins = [x, w, b, c.b.i32(_padding(o.Padding())), c.b.i32(o.StrideW()), c.b.i32(o.StrideH()), c.b.i32(code)]
    c.emit(Op.CONV_2D, _dilation(c, ins), [c.out()])


@mapper("DEPTHWISE_CONV_2D")
def _depthwise_conv_2d(c: OpCtx) -> None:
    o = c.opts
    x, w = c.inp(0), c.inp(1, c.hybrid())
    out_channels, in_channels = c.t_in(1).shape[3], c.t_in(0).shape[3]
    b = _bias(c, 2, out_channels, x, w)
    code = c.activation(_act(c))
    # The multiplier follows from the shapes (some converters leave the option stale).
    multiplier = out_channels // in_channels if in_channels else int(o.DepthMultiplier())
    ins = [x, w, b, c.b.i32(_padding(o.Padding())), c.b.i32(o.StrideW()), c.b.i32(o.StrideH()),
           c.b.i32(multiplier), c.b.i32(code)]
    c.emit(Op.DEPTHWISE_CONV_2D, _dilation(c, ins), [c.out()])


def _transpose_conv(c: OpCtx, x_k: int, w_k: int, b_k: int | None, padding: int, sw: int, sh: int,
                    act: int) -> None:
    x, w = c.inp(x_k), c.inp(w_k, c.t_in(x_k).type == FLOAT32)
    b = _bias(c, b_k, c.t_in(w_k).shape[0], x, w)
    shape = c.b.i32_tensor(c.t_out().shape)
    code = c.activation(act)
    c.emit(Op.TRANSPOSE_CONV_2D, [x, w, b, shape, c.b.i32(padding), c.b.i32(sw), c.b.i32(sh), c.b.i32(code),
                                  c.b.boolean(False)], [c.out()])


@mapper("TRANSPOSE_CONV")
def _transpose_conv_builtin(c: OpCtx) -> None:
    # TFLite order: output_shape, weights [O, H, W, I], input, optional bias.
    o = c.opts
    act = int(o.FusedActivationFunction()) if hasattr(o, "FusedActivationFunction") else 0
    _transpose_conv(c, 2, 1, 3 if c.has(3) else None, _padding(o.Padding()), o.StrideW(), o.StrideH(), act)


@mapper("Convolution2DTransposeBias")
def _mediapipe_transpose_conv_bias(c: OpCtx) -> None:
    # MediaPipe custom op: inputs (input, weights, bias); options are a raw TfLiteTransposeConvParams
    # {padding (TfLitePadding: 1 SAME, 2 VALID, = NNAPI codes), stride_width, stride_height}.
    if len(c.op.custom_options) < 12:
        c.unsupported("custom options shorter than TfLiteTransposeConvParams")
    padding, sw, sh = struct.unpack_from("<3i", c.op.custom_options)
    if padding not in (1, 2):
        c.unsupported(f"padding code {padding}")
    _transpose_conv(c, 0, 1, 2, padding, sw, sh, 0)


@mapper("FULLY_CONNECTED")
def _fully_connected(c: OpCtx) -> None:
    o = c.opts
    if o is not None and o.WeightsFormat() != 0:
        c.unsupported("shuffled weights format")
    x, w = c.inp(0), c.inp(1, c.hybrid())
    units, in_size = c.t_in(1).shape
    b = _bias(c, 2, units, x, w)
    final = c.out()
    batch = int(np.prod(c.t_in(0).shape)) // in_size if in_size else 0
    # NNAPI's output is [batch, units]; keep_num_dims (or any other TFLite shape) gets a RESHAPE.
    reshape = list(c.t_out().shape) != [batch, units]
    fc_out = c.b.like(final, [batch, units]) if reshape else final
    c.emit(Op.FULLY_CONNECTED, [x, w, b, c.b.i32(c.activation(_act(c)))], [fc_out])
    if reshape:
        c.emit(Op.RESHAPE, [fc_out, c.b.i32_tensor(c.t_out().shape or [1])], [final])


_POOLS = {"AVERAGE_POOL_2D": Op.AVERAGE_POOL_2D, "MAX_POOL_2D": Op.MAX_POOL_2D, "L2_POOL_2D": Op.L2_POOL_2D}


@mapper(*_POOLS)
def _pool(c: OpCtx) -> None:
    o = c.opts
    code = c.activation(_act(c))
    c.emit(_POOLS[c.op.name], [c.inp(0), c.b.i32(_padding(o.Padding())), c.b.i32(o.StrideW()),
                               c.b.i32(o.StrideH()), c.b.i32(o.FilterWidth()), c.b.i32(o.FilterHeight()),
                               c.b.i32(code)], [c.out()])


# ---- shape and data movement -----------------------------------------------------------------
@mapper("RESHAPE")
def _reshape(c: OpCtx) -> None:
    # new_shape: the shape tensor when constant, else the options, else the (static) output shape.
    if c.has(1) and c.t_in(1).data is not None:
        shape = c.ints(1)
    elif c.opts is not None and c.opts.NewShapeLength():
        shape = [int(v) for v in c.opts.NewShapeAsNumpy()]
    else:
        shape = list(c.t_out().shape)
    c.emit(Op.RESHAPE, [c.inp(0), c.b.i32_tensor(shape or [1])], [c.out()])


@mapper("SQUEEZE")
def _squeeze(c: OpCtx) -> None:
    rank = len(c.t_in(0).shape)
    dims = [int(v) for v in c.opts.SqueezeDimsAsNumpy()] if c.opts is not None and c.opts.SqueezeDimsLength() else []
    if not dims:
        dims = [i for i, d in enumerate(c.t_in(0).shape) if d == 1]
    c.emit(Op.SQUEEZE, [c.inp(0), c.b.i32_tensor([_axis(d, rank) for d in dims])], [c.out()])


@mapper("EXPAND_DIMS")
def _expand_dims(c: OpCtx) -> None:
    c.emit(Op.EXPAND_DIMS, [c.inp(0), c.b.i32(c.ints(1)[0])], [c.out()])


@mapper("CONCATENATION")
def _concatenation(c: OpCtx) -> None:
    rank = len(c.t_out().shape)
    c.activation(_act(c), fusable=False)
    ins = [c.inp(k) for k in range(len(c.op.inputs))]
    c.emit(Op.CONCATENATION, ins + [c.b.i32(_axis(int(c.opts.Axis()), rank))], [c.out()])


@mapper("PACK")
def _pack(c: OpCtx) -> None:
    # No NNAPI PACK: expand each input at the axis, then concatenate.
    rank = len(c.t_out().shape)
    axis = _axis(int(c.opts.Axis()), rank)
    parts = []
    for k in range(len(c.op.inputs)):
        x = c.inp(k)
        dims = list(c.b.operands[x].dimensions)
        part = c.b.like(x, dims[:axis] + [1] + dims[axis:])
        c.emit(Op.RESHAPE, [x, c.b.i32_tensor(dims[:axis] + [1] + dims[axis:])], [part])
        parts.append(part)
    c.emit(Op.CONCATENATION, parts + [c.b.i32(axis)], [c.out()])


@mapper("UNPACK")
def _unpack(c: OpCtx) -> None:
    shape = c.t_in(0).shape
    axis = _axis(int(c.opts.Axis()), len(shape))
    outs = [c.out(k) for k in range(len(c.op.outputs))]
    pieces = [c.b.like(o, shape[:axis] + [1] + shape[axis + 1:]) for o in outs]
    c.emit(Op.SPLIT, [c.inp(0), c.b.i32(axis), c.b.i32(len(outs))], pieces)
    for piece, o, k in zip(pieces, outs, range(len(outs))):
        c.emit(Op.RESHAPE, [piece, c.b.i32_tensor(c.t_out(k).shape or [1])], [o])


@mapper("SPLIT")
def _split(c: OpCtx) -> None:
    rank = len(c.t_in(1).shape)
    outs = [c.out(k) for k in range(len(c.op.outputs))]
    c.emit(Op.SPLIT, [c.inp(1), c.b.i32(_axis(c.ints(0)[0], rank)), c.b.i32(len(outs))], outs)


@mapper("PAD", "PADV2")
def _pad(c: OpCtx) -> None:
    x = c.inp(0)
    pads = c.inp(1)
    if c.op.name == "PADV2" and c.has(2):
        v = np.asarray(c.value(2)).reshape(-1)[0]
        pad_value = c.b.f32(float(v)) if c.is_float(0) else c.b.i32(int(v))
        if c.t_in(0).type == FLOAT16:
            pad_value = c.b.scalar(T.FLOAT16, float(v))
        c.emit(Op.PAD_V2, [x, pads, pad_value], [c.out()])
    else:
        c.emit(Op.PAD, [x, pads], [c.out()])


def _resize(c: OpCtx, op_type: OperationType, layout_always: bool) -> None:
    if c.has(1) and c.t_in(1).data is not None:
        h, w = c.ints(1)[:2]
    else:
        h, w = c.t_out().shape[1:3]
    o = c.opts
    align = bool(o.AlignCorners()) if o is not None else False
    half = bool(o.HalfPixelCenters()) if o is not None else False
    ins = [c.inp(0), c.b.i32(w), c.b.i32(h)]
    if align or half:
        ins += [c.b.boolean(False), c.b.boolean(align), c.b.boolean(half)]
    elif layout_always:
        ins.append(c.b.boolean(False))
    c.emit(op_type, ins, [c.out()])


@mapper("RESIZE_BILINEAR")
def _resize_bilinear(c: OpCtx) -> None:
    _resize(c, Op.RESIZE_BILINEAR, False)


@mapper("RESIZE_NEAREST_NEIGHBOR")
def _resize_nearest(c: OpCtx) -> None:
    _resize(c, Op.RESIZE_NEAREST_NEIGHBOR, True)


@mapper("TRANSPOSE")
def _transpose(c: OpCtx) -> None:
    c.emit(Op.TRANSPOSE, [c.inp(0), c.inp(1)], [c.out()])


@mapper("DEPTH_TO_SPACE", "SPACE_TO_DEPTH")
def _depth_space(c: OpCtx) -> None:
    op_type = Op.DEPTH_TO_SPACE if c.op.name == "DEPTH_TO_SPACE" else Op.SPACE_TO_DEPTH
    c.emit(op_type, [c.inp(0), c.b.i32(c.opts.BlockSize())], [c.out()])


@mapper("BATCH_TO_SPACE_ND")
def _batch_to_space(c: OpCtx) -> None:
    if c.has(2) and any(c.ints(2)):
        c.unsupported("non-zero crops")
    c.emit(Op.BATCH_TO_SPACE_ND, [c.inp(0), c.inp(1)], [c.out()])


@mapper("SPACE_TO_BATCH_ND")
def _space_to_batch(c: OpCtx) -> None:
    c.emit(Op.SPACE_TO_BATCH_ND, [c.inp(0), c.inp(1), c.inp(2)], [c.out()])


@mapper("STRIDED_SLICE")
def _strided_slice(c: OpCtx) -> None:
    o = c.opts
    if o.EllipsisMask() or o.NewAxisMask():
        c.unsupported("ellipsis_mask / new_axis_mask")
    if hasattr(o, "Offset") and o.Offset():
        c.unsupported("offset=true")
    c.emit(Op.STRIDED_SLICE, [c.inp(0), c.inp(1), c.inp(2), c.inp(3), c.b.i32(o.BeginMask()),
                              c.b.i32(o.EndMask()), c.b.i32(o.ShrinkAxisMask())], [c.out()])


@mapper("SLICE")
def _slice(c: OpCtx) -> None:
    c.emit(Op.SLICE, [c.inp(0), c.inp(1), c.inp(2)], [c.out()])


@mapper("TILE")
def _tile(c: OpCtx) -> None:
    c.emit(Op.TILE, [c.inp(0), c.inp(1)], [c.out()])


@mapper("GATHER")
def _gather(c: OpCtx) -> None:
    o = c.opts
    if o is not None and hasattr(o, "BatchDims") and o.BatchDims():
        c.unsupported("batch_dims != 0")
    rank = len(c.t_in(0).shape)
    c.emit(Op.GATHER, [c.inp(0), c.b.i32(_axis(int(o.Axis()) if o is not None else 0, rank)), c.inp(1)],
           [c.out()])


@mapper("EMBEDDING_LOOKUP")
def _embedding_lookup(c: OpCtx) -> None:
    c.emit(Op.EMBEDDING_LOOKUP, [c.inp(0), c.inp(1)], [c.out()])


@mapper("FILL")
def _fill(c: OpCtx) -> None:
    v = np.asarray(c.value(1)).reshape(-1)[0]
    kind = {0: T.FLOAT32, 1: T.FLOAT16, 2: T.INT32}.get(c.t_in(1).type)
    if kind is None:
        c.unsupported(f"fill value of type {c.t_in(1).type_name}")
    c.emit(Op.FILL, [c.inp(0), c.b.scalar(kind, v)], [c.out()])


@mapper("TOPK_V2")
def _topk(c: OpCtx) -> None:
    c.emit(Op.TOPK_V2, [c.inp(0), c.b.i32(c.ints(1)[0])], [c.out(0), c.out(1)])


@mapper("ARG_MAX", "ARG_MIN")
def _arg(c: OpCtx) -> None:
    if c.t_out().type != 2:
        c.unsupported("NNAPI ARGMAX/ARGMIN output int32 only")
    rank = len(c.t_in(0).shape)
    op_type = Op.ARGMAX if c.op.name == "ARG_MAX" else Op.ARGMIN
    c.emit(op_type, [c.inp(0), c.b.i32(_axis(c.ints(1)[0], rank))], [c.out()])


# ---- reductions ------------------------------------------------------------------------------
_REDUCE = {"SUM": Op.REDUCE_SUM, "REDUCE_MAX": Op.REDUCE_MAX, "REDUCE_MIN": Op.REDUCE_MIN,
           "REDUCE_PROD": Op.REDUCE_PROD, "REDUCE_ANY": Op.REDUCE_ANY}


def _axes(c: OpCtx) -> int:
    rank = len(c.t_in(0).shape)
    if c.t_in(1).data is not None:
        return c.b.i32_tensor([_axis(a, rank) for a in c.ints(1)])
    return c.inp(1)


@mapper("MEAN")
def _mean(c: OpCtx) -> None:
    keep = bool(c.opts.KeepDims()) if c.opts is not None else False
    c.emit(Op.MEAN, [c.inp(0), _axes(c), c.b.i32(int(keep))], [c.out()])


@mapper(*_REDUCE)
def _reduce(c: OpCtx) -> None:
    keep = bool(c.opts.KeepDims()) if c.opts is not None else False
    c.emit(_REDUCE[c.op.name], [c.inp(0), _axes(c), c.b.boolean(keep)], [c.out()])
