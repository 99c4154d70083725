"""MIRROR_PAD (NNAPI feature level 7, AIDL HAL version 3): a tensor padded with its own mirrored
values, values copied. REFLECT (mode 0) mirrors without the border element ([1, 2, 3] padded
by [0, 2] is [1, 2, 3, 2, 1]), SYMMETRIC (mode 1) with it ([1, 2, 3, 3, 2]).

As AOSP's MirrorPad.cpp: the input has rank 1 or more, the paddings are a [rank, 2] TENSOR_INT32
of values in [0, extent - 1] (REFLECT) or [0, extent] (SYMMETRIC), and a quantized output
keeps the input's scale and zero point. The reference is numpy's pad in the same mode; the
numpy plan and the device read, along each axis, the input index that AOSP's
getInputDimension gives for each output index."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..hal.types import OperandType as T
from ..hal.types import OperationType as Op
from ..ir import Compute, Coords, Expr, Tensor
from .lib.index_map import copyable, require_nonempty
from .lib.layout import V, known_rank, register_injective, same_quant
from .node import OpNode
from .registry import Kernel, OpContext, OpError, sig

Shape = tuple[int, ...]
Pads = list[tuple[int, int]]
REFLECT, SYMMETRIC = 0, 1
_MODES = {REFLECT: "reflect", SYMMETRIC: "symmetric"}
_TYPES = (T.TENSOR_FLOAT16, T.TENSOR_FLOAT32, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED, T.TENSOR_INT32)


def check_pads(shape: Sequence[int], paddings: np.ndarray, mode: int) -> Pads:
    """The (before, after) padding of each axis, checked against the shape and the mode."""
    if not shape:
        raise OpError("MIRROR_PAD needs an input of rank 1 or more")
    if mode not in _MODES:
        raise OpError(f"mode {mode} is neither 0 (REFLECT) nor 1 (SYMMETRIC)")
    p = np.asarray(paddings)
    if p.shape != (len(shape), 2):
        raise OpError(f"paddings shape {list(p.shape)}, expected [{len(shape)}, 2]")
    pads = [(int(a), int(b)) for a, b in p]
    for k, (d, (a, b)) in enumerate(zip(shape, pads)):
        most = d - (mode == REFLECT)
        if not (0 <= a <= most and 0 <= b <= most):
            raise OpError(f"padding {[a, b]} of axis {k} (extent {d}) outside [0, {most}] in {_MODES[mode]} mode")
    return pads


def _params(ctx: OpContext) -> tuple[Pads, int]:
    mode = int(ctx.scalar(2))
    return check_pads(ctx.in_shape(0), ctx.input(1), mode), mode


def _shape(ctx: OpContext) -> list[Shape]:
    pads, _ = _params(ctx)
    return [tuple(d + a + b for d, (a, b) in zip(ctx.in_shape(0), pads))]


def _mirror_pad(ctx: OpContext) -> list[np.ndarray]:
    pads, mode = _params(ctx)
    x = ctx.input(0)
    if x.size == 0:  # numpy cannot mirror an empty axis; nothing to copy either
        return [np.empty(_shape(ctx)[0], dtype=x.dtype)]
    return [np.pad(x, pads, mode=_MODES[mode])]


def source_index(d: int, before: int, after: int, mode: int) -> np.ndarray:
    """For each output index along an axis of extent d, the input index it copies."""
    offset = int(mode == REFLECT)
    c = np.arange(before + d + after, dtype=np.int64)
    return np.where(c < before, before + offset - 1 - c,
                    np.where(c >= before + d, 2 * d + before - 1 - offset - c, c - before))


def _bind(node: OpNode) -> Kernel:
    """The numpy plan's MIRROR_PAD: the input gathered at each axis' source indices."""
    pads, mode = _params(node)
    index = np.ix_(*[source_index(d, a, b, mode) for d, (a, b) in zip(node.in_shape(0), pads)])

    def kernel(ins: Sequence[np.ndarray], outs: list[np.ndarray]) -> list[np.ndarray]:
        if outs[0].size:
            np.copyto(outs[0], ins[0][index])
        return outs
    return kernel


def _validate(ctx: OpContext) -> None:
    """The quantization and the ranks the model gives, and the padding where it is known."""
    same_quant(ctx)
    rank = known_rank(ctx, 0)
    p_dims = list(ctx.in_operand(1).dimensions)
    out_dims = list(ctx.out_operand(0).dimensions)
    if p_dims and (len(p_dims) != 2 or p_dims[1] not in (0, 2)):
        raise OpError(f"paddings dimensions {p_dims}, expected [rank, 2]")
    if rank is not None and ((p_dims and p_dims[0] not in (0, rank)) or (out_dims and len(out_dims) != rank)):
        raise OpError(f"paddings {p_dims} or output {out_dims} do not fit an input of rank {rank}")
    if ctx.values[2] is not None:
        mode = int(ctx.scalar(2))
        if mode not in _MODES:
            raise OpError(f"mode {mode} is neither 0 (REFLECT) nor 1 (SYMMETRIC)")
        dims = ctx.in_operand(0).dimensions
        if ctx.values[1] is not None and dims and 0 not in dims:
            check_pads(dims, ctx.values[1], mode)


SPEC = register_injective(Op.MIRROR_PAD, [sig([t, T.TENSOR_INT32, T.INT32], [t], V.AIDL_V3) for t in _TYPES],
                          _mirror_pad, _validate, _shape)
SPEC.bind = _bind


def _axis_source(c: Expr, d: int, before: int, after: int, mode: int) -> Expr:
    """`source_index` of output coordinate c as an expression."""
    offset = int(mode == REFLECT)
    inside = c - before
    if after:
        inside = (c >= before + d).where(2 * d + before - 1 - offset - c, inside)
    return (c < before).where(before + offset - 1 - c, inside) if before else inside


@SPEC.device(copyable)
def _mirror_pad_device(node: OpNode, ins: list[Tensor | None]) -> Compute:
    pads, mode = _params(node)
    x = ins[0]
    out_shape = _shape(node)[0]
    require_nonempty(x.shape, out_shape)

    def at(c: Coords) -> Expr:
        return x.load(Coords(x.shape, [_axis_source(c[k], d, a, b, mode)
                                       for k, (d, (a, b)) in enumerate(zip(x.shape, pads))]))

    return Compute(out_shape, x.dtype, at)
