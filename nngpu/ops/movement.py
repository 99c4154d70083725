"""Data-movement operations: CONCATENATION, TRANSPOSE, PAD, PAD_V2, SLICE, STRIDED_SLICE, SPLIT,
TILE, GATHER, CHANNEL_SHUFFLE. Values are copied, never recomputed, except CONCATENATION's
requantization of quantized inputs whose scale / zeroPoint differ from the output's."""
from __future__ import annotations

import numpy as np

from ..hal.types import OperandType as T
from ..hal.types import OperationType as Op
from ._movement_util import (CORE4, CORE4_I32, QUANT8, V, Variadic, check_rank, int_vector, pad_constant,
                             nonzero_quant8_offset_needs_v1_2, norm_axis, rules, typed, zero_value)
from .quant import round_half_away
from .registry import OpContext, OpError, OpSpec, register, sig

_SCALAR_OF = {T.TENSOR_FLOAT32: T.FLOAT32, T.TENSOR_FLOAT16: T.FLOAT16,
              T.TENSOR_QUANT8_ASYMM: T.INT32, T.TENSOR_QUANT8_ASYMM_SIGNED: T.INT32}


# ---- CONCATENATION -------------------------------------------------------------------------

def _requantize(x: np.ndarray, in_scale: float, in_zp: int, out_scale: float, out_zp: int,
                signed: bool) -> np.ndarray:
    """The reference ConcatenationWithScaling, in float32; int8 goes through its uint8 path
    (values and zero points offset by 128), as the reference does."""
    shift = 128 if signed else 0
    in_zp, out_zp = in_zp + shift, out_zp + shift
    if in_zp == out_zp and np.float32(in_scale) == np.float32(out_scale):
        return x
    scale = np.float32(in_scale) * (np.float32(1.0) / np.float32(out_scale))
    bias = np.float32(-in_zp) * scale
    real = (x.astype(np.int32) + shift).astype(np.float32) * scale + bias
    value = round_half_away(real.astype(np.float64)).astype(np.int64) + out_zp
    return (np.clip(value, 0, 255) - shift).astype(x.dtype)


def _concatenation(ctx: OpContext) -> list[np.ndarray]:
    n = ctx.num_inputs - 1
    xs = [ctx.input(i) for i in range(n)]
    rank = xs[0].ndim
    check_rank(xs[0], 1, 4)
    axis = norm_axis(int(ctx.scalar(n)), rank)
    for i, x in enumerate(xs):
        if x.ndim != rank or x.shape[:axis] != xs[0].shape[:axis] or x.shape[axis + 1:] != xs[0].shape[axis + 1:]:
            raise OpError(f"input {i} shape {list(x.shape)} incompatible with {list(xs[0].shape)} on axis {axis}")
    out = ctx.out_operand(0)
    if out.type in QUANT8:
        signed = out.type == T.TENSOR_QUANT8_ASYMM_SIGNED
        xs = [_requantize(x, ctx.in_operand(i).scale, ctx.in_operand(i).zeroPoint, out.scale, out.zeroPoint, signed)
              for i, x in enumerate(xs)]
    return [np.concatenate(xs, axis=axis)]


def _concat_quant_rule(ctx: OpContext) -> None:
    """Before 1.2 quant8 inputs had to share the output's scale and zeroPoint."""
    out = ctx.out_operand(0)
    if out.type == T.TENSOR_QUANT8_ASYMM and ctx.version < V.V1_2 and any(
            (ctx.in_operand(i).scale, ctx.in_operand(i).zeroPoint) != (out.scale, out.zeroPoint)
            for i in range(ctx.num_inputs - 1)):
        raise OpError("quant8 inputs with another scale / zeroPoint than the output need HAL 1.2")


# ---- TRANSPOSE / PAD -----------------------------------------------------------------------

def _transpose(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.input(0)
    check_rank(x)
    if ctx.has_input(1):
        perm = int_vector(ctx, 1, x.ndim, "perm")
        if sorted(perm.tolist()) != list(range(x.ndim)):
            raise OpError(f"perm {perm.tolist()} is not a permutation of {x.ndim} axes")
    else:
        perm = np.arange(x.ndim)[::-1]
    return [np.ascontiguousarray(x.transpose([int(p) for p in perm]))]


def _paddings(ctx: OpContext, i: int, rank: int) -> list[tuple[int, int]]:
    p = np.asarray(ctx.input(i))
    if p.shape != (rank, 2):
        raise OpError(f"paddings shape {list(p.shape)}, expected [{rank}, 2]")
    if np.any(p < 0):
        raise OpError(f"negative padding {p.tolist()}")
    return [(int(a), int(b)) for a, b in p]


def _pad(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.input(0)
    check_rank(x)
    value = zero_value(ctx) if ctx.num_inputs < 3 else _pad_value(ctx, x.dtype)
    return [pad_constant(x, _paddings(ctx, 1, x.ndim), value)]


def _pad_value(ctx: OpContext, dtype: np.dtype):
    v = ctx.scalar(2)
    if ctx.in_operand(0).type in QUANT8:
        # The reference narrows the INT32 pad value to the 8-bit storage type (wrap-around).
        return np.array([int(v) & 0xFF], dtype=np.uint8).view(dtype)[0]
    return v


# ---- SLICE / STRIDED_SLICE / SPLIT ---------------------------------------------------------

def _slice(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.input(0)
    check_rank(x, 1, 99)
    begin = int_vector(ctx, 1, x.ndim, "begin")
    size = int_vector(ctx, 2, x.ndim, "size")
    index = []
    for d, (b, s) in enumerate(zip(begin, size)):
        s = x.shape[d] - b if s == -1 else s
        if b < 0 or s < 0 or b + s > x.shape[d]:
            raise OpError(f"slice begin {b} size {s} out of dimension {d} of extent {x.shape[d]}")
        index.append(slice(int(b), int(b + s)))
    return [np.ascontiguousarray(x[tuple(index)])]


def _clamped_index(index: int, dim: int, positive: bool) -> int:
    """The reference's ClampedIndex: a begin/end index clamped into range for one stride sign."""
    if positive:
        return dim if index >= dim else (min(max(index, -dim), dim) % dim if dim else 0)
    return -1 if index < -dim else (min(max(index, -dim), dim - 1) % dim if dim else -1)


def _strided_slice(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.input(0)
    check_rank(x)
    n = x.ndim
    begin, end, strides = (int_vector(ctx, i, n, name) for i, name in ((1, "begin"), (2, "end"), (3, "strides")))
    begin_mask, end_mask, shrink_mask = (int(ctx.scalar(i)) for i in (4, 5, 6))
    index, out_dims = [], []
    for d in range(n):
        dim, stride = x.shape[d], int(strides[d])
        if stride == 0:
            raise OpError(f"stride of dimension {d} is 0")
        pos = stride > 0
        b = (0 if pos else dim - 1) if begin_mask >> d & 1 else _clamped_index(int(begin[d]), dim, pos)
        e = (dim if pos else -1) if end_mask >> d & 1 else _clamped_index(int(end[d]), dim, pos)
        count = max(0, -(-(e - b) // stride))  # ceil((e - b) / stride), at least 0
        if shrink_mask >> d & 1:
            if not pos or count != 1:
                raise OpError(f"shrunk dimension {d} needs a positive stride and a slice of 1, has {count}")
        else:
            out_dims.append(count)
        index.append(b + stride * np.arange(count))
    out = x[np.ix_(*index)] if n else x
    return [out.reshape(out_dims or [1])]  # every axis shrunk: the spec's output shape is [1]


def _split(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.input(0)
    check_rank(x, 1, 99)
    axis = norm_axis(int(ctx.scalar(1)), x.ndim)
    k = int(ctx.scalar(2))
    if k <= 0 or x.shape[axis] % k:
        raise OpError(f"{k} splits do not evenly divide extent {x.shape[axis]}")
    if k != ctx.num_outputs:
        raise OpError(f"{k} splits but {ctx.num_outputs} outputs")
    return [np.ascontiguousarray(p) for p in np.split(x, k, axis=axis)]


# ---- TILE / GATHER / CHANNEL_SHUFFLE -------------------------------------------------------

def _tile(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.input(0)
    check_rank(x, 1, 99)
    multiples = int_vector(ctx, 1, x.ndim, "multiples")
    if np.any(multiples < 0):
        raise OpError(f"negative multiples {multiples.tolist()}")
    return [np.tile(x, [int(m) for m in multiples])]


def _gather(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.input(0)
    check_rank(x, 1, 99)
    axis = norm_axis(int(ctx.scalar(1)), x.ndim)
    indices = np.asarray(ctx.input(2)).astype(np.int64)
    if indices.size and (indices.min() < 0 or indices.max() >= x.shape[axis]):
        raise OpError(f"gather index out of [0, {x.shape[axis]})")
    return [np.take(x, indices, axis=axis)]


def _channel_shuffle(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.input(0)
    check_rank(x, 1, 4)
    groups = int(ctx.scalar(1))
    axis = norm_axis(int(ctx.scalar(2)), x.ndim)
    c = x.shape[axis]
    if groups <= 0 or c % groups:
        raise OpError(f"{c} channels not divisible into {groups} groups")
    # output channel k * groups + g = input channel g * (c / groups) + k
    split = x.reshape(x.shape[:axis] + (groups, c // groups) + x.shape[axis + 1:])
    return [np.ascontiguousarray(np.swapaxes(split, axis, axis + 1)).reshape(x.shape)]


# ---- registration --------------------------------------------------------------------------

register(OpSpec(Op.CONCATENATION,
                [Variadic((T.INT32,), (t,), v, in_repeat=t) for t, v in typed(CORE4, V.V1_0)],
                _concatenation, rules(outputs=0, min_rank=1, extra=_concat_quant_rule)))

register(OpSpec(Op.TRANSPOSE, [sig([t, T.TENSOR_INT32], [t], v) for t, v in typed(CORE4, V.V1_1)],
                _transpose, rules()))

register(OpSpec(Op.PAD, [sig([t, T.TENSOR_INT32], [t], v) for t, v in typed(CORE4, V.V1_1)],
                _pad, rules(extra=nonzero_quant8_offset_needs_v1_2)))

register(OpSpec(Op.PAD_V2, [sig([t, T.TENSOR_INT32, _SCALAR_OF[t]], [t], v) for t, v in typed(CORE4, V.V1_2)],
                _pad, rules()))

register(OpSpec(Op.SLICE, [sig([t, T.TENSOR_INT32, T.TENSOR_INT32], [t], v) for t, v in typed(CORE4_I32, V.V1_2)],
                _slice, rules(max_rank=None, min_rank=1)))

register(OpSpec(Op.STRIDED_SLICE,
                [sig([t, T.TENSOR_INT32, T.TENSOR_INT32, T.TENSOR_INT32, T.INT32, T.INT32, T.INT32], [t], v)
                 for t, v in typed(CORE4, V.V1_1)],
                _strided_slice, rules()))

register(OpSpec(Op.SPLIT, [Variadic((t, T.INT32, T.INT32), (), v, out_repeat=t) for t, v in typed(CORE4_I32, V.V1_2)],
                _split, rules(outputs=None, max_rank=None, min_rank=1)))

register(OpSpec(Op.TILE, [sig([t, T.TENSOR_INT32], [t], v) for t, v in typed(CORE4_I32, V.V1_2)],
                _tile, rules(max_rank=None, min_rank=1)))

register(OpSpec(Op.GATHER, [sig([t, T.INT32, T.TENSOR_INT32], [t], v) for t, v in typed(CORE4_I32, V.V1_2)],
                _gather, rules(max_rank=None, min_rank=1)))

register(OpSpec(Op.CHANNEL_SHUFFLE, [sig([t, T.INT32, T.INT32], [t], v) for t, v in typed(CORE4, V.V1_2)],
                _channel_shuffle, rules()))
