"""Data-movement operations: CONCATENATION, TRANSPOSE, PAD, PAD_V2, SLICE, STRIDED_SLICE, SPLIT,
TILE, GATHER, CHANNEL_SHUFFLE. Values are copied, never recomputed, except CONCATENATION's
requantization of quantized inputs whose scale / zeroPoint differ from the output's.

Each operation's parameters are parsed once, by helpers its shape function and its reference
share. On the device, TRANSPOSE, SLICE, STRIDED_SLICE, SPLIT, TILE and CHANNEL_SHUFFLE are the
reference's own index map (lib/index_map.py); CONCATENATION (a table per input to
requantize), PAD / PAD_V2 and GATHER (indices known at compile time) have closed forms."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..hal.types import OperandType as T
from ..hal.types import OperationType as Op
from ..ir import Compute, Coords, Expr, Tensor
from ..ir.tensor import View
from .lib.axes import resolve_axis
from .lib.device import COPYABLE, lookup, types_in
from .lib.dtypes import dtype_of, quant_range
from .lib.index_map import copyable, index_map, padded, require_nonempty, stored_constant
from .lib.layout import (
    CORE4,
    CORE4_I32,
    QUANT8,
    V,
    Variadic,
    check_shape_rank,
    int_vector,
    nonzero_quant8_offset_needs_v1_2,
    pad_constant,
    register_injective,
    rules,
    typed,
    zero_value,
)
from .lib.quant import round_half_away
from .node import OpNode
from .registry import Kernel, OpContext, OpError, sig

Shape = tuple[int, ...]
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


def _requantize_input(ctx: OpContext, i: int, x: np.ndarray) -> np.ndarray:
    """Input i's stored values `x` in the output's scale and zeroPoint."""
    o, out = ctx.in_operand(i), ctx.out_operand(0)
    return _requantize(x, o.scale, o.zeroPoint, out.scale, out.zeroPoint, out.type == T.TENSOR_QUANT8_ASYMM_SIGNED)


def _concat_axis(ctx: OpContext) -> tuple[int, list[Shape]]:
    """The axis and the input shapes, checked to agree off the axis."""
    n = ctx.num_inputs - 1
    shapes = [ctx.in_shape(i) for i in range(n)]
    first = shapes[0]
    check_shape_rank(first, 1, 4)
    axis = resolve_axis(int(ctx.scalar(n)), len(first))
    for i, s in enumerate(shapes):
        if len(s) != len(first) or s[:axis] != first[:axis] or s[axis + 1:] != first[axis + 1:]:
            raise OpError(f"input {i} shape {list(s)} incompatible with {list(first)} on axis {axis}")
    return axis, shapes


def _concat_shape(ctx: OpContext) -> list[Shape]:
    axis, shapes = _concat_axis(ctx)
    return [shapes[0][:axis] + (sum(s[axis] for s in shapes),) + shapes[0][axis + 1:]]


def _concatenation(ctx: OpContext) -> list[np.ndarray]:
    axis, _ = _concat_axis(ctx)
    xs = [ctx.input(i) for i in range(ctx.num_inputs - 1)]
    if ctx.out_operand(0).type in QUANT8:
        xs = [_requantize_input(ctx, i, x) for i, x in enumerate(xs)]
    return [np.concatenate(xs, axis=axis)]


def _concat_bind(node: OpNode) -> Kernel | None:
    """The numpy plan's CONCATENATION straight into its output; requantizing inputs run the reference."""
    axis, _ = _concat_axis(node)
    if node.out_operand(0).type in QUANT8:
        return None

    def kernel(ins: Sequence[np.ndarray], outs: list[np.ndarray]) -> list[np.ndarray]:
        np.concatenate(ins[:-1], axis=axis, out=outs[0])
        return outs
    return kernel


def _concat_quant_rule(ctx: OpContext) -> None:
    """Before 1.2 quant8 inputs had to share the output's scale and zeroPoint."""
    out = ctx.out_operand(0)
    if out.type == T.TENSOR_QUANT8_ASYMM and ctx.version < V.V1_2 and any(
            (ctx.in_operand(i).scale, ctx.in_operand(i).zeroPoint) != (out.scale, out.zeroPoint)
            for i in range(ctx.num_inputs - 1)):
        raise OpError("quant8 inputs with another scale / zeroPoint than the output need HAL 1.2")


# ---- TRANSPOSE / PAD -----------------------------------------------------------------------

def _perm(ctx: OpContext) -> list[int]:
    rank = len(ctx.in_shape(0))
    check_shape_rank(ctx.in_shape(0))
    if not ctx.given(1):  # omitted, in the model or by the execution
        return list(range(rank))[::-1]
    perm = int_vector(ctx, 1, rank, "perm")
    if sorted(perm.tolist()) != list(range(rank)):
        raise OpError(f"perm {perm.tolist()} is not a permutation of {rank} axes")
    return [int(p) for p in perm]


def _transpose_shape(ctx: OpContext) -> list[Shape]:
    shape = ctx.in_shape(0)
    return [tuple(shape[p] for p in _perm(ctx))]


def _transpose(ctx: OpContext) -> list[np.ndarray]:
    return [np.ascontiguousarray(ctx.input(0).transpose(_perm(ctx)))]


def _paddings(ctx: OpContext) -> list[tuple[int, int]]:
    rank = len(ctx.in_shape(0))
    check_shape_rank(ctx.in_shape(0))
    p = np.asarray(ctx.input(1))
    if p.shape != (rank, 2):
        raise OpError(f"paddings shape {list(p.shape)}, expected [{rank}, 2]")
    if np.any(p < 0):
        raise OpError(f"negative padding {p.tolist()}")
    return [(int(a), int(b)) for a, b in p]


def _pad_shape(ctx: OpContext) -> list[Shape]:
    return [tuple(d + a + b for d, (a, b) in zip(ctx.in_shape(0), _paddings(ctx)))]


def _pad_value(ctx: OpContext):
    """The stored value the padding holds: PAD's logical zero, PAD_V2's scalar."""
    if ctx.num_inputs < 3:
        return zero_value(ctx)
    v = ctx.scalar(2)
    if ctx.in_operand(0).type in QUANT8:
        # The reference narrows the INT32 pad value to the 8-bit storage type (wrap-around).
        return np.array([int(v) & 0xFF], dtype=np.uint8).view(dtype_of(ctx.in_operand(0).type))[0]
    return v


def _pad(ctx: OpContext) -> list[np.ndarray]:
    return [pad_constant(ctx.input(0), _paddings(ctx), _pad_value(ctx))]


def _pad_bind(node: OpNode) -> Kernel | None:
    """The numpy plan's PAD / PAD_V2 with constant paddings and value: straight into its output."""
    pads, value = _paddings(node), _pad_value(node)

    def kernel(ins: Sequence[np.ndarray], outs: list[np.ndarray]) -> list[np.ndarray]:
        pad_constant(ins[0], pads, value, out=outs[0])
        return outs
    return kernel


# ---- SLICE / STRIDED_SLICE / SPLIT ---------------------------------------------------------

def _slice_box(ctx: OpContext) -> tuple[slice, ...]:
    shape = ctx.in_shape(0)
    check_shape_rank(shape, 1, 99)
    begin = int_vector(ctx, 1, len(shape), "begin")
    size = int_vector(ctx, 2, len(shape), "size")
    box = []
    for d, (b, s) in enumerate(zip(begin, size)):
        s = shape[d] - b if s == -1 else s
        if b < 0 or s < 0 or b + s > shape[d]:
            raise OpError(f"slice begin {b} size {s} out of dimension {d} of extent {shape[d]}")
        box.append(slice(int(b), int(b + s)))
    return tuple(box)


def _slice_shape(ctx: OpContext) -> list[Shape]:
    return [tuple(s.stop - s.start for s in _slice_box(ctx))]


def _slice(ctx: OpContext) -> list[np.ndarray]:
    return [np.ascontiguousarray(ctx.input(0)[_slice_box(ctx)])]


def _clamped_index(index: int, dim: int, positive: bool) -> int:
    """The reference's ClampedIndex: a begin/end index clamped into range for one stride sign."""
    if positive:
        return dim if index >= dim else (min(max(index, -dim), dim) % dim if dim else 0)
    return -1 if index < -dim else (min(max(index, -dim), dim - 1) % dim if dim else -1)


def _strided_ranges(ctx: OpContext) -> tuple[list[np.ndarray], Shape]:
    """The input indices read along each dimension, and the output shape (shrunk axes dropped;
    every axis shrunk gives the spec's shape [1])."""
    shape = ctx.in_shape(0)
    check_shape_rank(shape)
    n = len(shape)
    begin, end, strides = (int_vector(ctx, i, n, name) for i, name in ((1, "begin"), (2, "end"), (3, "strides")))
    begin_mask, end_mask, shrink_mask = (int(ctx.scalar(i)) for i in (4, 5, 6))
    ranges, out_dims = [], []
    for d in range(n):
        dim, stride = shape[d], int(strides[d])
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
        ranges.append(b + stride * np.arange(count))
    return ranges, tuple(out_dims or [1])


def _strided_slice_shape(ctx: OpContext) -> list[Shape]:
    return [_strided_ranges(ctx)[1]]


def _strided_slice(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.input(0)
    ranges, shape = _strided_ranges(ctx)
    return [(x[np.ix_(*ranges)] if x.ndim else x).reshape(shape)]


def _split_axis(ctx: OpContext) -> tuple[int, int]:
    """(axis, number of splits), checked against the input's extent and the outputs."""
    shape = ctx.in_shape(0)
    check_shape_rank(shape, 1, 99)
    axis = resolve_axis(int(ctx.scalar(1)), len(shape))
    k = int(ctx.scalar(2))
    if k <= 0 or shape[axis] % k:
        raise OpError(f"{k} splits do not evenly divide extent {shape[axis]}")
    if k != ctx.num_outputs:
        raise OpError(f"{k} splits but {ctx.num_outputs} outputs")
    return axis, k


def _split_shape(ctx: OpContext) -> list[Shape]:
    axis, k = _split_axis(ctx)
    shape = ctx.in_shape(0)
    return [shape[:axis] + (shape[axis] // k,) + shape[axis + 1:]] * k


def _split(ctx: OpContext) -> list[np.ndarray]:
    axis, k = _split_axis(ctx)
    return [np.ascontiguousarray(p) for p in np.split(ctx.input(0), k, axis=axis)]


# ---- TILE / GATHER / CHANNEL_SHUFFLE -------------------------------------------------------

def _multiples(ctx: OpContext) -> list[int]:
    shape = ctx.in_shape(0)
    check_shape_rank(shape, 1, 99)
    multiples = int_vector(ctx, 1, len(shape), "multiples")
    if np.any(multiples < 0):
        raise OpError(f"negative multiples {multiples.tolist()}")
    return [int(m) for m in multiples]


def _tile_shape(ctx: OpContext) -> list[Shape]:
    return [tuple(d * m for d, m in zip(ctx.in_shape(0), _multiples(ctx)))]


def _tile(ctx: OpContext) -> list[np.ndarray]:
    return [np.tile(ctx.input(0), _multiples(ctx))]


def _gather_axis(ctx: OpContext) -> int:
    shape = ctx.in_shape(0)
    check_shape_rank(shape, 1, 99)
    return resolve_axis(int(ctx.scalar(1)), len(shape))


def _gather_shape(ctx: OpContext) -> list[Shape]:
    axis, shape = _gather_axis(ctx), ctx.in_shape(0)
    return [shape[:axis] + ctx.in_shape(2) + shape[axis + 1:]]


def _gather_indices(ctx: OpContext, axis: int) -> np.ndarray:
    """The indices, checked to lie along the axis."""
    indices = np.asarray(ctx.input(2)).astype(np.int64)
    extent = ctx.in_shape(0)[axis]
    if indices.size and (indices.min() < 0 or indices.max() >= extent):
        raise OpError(f"gather index out of [0, {extent})")
    return indices


def _gather(ctx: OpContext) -> list[np.ndarray]:
    axis = _gather_axis(ctx)
    return [np.take(ctx.input(0), _gather_indices(ctx, axis), axis=axis)]


def _shuffle_groups(ctx: OpContext) -> tuple[int, int]:
    """(groups, axis), checked to divide the axis' channels."""
    shape = ctx.in_shape(0)
    check_shape_rank(shape, 1, 4)
    groups = int(ctx.scalar(1))
    axis = resolve_axis(int(ctx.scalar(2)), len(shape))
    if groups <= 0 or shape[axis] % groups:
        raise OpError(f"{shape[axis]} channels not divisible into {groups} groups")
    return groups, axis


def _channel_shuffle_shape(ctx: OpContext) -> list[Shape]:
    _shuffle_groups(ctx)
    return [ctx.in_shape(0)]


def _channel_shuffle(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.input(0)
    groups, axis = _shuffle_groups(ctx)
    c = x.shape[axis]
    # output channel k * groups + g = input channel g * (c / groups) + k
    split = x.reshape(x.shape[:axis] + (groups, c // groups) + x.shape[axis + 1:])
    return [np.ascontiguousarray(np.swapaxes(split, axis, axis + 1)).reshape(x.shape)]


# ---- the numpy plan's kernels: parameters parsed once, values copied into the outputs -------

def _copy_of(view) -> Kernel:
    """A Kernel storing view(input) into the output."""
    def kernel(ins: Sequence[np.ndarray], outs: list[np.ndarray]) -> list[np.ndarray]:
        np.copyto(outs[0], view(ins[0]))
        return outs
    return kernel


def _transpose_bind(node: OpNode) -> Kernel:
    perm = _perm(node)
    return _copy_of(lambda x: x.transpose(perm))


def _slice_bind(node: OpNode) -> Kernel:
    box = _slice_box(node)
    return _copy_of(lambda x: x[box])


def _strided_slice_bind(node: OpNode) -> Kernel | None:
    ranges, shape = _strided_ranges(node)
    if not ranges:  # a 0-d input
        return None
    index = np.ix_(*ranges)
    return _copy_of(lambda x: x[index].reshape(shape))


def _split_bind(node: OpNode) -> Kernel:
    axis, k = _split_axis(node)

    def kernel(ins: Sequence[np.ndarray], outs: list[np.ndarray]) -> list[np.ndarray]:
        for out, part in zip(outs, np.split(ins[0], k, axis=axis)):
            np.copyto(out, part)
        return outs
    return kernel


# ---- registration --------------------------------------------------------------------------

_CONCAT_SIGS = [Variadic((T.INT32,), (t,), v, in_repeat=t) for t, v in typed(CORE4, V.V1_0)]
CONCATENATION = register_injective(Op.CONCATENATION, _CONCAT_SIGS, _concatenation,
                                   rules(outputs=0, min_rank=1, extra=_concat_quant_rule), _concat_shape)
CONCATENATION.bind = _concat_bind
TRANSPOSE = register_injective(Op.TRANSPOSE, [sig([t, T.TENSOR_INT32], [t], v) for t, v in typed(CORE4, V.V1_1)],
                               _transpose, rules(), _transpose_shape)
PAD = register_injective(Op.PAD, [sig([t, T.TENSOR_INT32], [t], v) for t, v in typed(CORE4, V.V1_1)],
                         _pad, rules(extra=nonzero_quant8_offset_needs_v1_2), _pad_shape)
_PAD_V2_SIGS = [sig([t, T.TENSOR_INT32, _SCALAR_OF[t]], [t], v) for t, v in typed(CORE4, V.V1_2)]
PAD_V2 = register_injective(Op.PAD_V2, _PAD_V2_SIGS, _pad, rules(), _pad_shape)
PAD.bind = PAD_V2.bind = _pad_bind
_SLICE_SIGS = [sig([t, T.TENSOR_INT32, T.TENSOR_INT32], [t], v) for t, v in typed(CORE4_I32, V.V1_2)]
SLICE = register_injective(Op.SLICE, _SLICE_SIGS, _slice, rules(max_rank=None, min_rank=1), _slice_shape)
_STRIDED_SLICE_SIGS = [sig([t, T.TENSOR_INT32, T.TENSOR_INT32, T.TENSOR_INT32, T.INT32, T.INT32, T.INT32], [t], v)
                       for t, v in typed(CORE4, V.V1_1)]
STRIDED_SLICE = register_injective(Op.STRIDED_SLICE, _STRIDED_SLICE_SIGS, _strided_slice, rules(),
                                   _strided_slice_shape)
_SPLIT_SIGS = [Variadic((t, T.INT32, T.INT32), (), v, out_repeat=t) for t, v in typed(CORE4_I32, V.V1_2)]
SPLIT = register_injective(Op.SPLIT, _SPLIT_SIGS, _split, rules(outputs=None, max_rank=None, min_rank=1),
                           _split_shape)
TILE = register_injective(Op.TILE, [sig([t, T.TENSOR_INT32], [t], v) for t, v in typed(CORE4_I32, V.V1_2)],
                          _tile, rules(max_rank=None, min_rank=1), _tile_shape)
GATHER = register_injective(Op.GATHER, [sig([t, T.INT32, T.TENSOR_INT32], [t], v) for t, v in typed(CORE4_I32, V.V1_2)],
                            _gather, rules(max_rank=None, min_rank=1), _gather_shape)
CHANNEL_SHUFFLE = register_injective(Op.CHANNEL_SHUFFLE,
                                     [sig([t, T.INT32, T.INT32], [t], v) for t, v in typed(CORE4, V.V1_2)],
                                     _channel_shuffle, rules(), _channel_shuffle_shape)

for _s in (TRANSPOSE, SLICE, STRIDED_SLICE, SPLIT, TILE, CHANNEL_SHUFFLE):
    _s.device(copyable)(index_map)
for _s, _bind in ((TRANSPOSE, _transpose_bind), (SLICE, _slice_bind), (STRIDED_SLICE, _strided_slice_bind),
                 (SPLIT, _split_bind)):
    _s.bind = _bind


# ---- device closed forms -------------------------------------------------------------------

def _concat_types(node: OpNode) -> bool:
    return types_in(COPYABLE, *range(node.num_inputs - 1))(node)


def _requantized(node: OpNode, i: int, x: Tensor) -> Tensor:
    """Input i in the output's scale and zeroPoint: a table lookup unless that is the identity."""
    t = node.out_operand(0).type
    if t not in QUANT8:
        return x
    lo, hi = quant_range(t)
    stored = np.arange(lo, hi + 1).astype(dtype_of(t))
    table = _requantize_input(node, i, stored)
    return x if np.array_equal(table, stored) else lookup(node, i, x, table, t)


@CONCATENATION.device(_concat_types)
def _concatenation_device(node: OpNode, ins: list[Tensor | None]) -> Compute | View:
    """Output element at axis coordinate a reads the input whose run along the axis holds a
    (empty inputs hold none)."""
    axis, shapes = _concat_axis(node)
    out_shape = node.out_shape(0)
    require_nonempty(out_shape)
    begins = np.cumsum([0] + [s[axis] for s in shapes]).tolist()
    live = [k for k, s in enumerate(shapes) if s[axis]]
    parts = [(begins[k], begins[k + 1], _requantized(node, k, ins[k])) for k in live]
    if len(live) == 1 and parts[0][2] is ins[live[0]]:
        return View(live[0])

    def at(c: Coords) -> Expr:
        a = c[axis]
        begin, _, x = parts[-1]
        value = x.load(c.replace(axis, a - begin))
        for begin, end, x in reversed(parts[:-1]):
            value = (a < end).where(x.load(c.replace(axis, a - begin)), value)
        return value

    return Compute(out_shape, parts[0][2].dtype, at)


def _pad_device(node: OpNode, ins: list[Tensor | None]) -> Compute:
    require_nonempty(ins[0].shape)
    return padded(ins[0], _paddings(node), stored_constant(_pad_value(node), node.out_operand(0).type))


PAD.device(copyable)(_pad_device)
PAD_V2.device(copyable)(_pad_device)


@GATHER.device(copyable)
def _gather_device(node: OpNode, ins: list[Tensor | None]) -> Compute:
    """Indices known at compile time, so out-of-range ones stay on the host reference, which
    reports them; the kernel reads them from their tensor."""
    x, indices = ins[0], ins[2]
    axis = _gather_axis(node)
    _gather_indices(node, axis)
    out_shape = node.out_shape(0)
    require_nonempty(x.shape, out_shape)
    r = len(indices.shape)

    def at(c: Coords) -> Expr:
        src = indices.load(Coords(indices.shape, c.axes[axis:axis + r]))
        return x.load(Coords(x.shape, c.axes[:axis] + [src] + c.axes[axis + r:]))

    return Compute(out_shape, x.dtype, at)
