"""Unary math: ABS, EXP, LOG, NEG, SQRT, RSQRT, SIN, FLOOR, and CAST.

float16 is computed in float32 and rounded on output (the reference's intermediate type).
CAST converts raw stored values (quantization parameters are ignored, as in the reference),
saturating to the target range and truncating floats toward zero.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..hal.types import OperandType as T
from ..hal.types import OperationType as Op
from .dtypes import dtype_of
from .elementwise import check_rank, float_compute, same_type_sigs
from .quant import wrap_int32
from .registry import HalVersion as V
from .registry import OpContext, OpSpec, register, sig

_F32, _F16, _Q8, _I32 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_QUANT8_ASYMM, T.TENSOR_INT32
_FLOATS_1_2 = [(_F16, V.V1_2), (_F32, V.V1_2)]


def _rsqrt(x: np.ndarray) -> np.ndarray:
    return np.float32(1.0) / np.sqrt(x)


def _unary_reference(fn: Callable[[np.ndarray], np.ndarray]) -> Callable[[OpContext], list[np.ndarray]]:
    def reference(ctx: OpContext) -> list[np.ndarray]:
        x = ctx.input(0)
        if x.dtype == np.int32:
            # int32 ABS / NEG wrap like C (-INT32_MIN == INT32_MIN)
            return [wrap_int32(fn(x.astype(np.int64))).astype(np.int32)]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return [fn(float_compute(x)).astype(x.dtype)]

    return reference


_UNARY: dict[Op, tuple[Callable, list]] = {
    Op.ABS: (np.abs, _FLOATS_1_2 + [(_I32, V.V1_3)]),
    Op.EXP: (np.exp, _FLOATS_1_2),
    Op.LOG: (np.log, _FLOATS_1_2),
    Op.NEG: (np.negative, _FLOATS_1_2 + [(_I32, V.V1_2)]),
    Op.SQRT: (np.sqrt, _FLOATS_1_2),
    Op.RSQRT: (_rsqrt, _FLOATS_1_2),
    Op.SIN: (np.sin, _FLOATS_1_2),
    Op.FLOOR: (np.floor, [(_F32, V.V1_0), (_F16, V.V1_2)]),
}
for _op, (_fn, _types) in _UNARY.items():
    register(OpSpec(_op, same_type_sigs(_types, 1), _unary_reference(_fn),
                    validate=(lambda ctx: check_rank(ctx, (0,))) if _op == Op.FLOOR else None))


# ---- CAST ----------------------------------------------------------------------------------
def _cast(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.input(0)
    target = dtype_of(ctx.out_operand(0).type)
    if target == x.dtype:
        return [x.copy()]
    if target.kind in "iu":
        info = np.iinfo(target)
        if x.dtype.kind == "f":
            with np.errstate(invalid="ignore"):
                v = np.trunc(np.nan_to_num(x.astype(np.float64), nan=0.0))
            return [np.clip(v, info.min, info.max).astype(target)]
        return [np.clip(x.astype(np.int64), info.min, info.max).astype(target)]
    return [x.astype(target)]


_CAST_TYPES = [_F16, _F32, _I32, _Q8]
_CAST_SIGS = [sig([a], [b], V.V1_2) for a in _CAST_TYPES for b in _CAST_TYPES]
_CAST_SIGS += [sig([t], [t], V.V1_3) for t in (T.TENSOR_BOOL8, T.TENSOR_QUANT16_ASYMM, T.TENSOR_QUANT16_SYMM,
                                               T.TENSOR_QUANT8_ASYMM_SIGNED, T.TENSOR_QUANT8_SYMM)]
register(OpSpec(Op.CAST, _CAST_SIGS, _cast))
