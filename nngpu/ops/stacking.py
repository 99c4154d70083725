"""PACK (NNAPI feature level 6, AIDL HAL version 2): N >= 1 tensors of one type and shape stacked
along a new output axis, values copied: output[t0, ..., t_axis, ...] = input_{t_axis}[t0, ...].

As AOSP's Pack.cpp: input 0 is the INT32 axis in [0, R + 1) for inputs of rank R >= 1, every
input has the first one's shape, and quantized inputs share the output's scale and zero point.
On the device each output element selects its input by its axis coordinate; one input is the
output's bytes under another shape."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..hal.types import OperandType as T
from ..hal.types import OperationType as Op
from ..ir import Compute, Coords, Expr, Tensor
from ..ir.tensor import View
from .lib.device import COPYABLE, types_in
from .lib.index_map import require_nonempty
from .lib.layout import V, register_injective, same_quant
from .node import OpNode
from .registry import Kernel, OpContext, OpError, Signature

Shape = tuple[int, ...]
_TYPES = (T.TENSOR_FLOAT16, T.TENSOR_FLOAT32, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED, T.TENSOR_INT32)


class Packed(Signature):
    """The INT32 axis, then one or more tensors of the output's type."""

    def matches(self, in_types: Sequence[int], out_types: Sequence[int]) -> bool:
        t = self.outputs[0]
        return len(in_types) >= 2 and in_types[0] == T.INT32 and all(x == t for x in in_types[1:]) and \
            tuple(out_types) == self.outputs


def _pack_axis(ctx: OpContext) -> tuple[int, Shape]:
    """The axis and the shape every input has, checked."""
    first = ctx.in_shape(1)
    if not first:
        raise OpError("PACK inputs need rank 1 or more")
    for i in range(2, ctx.num_inputs):
        if ctx.in_shape(i) != first:
            raise OpError(f"input {i} shape {list(ctx.in_shape(i))} differs from input 1's {list(first)}")
    axis = int(ctx.scalar(0))
    if not 0 <= axis <= len(first):
        raise OpError(f"axis {axis} outside [0, {len(first) + 1})")
    return axis, first


def _pack_shape(ctx: OpContext) -> list[Shape]:
    axis, shape = _pack_axis(ctx)
    return [shape[:axis] + (ctx.num_inputs - 1,) + shape[axis:]]


def _pack(ctx: OpContext) -> list[np.ndarray]:
    axis, _ = _pack_axis(ctx)
    return [np.stack([ctx.input(i) for i in range(1, ctx.num_inputs)], axis=axis)]


def _pack_bind(node: OpNode) -> Kernel:
    axis, _ = _pack_axis(node)

    def kernel(ins: Sequence[np.ndarray], outs: list[np.ndarray]) -> list[np.ndarray]:
        np.stack(ins[1:], axis=axis, out=outs[0])
        return outs
    return kernel


def _validate(ctx: OpContext) -> None:
    """Each quantized input has the output's scale and zero point; the ranks the model gives
    agree (inputs R, output R + 1, R >= 1) and a constant axis lies in [0, R + 1)."""
    out_dims = list(ctx.out_operand(0).dimensions)
    ranks = {len(ctx.in_operand(i).dimensions) for i in range(1, ctx.num_inputs) if ctx.in_operand(i).dimensions}
    if out_dims:
        ranks.add(len(out_dims) - 1)
    if len(ranks) > 1 or 0 in ranks:
        raise OpError(f"input ranks and output rank - 1 must be one rank from 1, got {sorted(ranks)}")
    for i in range(1, ctx.num_inputs):
        same_quant(ctx, i, 0)
    if ranks and ctx.values[0] is not None:
        rank, axis = ranks.pop(), int(ctx.scalar(0))
        if not 0 <= axis <= rank:
            raise OpError(f"axis {axis} outside [0, {rank + 1})")


SPEC = register_injective(Op.PACK, [Packed((T.INT32, t), (t,), V.AIDL_V2) for t in _TYPES], _pack, _validate,
                          _pack_shape)
SPEC.bind = _pack_bind


def _pack_types(node: OpNode) -> bool:
    return types_in(COPYABLE, *range(1, node.num_inputs))(node)


@SPEC.device(_pack_types)
def _pack_device(node: OpNode, ins: list[Tensor | None]) -> Compute | View:
    """Output element at axis coordinate k reads input k + 1 at the other coordinates."""
    axis, shape = _pack_axis(node)
    if node.num_inputs == 2:
        return View(1)
    out_shape = node.out_shape(0)
    require_nonempty(out_shape)
    xs = ins[1:]

    def at(c: Coords) -> Expr:
        src = Coords(shape, c.axes[:axis] + c.axes[axis + 1:])
        value = xs[-1].load(src)
        for k in range(len(xs) - 2, -1, -1):
            value = (c[axis] < k + 1).where(xs[k].load(src), value)
        return value

    return Compute(out_shape, xs[0].dtype, at)
