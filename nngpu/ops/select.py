"""Selection along an axis: ARGMAX, ARGMIN (first index on ties) and TOPK_V2.

TOPK_V2 orders each last-axis row by value descending, and equal values by index descending,
as the reference (sort of (value, index) pairs, then reversed) and the spec require; NaN
values come last, as the reference's sort puts them.

On the device, ARGMAX / ARGMIN store each slice's maximum (minimum, NaN winning as in numpy),
then find the first index holding it. TOPK_V2 stores the index of each output position: the
element that exactly r others precede (a count over the row per element, for rows of up to
1024 elements), which the values output then gathers.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..hal.types import OperandType as T
from ..hal.types import OperationType as Op
from ..ir import Acc, Compute, Const, Coords, Expr, Reduce, reduce_sum
from .lib import reduce_device as rd
from .lib.axes import const_scalar, resolve_axis
from .node import OpNode
from .registry import HalVersion as V
from .registry import OpContext, OpError, OpSpec, Pattern, register, sig

_F32, _F16, _Q8, _Q8S, _I32 = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_QUANT8_ASYMM,
                               T.TENSOR_QUANT8_ASYMM_SIGNED, T.TENSOR_INT32)
_TYPES: list[tuple[T, V]] = [(_F16, V.V1_2), (_F32, V.V1_2), (_I32, V.V1_2), (_Q8, V.V1_2), (_Q8S, V.V1_3)]


# ---- ARGMAX / ARGMIN -----------------------------------------------------------------------
def _validate_arg(ctx: OpContext) -> None:
    dims = ctx.in_operand(0).dimensions
    axis = const_scalar(ctx, 1)
    if dims and axis is not None:
        resolve_axis(int(axis), len(dims))


def _arg_axis(ctx: OpContext) -> int:
    shape = ctx.in_shape(0)
    if not shape:
        raise OpError("input must have rank at least 1")
    axis = resolve_axis(int(ctx.scalar(1)), len(shape))
    if shape[axis] == 0:
        raise OpError("input must be non-empty along the axis")
    return axis


def _arg_shape(ctx: OpContext) -> list[tuple[int, ...]]:
    axis = _arg_axis(ctx)
    return [tuple(n for d, n in enumerate(ctx.in_shape(0)) if d != axis) or (1,)]


def _arg_reference(fn: Callable) -> Callable[[OpContext], list[np.ndarray]]:
    def reference(ctx: OpContext) -> list[np.ndarray]:
        _validate_arg(ctx)
        x, axis, out_shape = ctx.input(0), _arg_axis(ctx), _arg_shape(ctx)[0]
        if x.size == 0:
            return [np.zeros(out_shape, np.int32)]
        return [fn(x, axis=axis).astype(np.int32).reshape(out_shape)]  # numpy keeps the first on ties

    return reference


def _arg_device(largest: bool):
    def build(node: OpNode, ins: list) -> Compute:
        """A kernel storing each slice's maximum (minimum), then one finding its first index."""
        x, axis, shape, out_shape = ins[0], _arg_axis(node), node.in_shape(0), node.out_shape(0)
        if 0 in shape or shape[axis] > rd.MAX_REDUCED:
            raise ValueError(f"axis {axis} of shape {shape}")

        def start(c: Coords) -> Coords:
            """The slice's first input element: the output's coordinates around the axis."""
            around = list(c.axes) if len(shape) > 1 else []
            return Coords(shape, around[:axis] + [Const(0, "long")] + around[axis:])

        best = node.materialize(Compute(out_shape, x.dtype, lambda c: rd.slice_extreme(x, start(c), axis, largest)),
                                "argmax_best" if largest else "argmin_best")
        return Compute(out_shape, "int", lambda c: rd.first_index(x, start(c), axis, best.load(c)))
    build.__name__ = "argmax" if largest else "argmin"
    return build


# ---- TOPK_V2 -------------------------------------------------------------------------------
def _validate_topk(ctx: OpContext) -> None:
    dims = ctx.in_operand(0).dimensions
    k = const_scalar(ctx, 1)
    if k is not None and (k < 1 or (dims and dims[-1] and k > dims[-1])):
        raise OpError(f"TOPK_V2: k={k} must be in [1, last dimension]")
    t = ctx.in_operand(0).type
    if t in (_Q8, _Q8S):
        i, o = ctx.in_operand(0), ctx.out_operand(0)
        if np.float32(i.scale) != np.float32(o.scale) or i.zeroPoint != o.zeroPoint:
            raise OpError("TOPK_V2: output scale and zeroPoint must equal the input's")


def _topk_shape(ctx: OpContext) -> list[tuple[int, ...]]:
    shape = ctx.in_shape(0)
    if not shape:
        raise OpError("input must have rank at least 1")
    k = int(ctx.scalar(1))
    if not 1 <= k <= shape[-1]:
        raise OpError(f"TOPK_V2: k={k} must be in [1, {shape[-1]}]")
    return [shape[:-1] + (k,)] * 2


def _topk_reference(ctx: OpContext) -> list[np.ndarray]:
    _validate_topk(ctx)
    x = ctx.input(0)
    k, n = _topk_shape(ctx)[0][-1], x.shape[-1]
    keys = x.astype(np.float64)  # exact for every supported type, and negatable
    index = np.broadcast_to(np.arange(n), x.shape)
    order = np.lexsort((-index, -keys), axis=-1)[..., :k]  # primary key last: value, then index
    return [np.take_along_axis(x, order, axis=-1), order.astype(np.int32)]


def _precedes(a: Expr, i: Expr, b: Expr, j: Expr) -> Expr:
    """Value a at index i comes before value b at index j in TOPK_V2's order."""
    order = (a > b) | (a.eq(b) & (i > j))
    if a.dtype == "float":  # NaN last, NaNs among themselves by index
        order = (b.ne(b) & (a.eq(a) | (i > j))) | order
    return order


def _topk_device(node: OpNode, ins: list) -> list[Compute]:
    """A kernel storing, for each output position r, the row's element that r others precede;
    the outputs are that index and the value it gathers."""
    x, shape, out_shape = ins[0], node.in_shape(0), node.out_shape(0)
    last = len(shape) - 1
    if 0 in shape or shape[-1] ** 2 > rd.MAX_REDUCED:
        raise ValueError(f"TOPK_V2 over rows of {shape[-1]}")

    def index(c: Coords) -> Expr:
        outer, at, i = rd.axis_loop(Coords(shape, c.axes), last, name="s")
        inner, other, j = rd.axis_loop(at, last, name="o")
        ahead = reduce_sum([inner], _precedes(x.load(other), j, x.load(at), i).where(Const(1, "int"), 0))
        found = Acc(Const(0, "int"), ahead.eq(c[last]).where(i, -1), lambda a, b: (b >= 0).where(b, a))
        return Reduce([outer], [found])

    order = node.materialize(Compute(out_shape, "int", index), "topk_order")
    values = Compute(out_shape, x.dtype, lambda c: x.load(Coords(shape, c.axes[:last] + [order.load(c)])))
    return [values, Compute(out_shape, "int", order.load)]


for _op, _fn in ((Op.ARGMAX, np.argmax), (Op.ARGMIN, np.argmin)):
    register(OpSpec(_op, [sig([t, T.INT32], [_I32], v) for t, v in _TYPES], _arg_reference(_fn),
                    validate=_validate_arg, shape=_arg_shape,
                    pattern=Pattern.REDUCTION)).device()(_arg_device(_op == Op.ARGMAX))

register(OpSpec(Op.TOPK_V2, [sig([t, T.INT32], [t, _I32], v) for t, v in _TYPES], _topk_reference,
                validate=_validate_topk, shape=_topk_shape, pattern=Pattern.REDUCTION)).device()(_topk_device)
