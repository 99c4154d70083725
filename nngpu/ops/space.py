"""Space <-> batch / depth rearrangements of 4-D images: BATCH_TO_SPACE_ND, SPACE_TO_BATCH_ND,
DEPTH_TO_SPACE, SPACE_TO_DEPTH. Each is a reshape-transpose-reshape on the NHWC view; NCHW
inputs (the optional layout flag, since 1.2) are transposed to NHWC and back. Shape functions
and references share one parameter parser per operation. On the device BATCH_TO_SPACE_ND,
DEPTH_TO_SPACE and SPACE_TO_DEPTH are the reference's own index map
(lib/index_map.py); SPACE_TO_BATCH_ND reads a zero-padded view of its input."""
from __future__ import annotations

import numpy as np

from ..hal.types import OperandType as T
from ..hal.types import OperationType as Op
from ..ir import Compute, Coords, Expr, Tensor
from ..ir.window import Image
from .lib.index_map import copyable, index_map, padded, require_nonempty, stored_constant
from .lib.layout import (
    CORE4,
    V,
    check_shape_rank,
    from_nhwc,
    int_vector,
    layout_dims,
    nchw_flag,
    nhwc_dims,
    nonzero_quant8_offset_needs_v1_2,
    pad_constant,
    register_injective,
    rules,
    to_nhwc,
    typed,
    zero_value,
)
from .node import OpNode
from .registry import OpContext, OpError, sig

Dims = tuple[int, int, int, int]


def _image(ctx: OpContext, layout_input: int) -> tuple[Dims, bool]:
    """Input 0's (batch, height, width, depth) and whether it is NCHW."""
    shape = ctx.in_shape(0)
    check_shape_rank(shape, 4, 4)
    nchw = nchw_flag(ctx, layout_input)
    return nhwc_dims(shape, nchw), nchw


def _block(ctx: OpContext) -> tuple[int, int]:
    block = int_vector(ctx, 1, 2, "block shape")
    if np.any(block < 1):
        raise OpError(f"block shape {block.tolist()} has an entry below 1")
    return int(block[0]), int(block[1])


def _block_size(ctx: OpContext) -> int:
    b = int(ctx.scalar(1))
    if b < 1:
        raise OpError(f"block size {b} below 1")
    return b


def _batch_to_space_params(ctx: OpContext) -> tuple[Dims, bool, int, int]:
    (n, h, w, c), nchw = _image(ctx, 2)
    bh, bw = _block(ctx)
    if n % (bh * bw):
        raise OpError(f"batch {n} not divisible by block {bh}x{bw}")
    return (n, h, w, c), nchw, bh, bw


def _batch_to_space_shape(ctx: OpContext) -> list[tuple[int, ...]]:
    (n, h, w, c), nchw, bh, bw = _batch_to_space_params(ctx)
    return [layout_dims(n // (bh * bw), h * bh, w * bw, c, nchw)]


def _batch_to_space(ctx: OpContext) -> list[np.ndarray]:
    (n, h, w, c), nchw, bh, bw = _batch_to_space_params(ctx)
    # input batch index = (i * bw + j) * out_batch + b
    y = to_nhwc(ctx.input(0), nchw).reshape(bh, bw, n // (bh * bw), h, w, c).transpose(2, 3, 0, 4, 1, 5)
    return [from_nhwc(y.reshape(n // (bh * bw), h * bh, w * bw, c), nchw)]


def _space_to_batch_params(ctx: OpContext) -> tuple[Dims, bool, int, int, list[tuple[int, int]]]:
    """The input's dims, layout, block and the [(top, bottom), (left, right)] paddings."""
    (n, h, w, c), nchw = _image(ctx, 3)
    bh, bw = _block(ctx)
    pads = np.asarray(ctx.input(2))
    if pads.shape != (2, 2) or np.any(pads < 0):
        raise OpError(f"paddings {pads.tolist()} must be a [2, 2] tensor of non-negative values")
    (top, bottom), (left, right) = [(int(a), int(b)) for a, b in pads]
    if (h + top + bottom) % bh or (w + left + right) % bw:
        raise OpError(f"padded spatial shape {h + top + bottom}x{w + left + right} not divisible by "
                      f"block {bh}x{bw}")
    return (n, h, w, c), nchw, bh, bw, [(top, bottom), (left, right)]


def _space_to_batch_shape(ctx: OpContext) -> list[tuple[int, ...]]:
    (n, h, w, c), nchw, bh, bw, ((top, bottom), (left, right)) = _space_to_batch_params(ctx)
    return [layout_dims(n * bh * bw, (h + top + bottom) // bh, (w + left + right) // bw, c, nchw)]


def _space_to_batch(ctx: OpContext) -> list[np.ndarray]:
    _, nchw, bh, bw, (rows, cols) = _space_to_batch_params(ctx)
    # The pad value is the logical zero: the zeroPoint for quantized tensors.
    x = pad_constant(to_nhwc(ctx.input(0), nchw), [(0, 0), rows, cols, (0, 0)], zero_value(ctx))
    n, h, w, c = x.shape
    y = x.reshape(n, h // bh, bh, w // bw, bw, c).transpose(2, 4, 0, 1, 3, 5)
    return [from_nhwc(y.reshape(n * bh * bw, h // bh, w // bw, c), nchw)]


def _depth_to_space_params(ctx: OpContext) -> tuple[Dims, bool, int]:
    (n, h, w, c), nchw = _image(ctx, 2)
    b = _block_size(ctx)
    if c % (b * b):
        raise OpError(f"depth {c} not divisible by block size {b} squared")
    return (n, h, w, c), nchw, b


def _depth_to_space_shape(ctx: OpContext) -> list[tuple[int, ...]]:
    (n, h, w, c), nchw, b = _depth_to_space_params(ctx)
    return [layout_dims(n, h * b, w * b, c // (b * b), nchw)]


def _depth_to_space(ctx: OpContext) -> list[np.ndarray]:
    (n, h, w, c), nchw, b = _depth_to_space_params(ctx)
    # output[n, h*b + i, w*b + j, k] = input[n, h, w, (i*b + j) * c/b^2 + k]
    y = to_nhwc(ctx.input(0), nchw).reshape(n, h, w, b, b, c // (b * b)).transpose(0, 1, 3, 2, 4, 5)
    return [from_nhwc(y.reshape(n, h * b, w * b, c // (b * b)), nchw)]


def _space_to_depth_params(ctx: OpContext) -> tuple[Dims, bool, int]:
    (n, h, w, c), nchw = _image(ctx, 2)
    b = _block_size(ctx)
    if h % b or w % b:
        raise OpError(f"spatial shape {h}x{w} not divisible by block size {b}")
    return (n, h, w, c), nchw, b


def _space_to_depth_shape(ctx: OpContext) -> list[tuple[int, ...]]:
    (n, h, w, c), nchw, b = _space_to_depth_params(ctx)
    return [layout_dims(n, h // b, w // b, c * b * b, nchw)]


def _space_to_depth(ctx: OpContext) -> list[np.ndarray]:
    (n, h, w, c), nchw, b = _space_to_depth_params(ctx)
    y = to_nhwc(ctx.input(0), nchw).reshape(n, h // b, b, w // b, b, c).transpose(0, 1, 3, 2, 4, 5)
    return [from_nhwc(y.reshape(n, h // b, w // b, c * b * b), nchw)]


def _with_layout(head: list, op_version: V) -> list:
    """Signatures without and with the trailing NCHW flag (the flag exists since 1.2)."""
    out = []
    for t, v in typed(CORE4, op_version):
        out.append(sig([t, *head], [t], v))
        out.append(sig([t, *head, T.BOOL], [t], max(v, V.V1_2)))
    return out


BATCH_TO_SPACE_ND = register_injective(Op.BATCH_TO_SPACE_ND, _with_layout([T.TENSOR_INT32], V.V1_1),
                                       _batch_to_space, rules(min_rank=4), _batch_to_space_shape)
SPACE_TO_BATCH_ND = register_injective(Op.SPACE_TO_BATCH_ND, _with_layout([T.TENSOR_INT32, T.TENSOR_INT32], V.V1_1),
                                       _space_to_batch, rules(min_rank=4, extra=nonzero_quant8_offset_needs_v1_2),
                                       _space_to_batch_shape)
DEPTH_TO_SPACE = register_injective(Op.DEPTH_TO_SPACE, _with_layout([T.INT32], V.V1_0), _depth_to_space,
                                    rules(min_rank=4), _depth_to_space_shape)
SPACE_TO_DEPTH = register_injective(Op.SPACE_TO_DEPTH, _with_layout([T.INT32], V.V1_0), _space_to_depth,
                                    rules(min_rank=4), _space_to_depth_shape)

for _s in (BATCH_TO_SPACE_ND, DEPTH_TO_SPACE, SPACE_TO_DEPTH):
    _s.device(copyable)(index_map)


@SPACE_TO_BATCH_ND.device(copyable)
def _space_to_batch_device(node: OpNode, ins: list[Tensor | None]) -> Compute:
    """Output batch (i * bw + j) * N + b, row r, column q reads the zero-padded input at
    (b, r * bh + i, q * bw + j)."""
    x = ins[0]
    require_nonempty(x.shape)
    (n, _, _, _), nchw, bh, bw, (rows, cols) = _space_to_batch_params(node)
    pads = [(0, 0), (0, 0), rows, cols] if nchw else [(0, 0), rows, cols, (0, 0)]
    src = padded(x, pads, stored_constant(zero_value(node), node.out_operand(0).type))
    image, out = Image.of(src.shape, nchw), Image.of(node.out_shape(0), nchw)

    def at(c: Coords) -> Expr:
        batch, row, col, channel = out.split(c)
        block = batch / n
        return src.load(image.at(batch % n, row * bh + block / bw, col * bw + block % bw, channel))

    return Compute(node.out_shape(0), x.dtype, at)
