"""Comparisons (EQUAL ... LESS_EQUAL), logical ops, SELECT, MAXIMUM and MINIMUM.

Quantized comparisons compare real values computed in float32 as the reference does
(scale * (q - zeroPoint)); quantized MAXIMUM / MINIMUM / SELECT requantize each input to the
output's scale in double and round half away from zero.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..hal.types import OperandType as T
from ..hal.types import OperationType as Op
from .dtypes import dtype_of, quant_range
from .elementwise import broadcast_shape, float_compute, quant_params, same_type_sigs
from .quant import QUANT8_TYPES, round_half_away
from .registry import HalVersion as V
from .registry import OpContext, OpError, OpSpec, register, sig

_F32, _F16, _Q8, _Q8S, _I32, _B8 = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_QUANT8_ASYMM,
                                    T.TENSOR_QUANT8_ASYMM_SIGNED, T.TENSOR_INT32, T.TENSOR_BOOL8)


def requantize(ctx: OpContext, i: int, x: np.ndarray) -> np.ndarray:
    """The reference's requantize(): input i's values on the output's scale and zero point."""
    s, z = quant_params(ctx, i)
    so, zo = quant_params(ctx, 0, out=True)
    t = ctx.out_operand(0).type
    real = (x.astype(np.int32) - z).astype(np.float32) * np.float32(s)   # int * float: float32
    q = real.astype(np.float64) / float(np.float32(so)) + zo
    lo, hi = quant_range(t)
    return np.clip(round_half_away(np.clip(q, lo, hi)), lo, hi).astype(dtype_of(t))


def _validate_broadcast(ctx: OpContext) -> None:
    a, b = ctx.in_operand(0).dimensions, ctx.in_operand(1).dimensions
    if a and b and all(a) and all(b):
        broadcast_shape(tuple(a), tuple(b))


# ---- comparisons ---------------------------------------------------------------------------
def _compare_reference(fn: Callable) -> Callable[[OpContext], list[np.ndarray]]:
    def reference(ctx: OpContext) -> list[np.ndarray]:
        a, b = ctx.input(0), ctx.input(1)
        broadcast_shape(a.shape, b.shape)
        if ctx.in_operand(0).type in QUANT8_TYPES:
            s1, z1 = quant_params(ctx, 0)
            s2, z2 = quant_params(ctx, 1)
            a = np.float32(s1) * (a.astype(np.int32) - z1).astype(np.float32)
            b = np.float32(s2) * (b.astype(np.int32) - z2).astype(np.float32)
        else:
            a, b = float_compute(a), float_compute(b)
        return [fn(a, b)]

    return reference


_COMPARE_TYPES = [(_B8, V.V1_2), (_F16, V.V1_2), (_F32, V.V1_2), (_I32, V.V1_2), (_Q8, V.V1_2), (_Q8S, V.V1_3)]
_COMPARISONS = {Op.EQUAL: np.equal, Op.NOT_EQUAL: np.not_equal, Op.GREATER: np.greater,
                Op.GREATER_EQUAL: np.greater_equal, Op.LESS: np.less, Op.LESS_EQUAL: np.less_equal}
for _op, _fn in _COMPARISONS.items():
    register(OpSpec(_op, same_type_sigs(_COMPARE_TYPES, 2, out=_B8), _compare_reference(_fn),
                    validate=_validate_broadcast))


# ---- logical -------------------------------------------------------------------------------
def _logical_reference(fn: Callable) -> Callable[[OpContext], list[np.ndarray]]:
    def reference(ctx: OpContext) -> list[np.ndarray]:
        a, b = ctx.input(0), ctx.input(1)
        broadcast_shape(a.shape, b.shape)
        return [fn(a.astype(bool), b.astype(bool))]

    return reference


for _op, _fn in {Op.LOGICAL_AND: np.logical_and, Op.LOGICAL_OR: np.logical_or}.items():
    register(OpSpec(_op, [sig([_B8, _B8], [_B8], V.V1_2)], _logical_reference(_fn),
                    validate=_validate_broadcast))

register(OpSpec(Op.LOGICAL_NOT, [sig([_B8], [_B8], V.V1_2)],
                lambda ctx: [np.logical_not(ctx.input(0).astype(bool))]))


# ---- MAXIMUM / MINIMUM ---------------------------------------------------------------------
def _minmax_reference(fn: Callable) -> Callable[[OpContext], list[np.ndarray]]:
    def reference(ctx: OpContext) -> list[np.ndarray]:
        a, b = ctx.input(0), ctx.input(1)
        broadcast_shape(a.shape, b.shape)
        if ctx.in_operand(0).type in QUANT8_TYPES:
            a, b = requantize(ctx, 0, a), requantize(ctx, 1, b)
        return [fn(a, b)]

    return reference


_MINMAX_TYPES = [(_F16, V.V1_2), (_F32, V.V1_2), (_I32, V.V1_2), (_Q8, V.V1_2), (_Q8S, V.V1_3)]
for _op, _fn in {Op.MAXIMUM: np.maximum, Op.MINIMUM: np.minimum}.items():
    register(OpSpec(_op, same_type_sigs(_MINMAX_TYPES, 2), _minmax_reference(_fn),
                    validate=_validate_broadcast))


# ---- SELECT --------------------------------------------------------------------------------
def _validate_select(ctx: OpContext) -> None:
    dims = [ctx.in_operand(i).dimensions for i in range(3)]
    known = [d for d in dims if d]
    if any(len(d) != len(known[0]) or any(x and y and x != y for x, y in zip(d, known[0])) for d in known):
        raise OpError(f"SELECT: inputs must have the same shape, got {dims}")


def _select(ctx: OpContext) -> list[np.ndarray]:
    cond, a, b = ctx.input(0), ctx.input(1), ctx.input(2)
    if not cond.shape == a.shape == b.shape:
        raise OpError(f"SELECT: inputs must have the same shape, got {cond.shape}, {a.shape}, {b.shape}")
    if ctx.in_operand(1).type in QUANT8_TYPES:
        a, b = requantize(ctx, 1, a), requantize(ctx, 2, b)
    return [np.where(cond.astype(bool), a, b)]


register(OpSpec(Op.SELECT, [sig([_B8, t, t], [t], v) for t, v in _MINMAX_TYPES], _select,
                validate=_validate_select))
