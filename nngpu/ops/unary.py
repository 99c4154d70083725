"""Unary math: ABS, EXP, LOG, NEG, SQRT, RSQRT, SIN, FLOOR, and CAST.

RSQRT of TENSOR_QUANT8_ASYMM / _SIGNED (NNAPI feature level 7) is the reference's float path:
the input dequantized, 1 / sqrt in float32, the result divided by the output scale, rounded
half away from zero (std::round), offset by the output zero point and saturated, NaN and inf
(inputs at or below the zero point) to the top of the range. On the device and in the numpy
plan it is that reference's table of the 256 input values.

float16 is computed in float32 and rounded on output (the reference's intermediate type).
CAST converts raw stored values (quantization parameters are ignored, as in the reference),
saturating to the target range and truncating floats toward zero (NaN gives 0). Each device
expression keeps the reference's float32 operation (RSQRT is 1 / sqrt, not rsqrt); int32 ABS
and NEG wrap like C; CAST is the same conversion per element.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..hal.types import OperandType as T
from ..hal.types import OperationType as Op
from ..ir import Compute, Expr, clamp, fn
from ..ir.expr import STORAGE_COMPUTE
from ..ir.storage import storage_of
from .lib.broadcast import check_rank, float_compute, same_type_sigs
from .lib.device import FLOATS, QUANT8, floats, reference_table
from .lib.dtypes import dtype_of, quant_range
from .lib.elementwise_device import INT32, input_type_in, per_element, quantized, table_of, unary, wrap_int
from .lib.quant import round_half_away, wrap_int32
from .node import OpNode
from .registry import HalVersion as V
from .registry import Kernel, OpContext, OpSpec, Pattern, register, same_shape, sig

_F32, _F16, _Q8, _I32 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_QUANT8_ASYMM, T.TENSOR_INT32
_FLOATS_1_2 = [(_F16, V.V1_2), (_F32, V.V1_2)]


def _rsqrt(x: np.ndarray) -> np.ndarray:
    return np.float32(1.0) / np.sqrt(x)


def _rsqrt_quantized(ctx: OpContext, x: np.ndarray) -> np.ndarray:
    """AOSP's RSQRT of a quant8 tensor (Elementwise.cpp makeQuantized), operation for operation."""
    i, o = ctx.in_operand(0), ctx.out_operand(0)
    lo, hi = quant_range(o.type)
    real = (x.astype(np.int32) - i.zeroPoint).astype(np.float32) * np.float32(i.scale)
    with np.errstate(divide="ignore", invalid="ignore"):
        res = np.float32(1.0) / np.sqrt(real)
        q = o.zeroPoint + round_half_away(res / np.float32(o.scale))
    q = np.where(q < hi, q, hi)  # std::min(hi, q): NaN gives hi
    return np.where(lo < q, q, lo).astype(dtype_of(o.type))


def _table_bind(node: OpNode) -> Kernel | None:
    """The numpy plan's quantized form: the reference's table, indexed by the stored bytes."""
    t = node.in_operand(0).type
    if t not in QUANT8:
        return None
    table = np.roll(reference_table(node), quant_range(t)[0])  # table[v - lo] at byte v & 0xFF

    def kernel(ins: list[np.ndarray], outs: list[np.ndarray]) -> list[np.ndarray]:
        np.take(table, ins[0].view(np.uint8), out=outs[0])
        return outs
    return kernel


def _unary_reference(fn: Callable[[np.ndarray], np.ndarray],
                     quant: Callable[[OpContext, np.ndarray], np.ndarray] | None = None
                     ) -> Callable[[OpContext], list[np.ndarray]]:
    def reference(ctx: OpContext) -> list[np.ndarray]:
        x = ctx.input(0)
        if quant is not None and ctx.in_operand(0).type in QUANT8:
            return [quant(ctx, x)]
        if x.dtype == np.int32:
            # int32 ABS / NEG wrap like C (-INT32_MIN == INT32_MIN)
            return [wrap_int32(fn(x.astype(np.int64))).astype(np.int32)]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return [fn(float_compute(x)).astype(x.dtype)]

    return reference


def _int_abs(x: Expr) -> Expr:
    x = x.cast("long")
    return wrap_int((x < 0).where(-x, x))


# reference, device float expression, int32 expression (None: float only), operand types
_UNARY: dict[Op, tuple[Callable, Callable[[Expr], Expr], Callable[[Expr], Expr] | None, list]] = {
    Op.ABS: (np.abs, lambda x: fn("fabs", x), _int_abs, _FLOATS_1_2 + [(_I32, V.V1_3)]),
    Op.EXP: (np.exp, lambda x: fn("exp", x), None, _FLOATS_1_2),
    Op.LOG: (np.log, lambda x: fn("log", x), None, _FLOATS_1_2),
    Op.NEG: (np.negative, lambda x: -x, lambda x: wrap_int(-x.cast("long")), _FLOATS_1_2 + [(_I32, V.V1_2)]),
    Op.SQRT: (np.sqrt, lambda x: fn("sqrt", x), None, _FLOATS_1_2),
    Op.RSQRT: (_rsqrt, lambda x: 1.0 / fn("sqrt", x), None,
               _FLOATS_1_2 + [(_Q8, V.AIDL_V3), (T.TENSOR_QUANT8_ASYMM_SIGNED, V.AIDL_V3)]),
    Op.SIN: (np.sin, lambda x: fn("sin", x), None, _FLOATS_1_2),
    Op.FLOOR: (np.floor, lambda x: fn("floor", x), None, [(_F32, V.V1_0), (_F16, V.V1_2)]),
}


_QUANTIZED = {Op.RSQRT: _rsqrt_quantized}  # the quantized forms, each a table on the device

for _op, (_fn, _float_expr, _int_expr, _types) in _UNARY.items():
    _quant = _QUANTIZED.get(_op)
    _spec = register(OpSpec(_op, same_type_sigs(_types, 1), _unary_reference(_fn, _quant),
                            validate=(lambda ctx: check_rank(ctx, (0,))) if _op == Op.FLOOR else None,
                            shape=same_shape(0), pattern=Pattern.ELEMENTWISE,
                            bind=_table_bind if _quant else None))
    _spec.device(floats(0))(unary("float", _float_expr, f"float_{_op.name.lower()}"))
    if _int_expr is not None:
        _spec.device(input_type_in(INT32, 0))(unary("int", _int_expr, f"int32_{_op.name.lower()}"))
    if _quant is not None:
        _spec.device(quantized)(table_of)


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
    with np.errstate(over="ignore"):  # beyond float16's range is inf
        return [x.astype(target)]


def _cast_expr(x: Expr, src: int, dst: int) -> Expr:
    """The reference's conversion of one stored value of type `src` to type `dst`."""
    target = dtype_of(dst)
    if src == dst or target.kind not in "iu":  # a copy, or to a float (the store rounds float16)
        return x
    lo, hi = int(np.iinfo(target).min), int(np.iinfo(target).max)
    if src in FLOATS:
        # NaN is 0; saturate while still a float (no out-of-range conversion), then truncate.
        # float(hi) may round up (2^31 for int32): the integer clamp brings it back.
        v = fn("fmin", fn("fmax", x.ne(x).where(0.0, x), float(lo)), float(hi))
        return clamp(v.cast("long"), lo, hi)
    info = np.iinfo(dtype_of(src))
    if info.min < lo:
        x = (x < lo).where(lo, x)
    if info.max > hi:
        x = (x > hi).where(hi, x)
    return x


_CAST_TYPES = [_F16, _F32, _I32, _Q8]
_CAST_SIGS = [sig([a], [b], V.V1_2) for a in _CAST_TYPES for b in _CAST_TYPES]
_CAST_SIGS += [sig([t], [t], V.V1_3) for t in (T.TENSOR_BOOL8, T.TENSOR_QUANT16_ASYMM, T.TENSOR_QUANT16_SYMM,
                                               T.TENSOR_QUANT8_ASYMM_SIGNED, T.TENSOR_QUANT8_SYMM)]
CAST = register(OpSpec(Op.CAST, _CAST_SIGS, _cast, shape=same_shape(0), pattern=Pattern.ELEMENTWISE))


@CAST.device()
def _cast_device(node: OpNode, ins: list) -> Compute:
    src, dst = node.in_operand(0).type, node.out_operand(0).type
    dtype = STORAGE_COMPUTE[storage_of(dst)]
    return per_element(node, ins, dtype, lambda x: _cast_expr(x, src, dst), (0,))
