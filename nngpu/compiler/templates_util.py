"""Helpers shared by the templates_<family> modules (registers no template).

Guards every builder applies (parameters known at compile time, float tensors of one type,
nothing empty) and the index arithmetic they render."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..hal.types import OperandType as T
from ..ops.registry import OpContext
from .render import C_TYPES, float_literal

FLOATS = {T.TENSOR_FLOAT32, T.TENSOR_FLOAT16}
QUANT8 = {T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED}


def params_known(ctx: OpContext, positions: Sequence[int]) -> bool:
    """Every listed input is omitted or has a compile-time value (ops would otherwise treat a
    run-time parameter as absent, e.g. TRANSPOSE's perm)."""
    return all(p >= ctx.num_inputs or ctx.is_omitted(p) or ctx.values[p] is not None for p in positions)


def same_float(ctx: OpContext, positions: Sequence[int]) -> bool:
    """The listed inputs and output 0 are all float32 or all float16."""
    t = ctx.out_operand(0).type
    return t in FLOATS and all(ctx.in_operand(p).type == t for p in positions)


def same_copy_type(ctx: OpContext, positions: Sequence[int]) -> bool:
    """Like same_float, and also quant8 tensors that keep the output's scale and zeroPoint (the
    op is then a pure copy of stored values), once the renderer has a C type for them."""
    if same_float(ctx, positions):
        return True
    out = ctx.out_operand(0)
    if out.type not in QUANT8 or out.type not in C_TYPES:
        return False
    return all(ctx.in_operand(p).type == out.type and np.float32(ctx.in_operand(p).scale) == np.float32(out.scale)
               and ctx.in_operand(p).zeroPoint == out.zeroPoint for p in positions)


def nonempty(shapes: dict, operands: Sequence[int]) -> bool:
    return all(int(np.prod(shapes[i], dtype=np.int64)) > 0 for i in operands)


def ctype(ctx: OpContext, position: int) -> str:
    return C_TYPES[ctx.in_operand(position).type]


def strides(shape: Sequence[int]) -> list[int]:
    """Element strides of a C-contiguous tensor."""
    out, acc = [0] * len(shape), 1
    for k in range(len(shape) - 1, -1, -1):
        out[k] = acc
        acc *= int(shape[k])
    return out


def linear(terms: Sequence[tuple[str, int]], base: int = 0) -> str:
    """The C expression base + sum(expr * stride), skipping zero strides."""
    parts = [str(base)] if base else []
    for expr, s in terms:
        if s == 1:
            parts.append(f"({expr})")
        elif s:
            parts.append(f"({expr}) * {s}L")
    return " + ".join(parts) if parts else "0"


def storage_round(value: float, operand_type: int) -> float:
    """A constant as the output type stores it (a float16 pad value is rounded first, so a fused
    epilogue sees what the reference sees; quant8 values are already stored integers)."""
    if operand_type in QUANT8:
        return float(int(value))
    return float(np.array(value, dtype=np.float16 if operand_type == T.TENSOR_FLOAT16 else np.float32))


def literal(value: float) -> str:
    return float_literal(float(np.float32(value)))
