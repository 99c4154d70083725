"""Space <-> batch / depth rearrangements of 4-D images: BATCH_TO_SPACE_ND, SPACE_TO_BATCH_ND,
DEPTH_TO_SPACE, SPACE_TO_DEPTH. Each is a reshape-transpose-reshape on the NHWC view; NCHW
inputs (the optional layout flag, since 1.2) are transposed to NHWC and back."""
from __future__ import annotations

import numpy as np

from ..hal.types import OperandType as T
from ..hal.types import OperationType as Op
from ._movement_util import (CORE4, V, check_rank, from_nhwc, int_vector, nchw_flag, pad_constant,
                             nonzero_quant8_offset_needs_v1_2, rules, to_nhwc, typed, zero_value)
from .registry import OpContext, OpError, OpSpec, register, sig


def _image(ctx: OpContext, layout_input: int) -> tuple[np.ndarray, bool]:
    x = ctx.input(0)
    check_rank(x, 4, 4)
    nchw = nchw_flag(ctx, layout_input)
    return to_nhwc(x, nchw), nchw


def _block(ctx: OpContext) -> tuple[int, int]:
    block = int_vector(ctx, 1, 2, "block shape")
    if np.any(block < 1):
        raise OpError(f"block shape {block.tolist()} has an entry below 1")
    return int(block[0]), int(block[1])


def _batch_to_space(ctx: OpContext) -> list[np.ndarray]:
    x, nchw = _image(ctx, 2)
    bh, bw = _block(ctx)
    n, h, w, c = x.shape
    if n % (bh * bw):
        raise OpError(f"batch {n} not divisible by block {bh}x{bw}")
    # input batch index = (i * bw + j) * out_batch + b
    y = x.reshape(bh, bw, n // (bh * bw), h, w, c).transpose(2, 3, 0, 4, 1, 5)
    return [from_nhwc(y.reshape(n // (bh * bw), h * bh, w * bw, c), nchw)]


def _space_to_batch(ctx: OpContext) -> list[np.ndarray]:
    x, nchw = _image(ctx, 3)
    bh, bw = _block(ctx)
    pads = np.asarray(ctx.input(2))
    if pads.shape != (2, 2) or np.any(pads < 0):
        raise OpError(f"paddings {pads.tolist()} must be a [2, 2] tensor of non-negative values")
    # The pad value is the logical zero: the zeroPoint for quantized tensors.
    x = pad_constant(x, [(0, 0), tuple(pads[0]), tuple(pads[1]), (0, 0)], zero_value(ctx))
    n, h, w, c = x.shape
    if h % bh or w % bw:
        raise OpError(f"padded spatial shape {h}x{w} not divisible by block {bh}x{bw}")
    y = x.reshape(n, h // bh, bh, w // bw, bw, c).transpose(2, 4, 0, 1, 3, 5)
    return [from_nhwc(y.reshape(n * bh * bw, h // bh, w // bw, c), nchw)]


def _block_size(ctx: OpContext) -> int:
    b = int(ctx.scalar(1))
    if b < 1:
        raise OpError(f"block size {b} below 1")
    return b


def _depth_to_space(ctx: OpContext) -> list[np.ndarray]:
    x, nchw = _image(ctx, 2)
    b = _block_size(ctx)
    n, h, w, c = x.shape
    if c % (b * b):
        raise OpError(f"depth {c} not divisible by block size {b} squared")
    # output[n, h*b + i, w*b + j, k] = input[n, h, w, (i*b + j) * c/b^2 + k]
    y = x.reshape(n, h, w, b, b, c // (b * b)).transpose(0, 1, 3, 2, 4, 5)
    return [from_nhwc(y.reshape(n, h * b, w * b, c // (b * b)), nchw)]


def _space_to_depth(ctx: OpContext) -> list[np.ndarray]:
    x, nchw = _image(ctx, 2)
    b = _block_size(ctx)
    n, h, w, c = x.shape
    if h % b or w % b:
        raise OpError(f"spatial shape {h}x{w} not divisible by block size {b}")
    y = x.reshape(n, h // b, b, w // b, b, c).transpose(0, 1, 3, 2, 4, 5)
    return [from_nhwc(y.reshape(n, h // b, w // b, c * b * b), nchw)]


def _with_layout(head: list, op_version: V) -> list:
    """Signatures without and with the trailing NCHW flag (the flag exists since 1.2)."""
    out = []
    for t, v in typed(CORE4, op_version):
        out.append(sig([t, *head], [t], v))
        out.append(sig([t, *head, T.BOOL], [t], max(v, V.V1_2)))
    return out


register(OpSpec(Op.BATCH_TO_SPACE_ND, _with_layout([T.TENSOR_INT32], V.V1_1), _batch_to_space,
                rules(min_rank=4)))
register(OpSpec(Op.SPACE_TO_BATCH_ND, _with_layout([T.TENSOR_INT32, T.TENSOR_INT32], V.V1_1), _space_to_batch,
                rules(min_rank=4, extra=nonzero_quant8_offset_needs_v1_2)))
register(OpSpec(Op.DEPTH_TO_SPACE, _with_layout([T.INT32], V.V1_0), _depth_to_space,
                rules(min_rank=4)))
register(OpSpec(Op.SPACE_TO_DEPTH, _with_layout([T.INT32], V.V1_0), _space_to_depth,
                rules(min_rank=4)))
