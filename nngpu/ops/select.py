"""Selection along an axis: ARGMAX, ARGMIN (first index on ties) and TOPK_V2.

TOPK_V2 orders each last-axis row by value descending, and equal values by index descending,
as the reference (sort of (value, index) pairs, then reversed) and the spec require.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..hal.types import OperandType as T
from ..hal.types import OperationType as Op
from .reduce import const_scalar, resolve_axis
from .registry import HalVersion as V
from .registry import OpContext, OpError, OpSpec, register, sig

_F32, _F16, _Q8, _Q8S, _I32 = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_QUANT8_ASYMM,
                               T.TENSOR_QUANT8_ASYMM_SIGNED, T.TENSOR_INT32)
_TYPES: list[tuple[T, V]] = [(_F16, V.V1_2), (_F32, V.V1_2), (_I32, V.V1_2), (_Q8, V.V1_2), (_Q8S, V.V1_3)]


# ---- ARGMAX / ARGMIN -----------------------------------------------------------------------
def _validate_arg(ctx: OpContext) -> None:
    dims = ctx.in_operand(0).dimensions
    axis = const_scalar(ctx, 1)
    if dims and axis is not None:
        resolve_axis(int(axis), len(dims))


def _arg_reference(fn: Callable) -> Callable[[OpContext], list[np.ndarray]]:
    def reference(ctx: OpContext) -> list[np.ndarray]:
        _validate_arg(ctx)
        x = ctx.input(0)
        if x.ndim == 0:
            raise OpError("input must have rank at least 1")
        axis = resolve_axis(int(ctx.scalar(1)), x.ndim)
        if x.shape[axis] == 0:
            raise OpError("input must be non-empty along the axis")
        out_shape = tuple(n for d, n in enumerate(x.shape) if d != axis) or (1,)
        if x.size == 0:
            return [np.zeros(out_shape, np.int32)]
        return [fn(x, axis=axis).astype(np.int32).reshape(out_shape)]  # numpy keeps the first on ties

    return reference


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


def _topk_reference(ctx: OpContext) -> list[np.ndarray]:
    _validate_topk(ctx)
    x = ctx.input(0)
    if x.ndim == 0:
        raise OpError("input must have rank at least 1")
    k = int(ctx.scalar(1))
    n = x.shape[-1]
    if not 1 <= k <= n:
        raise OpError(f"TOPK_V2: k={k} must be in [1, {n}]")
    keys = x.astype(np.float64)  # exact for every supported type, and negatable
    index = np.broadcast_to(np.arange(n), x.shape)
    order = np.lexsort((-index, -keys), axis=-1)[..., :k]  # primary key last: value, then index
    return [np.take_along_axis(x, order, axis=-1), order.astype(np.int32)]


for _op, _fn in ((Op.ARGMAX, np.argmax), (Op.ARGMIN, np.argmin)):
    register(OpSpec(_op, [sig([t, T.INT32], [_I32], v) for t, v in _TYPES], _arg_reference(_fn),
                    validate=_validate_arg))

register(OpSpec(Op.TOPK_V2, [sig([t, T.INT32], [t, _I32], v) for t, v in _TYPES], _topk_reference,
                validate=_validate_topk))
