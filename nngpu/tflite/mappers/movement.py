"""Shape and data movement: reshapes, concatenation and splitting, padding, slicing, gathers.

NNAPI keeps the input's scale and zero point for most of these; when a TFLite model changes
them (rare: the converter usually keeps them) a requantize follows (common.same_scale_output)."""
from __future__ import annotations

import numpy as np

from ...hal.types import OperandType, OperationType
from ..context import OpCtx
from ..tensors import FLOAT16
from .common import Q8S, act, axis, registry, requantize, same_scale_output

Op = OperationType
T = OperandType
MAPPERS, mapper = registry()


def _same(c: OpCtx, op_type: OperationType, ins: list[int]) -> None:
    same_scale_output(c, ins[0], c.out(), lambda target: c.emit(op_type, ins, [target]))


@mapper("RESHAPE")
def _reshape(c: OpCtx) -> None:
    # new_shape: the shape tensor when constant, else the options, else the (static) output shape.
    if c.has(1) and c.t_in(1).data is not None:
        shape = c.ints(1)
    elif c.opts is not None and c.opts.NewShapeLength():
        shape = [int(v) for v in c.opts.NewShapeAsNumpy()]
    else:
        shape = list(c.t_out().shape)
    _same(c, Op.RESHAPE, [c.inp(0), c.b.i32_tensor(shape or [1])])


@mapper("SQUEEZE")
def _squeeze(c: OpCtx) -> None:
    rank = len(c.t_in(0).shape)
    dims = [int(v) for v in c.opts.SqueezeDimsAsNumpy()] if c.opts is not None and c.opts.SqueezeDimsLength() else []
    if not dims:
        dims = [i for i, d in enumerate(c.t_in(0).shape) if d == 1]
    _same(c, Op.SQUEEZE, [c.inp(0), c.b.i32_tensor([axis(d, rank) for d in dims])])


@mapper("EXPAND_DIMS")
def _expand_dims(c: OpCtx) -> None:
    _same(c, Op.EXPAND_DIMS, [c.inp(0), c.b.i32(c.ints(1)[0])])


@mapper("CONCATENATION")
def _concatenation(c: OpCtx) -> None:
    rank = len(c.t_out().shape)
    c.activation(act(c), fusable=False)
    out = c.out()
    ins = []
    for k in range(len(c.op.inputs)):
        x = c.inp(k)
        xo, oo = c.b.operands[x], c.b.operands[out]
        # int8 CONCATENATION needs every input at the output's scale (uint8 requantizes itself).
        if oo.type == Q8S and (np.float32(xo.scale) != np.float32(oo.scale) or xo.zeroPoint != oo.zeroPoint):
            moved = c.b.like(out, list(xo.dimensions))
            requantize(c, x, moved)
            x = moved
        ins.append(x)
    c.emit(Op.CONCATENATION, ins + [c.b.i32(axis(int(c.opts.Axis()), rank))], [out])


@mapper("PACK")
def _pack(c: OpCtx) -> None:
    # Expand each input at the axis, then concatenate (works on HAL 1.2 drivers, unlike PACK).
    rank = len(c.t_out().shape)
    a = axis(int(c.opts.Axis()), rank)
    parts = []
    for k in range(len(c.op.inputs)):
        x = c.inp(k)
        dims = list(c.b.operands[x].dimensions) if c.t_in(k).shape else []
        part = c.b.like(x, dims[:a] + [1] + dims[a:])
        c.emit(Op.RESHAPE, [x, c.b.i32_tensor(dims[:a] + [1] + dims[a:])], [part])
        parts.append(part)
    c.emit(Op.CONCATENATION, parts + [c.b.i32(a)], [c.out()])


@mapper("UNPACK")
def _unpack(c: OpCtx) -> None:
    shape = c.t_in(0).shape
    a = axis(int(c.opts.Axis()), len(shape))
    outs = [c.out(k) for k in range(len(c.op.outputs))]
    pieces = [c.b.like(o, shape[:a] + [1] + shape[a + 1:]) for o in outs]
    c.emit(Op.SPLIT, [c.inp(0), c.b.i32(a), c.b.i32(len(outs))], pieces)
    for piece, o, k in zip(pieces, outs, range(len(outs))):
        c.emit(Op.RESHAPE, [piece, c.b.i32_tensor(c.t_out(k).shape or [1])], [o])


@mapper("SPLIT")
def _split(c: OpCtx) -> None:
    rank = len(c.t_in(1).shape)
    outs = [c.out(k) for k in range(len(c.op.outputs))]
    c.emit(Op.SPLIT, [c.inp(1), c.b.i32(axis(c.ints(0)[0], rank)), c.b.i32(len(outs))], outs)


@mapper("SPLIT_V")
def _split_v(c: OpCtx) -> None:
    # Uneven sizes: one SLICE per output (NNAPI SPLIT splits evenly only).
    shape = c.t_in(0).shape
    a = axis(c.ints(2)[0], len(shape))
    sizes = c.ints(1)
    if -1 in sizes:
        sizes[sizes.index(-1)] = shape[a] - (sum(sizes) + 1)
    start = 0
    for k, n in enumerate(sizes):
        begin = [0] * len(shape)
        begin[a] = start
        size = list(shape)
        size[a] = n
        c.emit(Op.SLICE, [c.inp(0), c.b.i32_tensor(begin), c.b.i32_tensor(size)], [c.out(k)])
        start += n


@mapper("PAD", "PADV2")
def _pad(c: OpCtx) -> None:
    x = c.inp(0)
    pads = c.inp(1)
    if c.op.name == "PADV2" and c.has(2):
        v = np.asarray(c.value(2)).reshape(-1)[0]
        pad_value = c.b.f32(float(v)) if c.is_float(0) else c.b.i32(int(v))
        if c.t_in(0).type == FLOAT16:
            pad_value = c.b.scalar(T.FLOAT16, float(v))
        _same(c, Op.PAD_V2, [x, pads, pad_value])
    else:
        _same(c, Op.PAD, [x, pads])


@mapper("MIRROR_PAD")
def _mirror_pad(c: OpCtx) -> None:
    mode = int(c.opts.Mode()) if c.opts is not None else 0  # tflite MirrorPadMode REFLECT=0, SYMMETRIC=1
    _same(c, Op.MIRROR_PAD, [c.inp(0), c.inp(1), c.b.i32(mode)])


@mapper("REVERSE_V2")
def _reverse(c: OpCtx) -> None:
    # NNAPI REVERSE takes one axis: one REVERSE per axis.
    rank = len(c.t_in(0).shape)
    axes = [axis(a, rank) for a in c.ints(1)]
    x, out = c.inp(0), c.out()
    for k, a in enumerate(axes):
        target = out if k == len(axes) - 1 else c.b.like(x)
        c.emit(Op.REVERSE, [x, c.b.i32_tensor([a])], [target])
        x = target
    if not axes:
        c.emit(Op.RESHAPE, [x, c.b.i32_tensor(c.t_out().shape or [1])], [out])


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
    _same(c, op_type, ins)


@mapper("RESIZE_BILINEAR")
def _resize_bilinear(c: OpCtx) -> None:
    _resize(c, Op.RESIZE_BILINEAR, False)


@mapper("RESIZE_NEAREST_NEIGHBOR")
def _resize_nearest(c: OpCtx) -> None:
    _resize(c, Op.RESIZE_NEAREST_NEIGHBOR, True)


@mapper("TRANSPOSE")
def _transpose(c: OpCtx) -> None:
    _same(c, Op.TRANSPOSE, [c.inp(0), c.inp(1)])


@mapper("DEPTH_TO_SPACE", "SPACE_TO_DEPTH")
def _depth_space(c: OpCtx) -> None:
    op_type = Op.DEPTH_TO_SPACE if c.op.name == "DEPTH_TO_SPACE" else Op.SPACE_TO_DEPTH
    _same(c, op_type, [c.inp(0), c.b.i32(c.opts.BlockSize())])


@mapper("BATCH_TO_SPACE_ND")
def _batch_to_space(c: OpCtx) -> None:
    crops = c.ints(2) if c.has(2) else []
    ins = [c.inp(0), c.inp(1)]
    if not any(crops):
        _same(c, Op.BATCH_TO_SPACE_ND, ins)
        return
    # NNAPI has no crops: the uncropped result, then a SLICE of the kept window.
    x, block = c.t_in(0).shape, c.ints(1)
    full = [x[0] // int(np.prod(block))] + [x[1] * block[0], x[2] * block[1]] + x[3:]
    whole = c.b.like(c.out(), full)
    same_scale_output(c, ins[0], whole, lambda target: c.emit(Op.BATCH_TO_SPACE_ND, ins, [target]))
    begin = [0, crops[0], crops[2]] + [0] * (len(full) - 3)
    c.emit(Op.SLICE, [whole, c.b.i32_tensor(begin), c.b.i32_tensor(c.t_out().shape)], [c.out()])


@mapper("SPACE_TO_BATCH_ND")
def _space_to_batch(c: OpCtx) -> None:
    _same(c, Op.SPACE_TO_BATCH_ND, [c.inp(0), c.inp(1), c.inp(2)])


@mapper("STRIDED_SLICE")
def _strided_slice(c: OpCtx) -> None:
    o = c.opts
    if o.EllipsisMask() or o.NewAxisMask():
        c.unsupported("ellipsis_mask / new_axis_mask")
    if hasattr(o, "Offset") and o.Offset():
        c.unsupported("offset=true")
    begin, end = c.inp(1), c.inp(2)
    shrink = int(o.ShrinkAxisMask())
    if shrink and c.t_in(1).data is not None and c.t_in(2).data is not None:
        # TFLite takes begin[i] alone on a shrunk axis (its converter writes end 0 for begin -1);
        # NNAPI wants the slice of one spelled out: begin normalised, end = begin + 1.
        b, e = c.ints(1), c.ints(2)
        for d, extent in enumerate(c.t_in(0).shape[:len(b)]):
            if shrink >> d & 1:
                b[d] = 0 if o.BeginMask() >> d & 1 else b[d] + extent if b[d] < 0 else b[d]
                e[d] = b[d] + 1
        begin, end = c.b.i32_tensor(b), c.b.i32_tensor(e)
    _same(c, Op.STRIDED_SLICE, [c.inp(0), begin, end, c.inp(3), c.b.i32(o.BeginMask() & ~shrink),
                                c.b.i32(o.EndMask() & ~shrink), c.b.i32(shrink)])


@mapper("SLICE")
def _slice(c: OpCtx) -> None:
    _same(c, Op.SLICE, [c.inp(0), c.inp(1), c.inp(2)])


@mapper("TILE")
def _tile(c: OpCtx) -> None:
    _same(c, Op.TILE, [c.inp(0), c.inp(1)])


@mapper("BROADCAST_TO")
def _broadcast_to(c: OpCtx) -> None:
    # A TILE by the ratio of the shapes, after a RESHAPE that gives the input the output's rank.
    src, dst = list(c.t_in(0).shape), list(c.t_out().shape)
    x = c.inp(0)
    if len(src) < len(dst):
        src = [1] * (len(dst) - len(src)) + src
        shaped = c.b.like(x, src)
        c.emit(Op.RESHAPE, [x, c.b.i32_tensor(src)], [shaped])
        x = shaped
    _same(c, Op.TILE, [x, c.b.i32_tensor([d // s if s else 1 for s, d in zip(src, dst)])])


@mapper("GATHER")
def _gather(c: OpCtx) -> None:
    o = c.opts
    if o is not None and hasattr(o, "BatchDims") and o.BatchDims():
        c.unsupported("batch_dims != 0")
    shape = c.t_in(0).shape
    a = axis(int(o.Axis()) if o is not None else 0, len(shape))
    ins = [c.inp(0), c.b.i32(a), c.inp(1)]
    if c.t_in(1).shape:
        _same(c, Op.GATHER, ins)
        return
    # A scalar index drops the axis; here it is an index of shape [1], which keeps it: reshape.
    out = c.out()
    kept = c.b.like(out, shape[:a] + [1] + shape[a + 1:])
    same_scale_output(c, ins[0], kept, lambda target: c.emit(Op.GATHER, ins, [target]))
    c.emit(Op.RESHAPE, [kept, c.b.i32_tensor(c.t_out().shape or [1])], [out])


@mapper("EMBEDDING_LOOKUP")
def _embedding_lookup(c: OpCtx) -> None:
    c.emit(Op.EMBEDDING_LOOKUP, [c.inp(0), c.inp(1)], [c.out()])


@mapper("HASHTABLE_LOOKUP")
def _hashtable_lookup(c: OpCtx) -> None:
    c.emit(Op.HASHTABLE_LOOKUP, [c.inp(0), c.inp(1), c.inp(2)], [c.out(0), c.out(1)])


@mapper("FILL")
def _fill(c: OpCtx) -> None:
    v = np.asarray(c.value(1)).reshape(-1)[0]
    kind = {0: T.FLOAT32, 1: T.FLOAT16, 2: T.INT32}.get(c.t_in(1).type)
    if kind is None:
        c.unsupported(f"fill value of type {c.t_in(1).type_name}")
    c.emit(Op.FILL, [c.inp(0), c.b.scalar(kind, v)], [c.out()])


@mapper("SHAPE")
def _shape(c: OpCtx) -> None:
    # rewrite.py folds every SHAPE whose input shape is known at import; this one's is not.
    c.unsupported(f"the shape of {c.t_in(0).name} is known only at run time")
