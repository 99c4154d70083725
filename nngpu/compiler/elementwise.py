"""Elementwise operations as C expressions, for fusion into one generated kernel.

`expression(op, ctx)` returns (tensor input positions, a function from those inputs' C
expressions to the output's C expression), or None when the op (with these operand types and
constant scalars) has no device expression and must run on the host."""
from __future__ import annotations

from typing import Callable

from ..hal.types import FusedActivationFunc as Act
from ..hal.types import OperandType as T
from ..hal.types import OperationType as Op
from ..ops.registry import OpContext
from .render import float_literal

FLOATS = {T.TENSOR_FLOAT32, T.TENSOR_FLOAT16}
Expr = Callable[[list[str]], str]


def _act(code: int, x: str) -> str | None:
    if code == Act.NONE:
        return x
    if code == Act.RELU:
        return f"fmax({x}, 0.0f)"
    if code == Act.RELU1:
        return f"fmin(fmax({x}, -1.0f), 1.0f)"
    if code == Act.RELU6:
        return f"fmin(fmax({x}, 0.0f), 6.0f)"
    return None


_BINARY = {Op.ADD: "({0} + {1})", Op.SUB: "({0} - {1})", Op.MUL: "({0} * {1})", Op.DIV: "({0} / {1})"}
_UNARY = {
    Op.ABS: "fabs({0})", Op.EXP: "exp({0})", Op.LOG: "log({0})", Op.NEG: "(-{0})", Op.SQRT: "sqrt({0})",
    Op.RSQRT: "(1.0f / sqrt({0}))", Op.SIN: "sin({0})", Op.FLOOR: "floor({0})",
    Op.RELU: "fmax({0}, 0.0f)", Op.RELU1: "fmin(fmax({0}, -1.0f), 1.0f)", Op.RELU6: "fmin(fmax({0}, 0.0f), 6.0f)",
    Op.LOGISTIC: "(1.0f / (1.0f + exp(-{0})))", Op.TANH: "tanh({0})",
    Op.HARD_SWISH: "({0} * fmin(fmax({0} + 3.0f, 0.0f), 6.0f) / 6.0f)",
}
_TWO = {
    Op.MAXIMUM: "fmax({0}, {1})", Op.MINIMUM: "fmin({0}, {1})", Op.POW: "pow({0}, {1})",
    Op.PRELU: "({0} < 0.0f ? {0} * {1} : {0})",
}
_COMPARE = {Op.EQUAL: "==", Op.NOT_EQUAL: "!=", Op.GREATER: ">", Op.GREATER_EQUAL: ">=", Op.LESS: "<",
            Op.LESS_EQUAL: "<="}
_LOGICAL = {Op.LOGICAL_AND: "({0} && {1})", Op.LOGICAL_OR: "({0} || {1})"}


def _const_scalar(ctx: OpContext, i: int):
    """A constant scalar input's value, or None when it is not a compile-time constant."""
    if i >= ctx.num_inputs or not ctx.is_constant(i) or ctx.values[i] is None:
        return None
    return ctx.values[i].reshape(-1)[0].item()


def expression(ctx: OpContext) -> tuple[list[int], Expr] | None:
    op = ctx.operation.type
    types = [ctx.in_operand(i).type for i in range(ctx.num_inputs)]
    out_type = ctx.out_operand(0).type
    if ctx.num_outputs != 1:
        return None
    if op in _BINARY and types[:2] and set(types[:2]) <= FLOATS and out_type in FLOATS:
        act = _const_scalar(ctx, 2)
        if act is None or _act(act, "x") is None:
            return None
        template = _BINARY[op]
        return [0, 1], lambda a: _act(act, template.format(*a))
    if op in _UNARY and types[0] in FLOATS and out_type in FLOATS:
        return [0], lambda a: _UNARY[op].format(*a)
    if op in _TWO and set(types[:2]) <= FLOATS and out_type in FLOATS:
        return [0, 1], lambda a: _TWO[op].format(*a)
    if op == Op.ELU and types[0] in FLOATS and out_type in FLOATS:
        alpha = _const_scalar(ctx, 1)
        if alpha is None:
            return None
        lit = float_literal(float(alpha))
        return [0], lambda a: f"({a[0]} < 0.0f ? {lit} * (exp({a[0]}) - 1.0f) : {a[0]})"
    if op in _COMPARE and set(types[:2]) <= FLOATS | {T.TENSOR_BOOL8} and types[0] == types[1] \
            and out_type == T.TENSOR_BOOL8:
        sym = _COMPARE[op]
        return [0, 1], lambda a: f"({a[0]} {sym} {a[1]})"
    if op in _LOGICAL and types[:2] == [T.TENSOR_BOOL8] * 2:
        return [0, 1], lambda a: _LOGICAL[op].format(*a)
    if op == Op.LOGICAL_NOT and types[0] == T.TENSOR_BOOL8:
        return [0], lambda a: f"(!{a[0]})"
    if op == Op.SELECT and types[0] == T.TENSOR_BOOL8 and types[1] in FLOATS and types[1] == types[2]:
        return [0, 1, 2], lambda a: f"({a[0]} ? {a[1]} : {a[2]})"
    return None
