"""Device code the elementwise families share (registers nothing): applicability predicates,
per-element builders, int32 wrap-around and the quantized fixed-point requantization.

Every builder here is an expression of the reference's own arithmetic: int32 results are the
64-bit value wrapped like `wrap_int32`, quantized rescaling is MultiplyByQuantizedMultiplier
(`nngpu.ir.fixedpoint`), and tables are the reference applied to every 8-bit value."""
from __future__ import annotations

from typing import Callable

from ...hal.types import OperandType as T
from ...ir import Compute, Expr, Tensor, clamp, elementwise
from ...ir.fixedpoint import mbqm, wrap32
from ..node import OpNode
from .device import QUANT8, lookup, reference_table

INT32 = frozenset({T.TENSOR_INT32})


def input_type_in(allowed: frozenset, *positions: int) -> Callable[[OpNode], bool]:
    """Applies when the listed inputs have one type of `allowed` (whatever the output's type)."""
    def applies(node: OpNode) -> bool:
        t = node.in_operand(positions[0]).type
        return t in allowed and all(node.in_operand(p).type == t for p in positions)
    return applies


def per_element(node: OpNode, ins: list[Tensor | None], dtype: str, fn: Callable[..., Expr],
                positions: tuple[int, ...] = (0, 1)) -> Compute:
    """Output 0 as fn(inputs at `positions`) per element, the inputs broadcast to its shape."""
    return elementwise(node.out_shape(0), dtype, fn, *[ins[p] for p in positions])


def unary(dtype: str, expr: Callable[[Expr], Expr], name: str) -> Callable[[OpNode, list], Compute]:
    """A device implementation computing output 0 as expr(input 0) per element."""
    def build(node: OpNode, ins: list[Tensor | None]) -> Compute:
        return per_element(node, ins, dtype, expr, (0,))
    build.__name__ = name
    return build


def wrap_int(x: Expr) -> Expr:
    """A 64-bit integer value wrapped to int32 as the reference's `wrap_int32`."""
    return wrap32(x.cast("long"))


def rescale(x: Expr, multiplier: int, shift: int) -> Expr:
    """MultiplyByQuantizedMultiplier(x, multiplier, shift) with the parameters baked in.
    ValueError (the host takes it) for shifts whose C form would overflow 64 bits."""
    if shift > 31 or shift < -62:
        raise ValueError(f"shift {shift} out of the device helper's range")
    return mbqm(x, multiplier, shift)


def clamped(x: Expr, lo: int, hi: int) -> Expr:
    """An integer result saturated to [lo, hi] and stored as int."""
    return clamp(x, lo, hi).cast("int")


def table_of(node: OpNode, ins: list[Tensor | None]) -> Compute:
    """An operation of one 8-bit input mapping elements on their own, as its reference's table."""
    return lookup(node, 0, ins[0], reference_table(node), node.out_operand(0).type)


quantized = input_type_in(QUANT8, 0)
