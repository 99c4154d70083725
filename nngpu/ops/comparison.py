"""Comparisons (EQUAL ... LESS_EQUAL), logical ops, SELECT, MAXIMUM and MINIMUM.

Quantized comparisons compare real values computed in float32 as the reference does
(scale * (q - zeroPoint)); quantized MAXIMUM / MINIMUM / SELECT requantize each input to the
output's scale in double and round half away from zero. On the device the real value is the
same single float32 multiply of exact operands (rounded alike everywhere, nothing to contract),
and the requantization is a table of the reference's over the 256 stored values.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..hal.types import OperandType as T
from ..hal.types import OperationType as Op
from ..ir import Compute, Expr, Tensor, const, fn
from .lib.broadcast import broadcast_two, float_compute, quant_params, same_type_sigs, validate_broadcast
from .lib.device import FLOATS, QUANT8, lookup
from .lib.dtypes import dtype_of, quant_range
from .lib.elementwise_device import INT32, input_type_in, per_element
from .lib.quant import QUANT8_TYPES, round_half_away
from .node import OpNode
from .registry import HalVersion as V
from .registry import OpContext, OpError, OpSpec, Pattern, register, same_shape, sig

_F32, _F16, _Q8, _Q8S, _I32, _B8 = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_QUANT8_ASYMM,
                                    T.TENSOR_QUANT8_ASYMM_SIGNED, T.TENSOR_INT32, T.TENSOR_BOOL8)
_BOOL = frozenset({_B8})


def requantize(ctx: OpContext, i: int, x: np.ndarray) -> np.ndarray:
    """The reference's requantize(): input i's values on the output's scale and zero point."""
    s, z = quant_params(ctx, i)
    so, zo = quant_params(ctx, 0, out=True)
    t = ctx.out_operand(0).type
    real = (x.astype(np.int32) - z).astype(np.float32) * np.float32(s)   # int * float: float32
    q = real.astype(np.float64) / float(np.float32(so)) + zo
    lo, hi = quant_range(t)
    return np.clip(round_half_away(np.clip(q, lo, hi)), lo, hi).astype(dtype_of(t))


def _requantized(node: OpNode, ins: list[Tensor | None], i: int) -> Tensor:
    """Input i as the reference combines it: a quantized input through its requantization
    table (unless that is the identity), any other as it is."""
    t = node.in_operand(i).type
    if t not in QUANT8:
        return ins[i]
    lo, hi = quant_range(t)
    stored = np.arange(lo, hi + 1, dtype=np.int64).astype(dtype_of(t))
    table = requantize(node, i, stored)
    return ins[i] if np.array_equal(table, stored) else lookup(node, i, ins[i], table, node.out_operand(0).type)


# ---- comparisons ---------------------------------------------------------------------------
def _compare_reference(fn: Callable) -> Callable[[OpContext], list[np.ndarray]]:
    def reference(ctx: OpContext) -> list[np.ndarray]:
        a, b = ctx.input(0), ctx.input(1)
        broadcast_two(ctx)
        if ctx.in_operand(0).type in QUANT8_TYPES:
            s1, z1 = quant_params(ctx, 0)
            s2, z2 = quant_params(ctx, 1)
            a = np.float32(s1) * (a.astype(np.int32) - z1).astype(np.float32)
            b = np.float32(s2) * (b.astype(np.int32) - z2).astype(np.float32)
        else:
            a, b = float_compute(a), float_compute(b)
        return [fn(a, b)]

    return reference


def _real(node: OpNode, i: int) -> Callable[[Expr], Expr]:
    """A stored value of quantized input i as the reference's float32 real value."""
    s, z = quant_params(node, i)
    return lambda q: const(float(np.float32(s)), "float") * (q - z).cast("float")


_C_COMPARE: dict[Op, Callable[[Expr, Expr], Expr]] = {
    Op.EQUAL: lambda a, b: a.eq(b), Op.NOT_EQUAL: lambda a, b: a.ne(b), Op.GREATER: lambda a, b: a > b,
    Op.GREATER_EQUAL: lambda a, b: a >= b, Op.LESS: lambda a, b: a < b, Op.LESS_EQUAL: lambda a, b: a <= b}


def _compare_device(op: Op):
    def build(node: OpNode, ins: list) -> Compute:
        return per_element(node, ins, "bool", _C_COMPARE[op])
    build.__name__ = f"compare_{op.name.lower()}"
    return build


def _quant_compare_device(op: Op):
    def build(node: OpNode, ins: list) -> Compute:
        ra, rb = _real(node, 0), _real(node, 1)
        return per_element(node, ins, "bool", lambda a, b: _C_COMPARE[op](ra(a), rb(b)))
    build.__name__ = f"quant_compare_{op.name.lower()}"
    return build


_COMPARE_TYPES = [(_B8, V.V1_2), (_F16, V.V1_2), (_F32, V.V1_2), (_I32, V.V1_2), (_Q8, V.V1_2), (_Q8S, V.V1_3)]
_COMPARISONS = {Op.EQUAL: np.equal, Op.NOT_EQUAL: np.not_equal, Op.GREATER: np.greater,
                Op.GREATER_EQUAL: np.greater_equal, Op.LESS: np.less, Op.LESS_EQUAL: np.less_equal}
for _op, _fn in _COMPARISONS.items():
    _spec = register(OpSpec(_op, same_type_sigs(_COMPARE_TYPES, 2, out=_B8), _compare_reference(_fn),
                            validate=validate_broadcast, shape=broadcast_two, pattern=Pattern.ELEMENTWISE))
    _spec.device(input_type_in(FLOATS | INT32 | _BOOL, 0, 1))(_compare_device(_op))
    _spec.device(input_type_in(QUANT8, 0, 1))(_quant_compare_device(_op))


# ---- logical -------------------------------------------------------------------------------
def _logical_reference(fn: Callable) -> Callable[[OpContext], list[np.ndarray]]:
    def reference(ctx: OpContext) -> list[np.ndarray]:
        a, b = ctx.input(0), ctx.input(1)
        broadcast_two(ctx)
        return [fn(a.astype(bool), b.astype(bool))]

    return reference


_C_LOGICAL: dict[Op, Callable[[Expr, Expr], Expr]] = {Op.LOGICAL_AND: lambda a, b: a & b,
                                                      Op.LOGICAL_OR: lambda a, b: a | b}
for _op, _fn in {Op.LOGICAL_AND: np.logical_and, Op.LOGICAL_OR: np.logical_or}.items():
    _spec = register(OpSpec(_op, [sig([_B8, _B8], [_B8], V.V1_2)], _logical_reference(_fn),
                            validate=validate_broadcast, shape=broadcast_two, pattern=Pattern.ELEMENTWISE))
    _spec.device()(lambda node, ins, _op=_op: per_element(node, ins, "bool", _C_LOGICAL[_op]))

LOGICAL_NOT = register(OpSpec(Op.LOGICAL_NOT, [sig([_B8], [_B8], V.V1_2)],
                              lambda ctx: [np.logical_not(ctx.input(0).astype(bool))], shape=same_shape(0),
                              pattern=Pattern.ELEMENTWISE))
LOGICAL_NOT.device()(lambda node, ins: per_element(node, ins, "bool", lambda x: ~x, (0,)))


# ---- MAXIMUM / MINIMUM ---------------------------------------------------------------------
def _minmax_reference(fn: Callable) -> Callable[[OpContext], list[np.ndarray]]:
    def reference(ctx: OpContext) -> list[np.ndarray]:
        a, b = ctx.input(0), ctx.input(1)
        broadcast_two(ctx)
        if ctx.in_operand(0).type in QUANT8_TYPES:
            a, b = requantize(ctx, 0, a), requantize(ctx, 1, b)
        return [fn(a, b)]

    return reference


def _float_minmax(maximum: bool) -> Callable[[Expr, Expr], Expr]:
    """np.maximum / np.minimum: fmax / fmin, but NaN when either is (x + y is then NaN)."""
    return lambda x, y: (x.ne(x) | y.ne(y)).where(x + y, fn("fmax" if maximum else "fmin", x, y))


def _minmax_device(maximum: bool):
    """On floats as numpy; on integers (int32, requantized quant8) the larger / smaller."""
    def build(node: OpNode, ins: list) -> Compute:
        a, b = _requantized(node, ins, 0), _requantized(node, ins, 1)
        if node.out_operand(0).type in FLOATS:
            return per_element(node, [a, b], "float", _float_minmax(maximum))
        return per_element(node, [a, b], "int", lambda x, y: ((x > y) if maximum else (x < y)).where(x, y))
    build.__name__ = "maximum" if maximum else "minimum"
    return build


_MINMAX_TYPES = [(_F16, V.V1_2), (_F32, V.V1_2), (_I32, V.V1_2), (_Q8, V.V1_2), (_Q8S, V.V1_3)]
for _op, _fn in {Op.MAXIMUM: np.maximum, Op.MINIMUM: np.minimum}.items():
    register(OpSpec(_op, same_type_sigs(_MINMAX_TYPES, 2), _minmax_reference(_fn), validate=validate_broadcast,
                    shape=broadcast_two, pattern=Pattern.ELEMENTWISE)).device()(_minmax_device(_op == Op.MAXIMUM))


# ---- SELECT --------------------------------------------------------------------------------
def _validate_select(ctx: OpContext) -> None:
    dims = [ctx.in_operand(i).dimensions for i in range(3)]
    known = [d for d in dims if d]
    if any(len(d) != len(known[0]) or any(x and y and x != y for x, y in zip(d, known[0])) for d in known):
        raise OpError(f"SELECT: inputs must have the same shape, got {dims}")


def _select_shape(node: OpContext) -> list[tuple[int, ...]]:
    """SELECT does not broadcast: the three inputs have one shape, the output's."""
    shapes = [node.in_shape(i) for i in range(3)]
    if not shapes[0] == shapes[1] == shapes[2]:
        raise OpError(f"SELECT: inputs must have the same shape, got {', '.join(map(str, shapes))}")
    return [shapes[0]]


def _select(ctx: OpContext) -> list[np.ndarray]:
    cond, a, b = ctx.input(0), ctx.input(1), ctx.input(2)
    _select_shape(ctx)
    if ctx.in_operand(1).type in QUANT8_TYPES:
        a, b = requantize(ctx, 1, a), requantize(ctx, 2, b)
    return [np.where(cond.astype(bool), a, b)]


SELECT = register(OpSpec(Op.SELECT, [sig([_B8, t, t], [t], v) for t, v in _MINMAX_TYPES], _select,
                         validate=_validate_select, shape=_select_shape, pattern=Pattern.ELEMENTWISE))


@SELECT.device()
def _select_device(node: OpNode, ins: list) -> Compute:
    a, b = _requantized(node, ins, 1), _requantized(node, ins, 2)
    dtype = "float" if node.out_operand(0).type in FLOATS else "int"
    return per_element(node, [ins[0], a, b], dtype, lambda c, x, y: c.where(x, y), (0, 1, 2))
