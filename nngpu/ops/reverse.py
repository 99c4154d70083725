"""REVERSE (NNAPI feature level 7, AIDL HAL version 3): a tensor with one axis reversed, values
copied.

As AOSP's Reverse.cpp: the input has rank 1 to 8, the axis is a TENSOR_INT32 of shape [1] in
[0, rank), and a quantized output keeps the input's scale and zero point. On the device it is
the reference's own index map (lib.index_map), with the axis known at compile time."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..hal.types import OperandType as T
from ..hal.types import OperationType as Op
from .lib.index_map import copyable, index_map
from .lib.layout import V, check_shape_rank, int_vector, known_rank, register_injective, same_quant
from .node import OpNode
from .registry import Kernel, OpContext, OpError, sig

_TYPES = (T.TENSOR_FLOAT16, T.TENSOR_FLOAT32, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED, T.TENSOR_INT32)
MAX_RANK = 8


def _axis(ctx: OpContext) -> int:
    shape = ctx.in_shape(0)
    check_shape_rank(shape, 1, MAX_RANK)
    axis = int(int_vector(ctx, 1, 1, "axis")[0])
    if not 0 <= axis < len(shape):
        raise OpError(f"axis {axis} outside [0, {len(shape)})")
    return axis


def _shape(ctx: OpContext) -> list[tuple[int, ...]]:
    _axis(ctx)
    return [ctx.in_shape(0)]


def _reverse(ctx: OpContext) -> list[np.ndarray]:
    return [np.flip(ctx.input(0), _axis(ctx)).copy()]


def _bind(node: OpNode) -> Kernel:
    axis = _axis(node)

    def kernel(ins: Sequence[np.ndarray], outs: list[np.ndarray]) -> list[np.ndarray]:
        np.copyto(outs[0], np.flip(ins[0], axis))
        return outs
    return kernel


def _validate(ctx: OpContext) -> None:
    """The quantization, and the ranks and axis shape the model gives."""
    same_quant(ctx)
    rank = known_rank(ctx, 0)
    out_rank = len(ctx.out_operand(0).dimensions) or None
    if rank is not None and not 1 <= rank <= MAX_RANK:
        raise OpError(f"input rank {rank} outside [1, {MAX_RANK}]")
    if rank is not None and out_rank is not None and rank != out_rank:
        raise OpError(f"output rank {out_rank} differs from the input's {rank}")
    axis_dims = list(ctx.in_operand(1).dimensions)
    if axis_dims and (len(axis_dims) != 1 or axis_dims[0] not in (0, 1)):
        raise OpError(f"axis dimensions {axis_dims}, expected [1]")
    if ctx.values[1] is not None and rank is not None:
        axis = np.asarray(ctx.values[1]).reshape(-1)
        if axis.size != 1 or not 0 <= int(axis[0]) < rank:
            raise OpError(f"axis {axis.tolist()} outside [0, {rank})")


SPEC = register_injective(Op.REVERSE, [sig([t, T.TENSOR_INT32], [t], V.AIDL_V3) for t in _TYPES], _reverse,
                          _validate, _shape)
SPEC.bind = _bind
SPEC.device(copyable)(index_map)
