"""Binary arithmetic: ADD, SUB, MUL, DIV with broadcasting and a fused activation.

Quantized kernels follow the reference (AOSP CpuExecutor / TFLite) bit-exactly: ADD and SUB
rescale both inputs to a common fixed-point scale with a 20-bit left shift, SUB negates the
second input's multiplier, MUL requantizes the integer product. Also the shared helpers of the
elementwise families (broadcasting, activation checks, float16 handling).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..hal.types import FusedActivationFunc as Act
from ..hal.types import OperandType as T
from ..hal.types import OperationType as Op
from .dtypes import dtype_of
from .quant import (
    QUANT8_TYPES,
    VALID_ACTIVATIONS,
    activation_range_quant,
    apply_activation_float,
    multiply_by_quantized_multiplier,
    quantize_multiplier,
    wrap_int32,
)
from ..ir import elementwise, fn
from ._device import activation, floats
from .node import OpNode
from .registry import HalVersion as V
from .registry import OpContext, OpError, OpSpec, Pattern, broadcast_shapes, register, sig

MAX_RANK = 4


# ---- shared helpers (also used by comparison, unary and activation) -------------------------
def broadcast_shape(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...]:
    """NNAPI broadcasting (trailing alignment; equal or 1; 0 only pairs with 0 or 1)."""
    try:
        return tuple(np.broadcast_shapes(a, b))
    except ValueError:
        raise OpError(f"incompatible dimensions {list(a)} and {list(b)}") from None


def check_rank(ctx: OpContext, indexes, max_rank: int = MAX_RANK) -> None:
    for i in indexes:
        dims = ctx.in_operand(i).dimensions
        if dims and len(dims) > max_rank:
            raise OpError(f"input {i} has rank {len(dims)} > {max_rank}")


def activation_of(ctx: OpContext, i: int, int_tensor: bool = False) -> int:
    act = ctx.scalar(i)
    if act not in VALID_ACTIVATIONS:
        raise OpError(f"invalid fused activation {act}")
    if int_tensor and act != Act.NONE:
        raise OpError("a TENSOR_INT32 operation needs fused activation NONE")
    return int(act)


def float_compute(x: np.ndarray) -> np.ndarray:
    """float16 values are computed in float32 and rounded back on output."""
    return x.astype(np.float32) if x.dtype == np.float16 else x


def same_type_sigs(types: list[tuple[T, V]], n_tensors: int, extra: tuple[T, ...] = (),
                   out: T | None = None) -> list:
    """One signature per tensor type: n_tensors inputs of that type, then `extra` scalars."""
    return [sig([t] * n_tensors + list(extra), [out if out is not None else t], v) for t, v in types]


def quant_params(ctx: OpContext, i: int, out: bool = False) -> tuple[float, int]:
    o = ctx.out_operand(i) if out else ctx.in_operand(i)
    return float(o.scale), int(o.zeroPoint)


# ---- binary arithmetic ---------------------------------------------------------------------
def _validate_binary(ctx: OpContext) -> None:
    check_rank(ctx, (0, 1))
    t = ctx.in_operand(0).type
    if ctx.values[2] is not None:
        activation_of(ctx, 2, t == T.TENSOR_INT32)
    a, b = ctx.in_operand(0).dimensions, ctx.in_operand(1).dimensions
    if a and b and all(a) and all(b):
        broadcast_shape(tuple(a), tuple(b))


def _add_sub_quant(ctx: OpContext, x1: np.ndarray, x2: np.ndarray, act: int, negate: bool) -> np.ndarray:
    """addQuant8 / subQuant8 of the reference."""
    s1, z1 = quant_params(ctx, 0)
    s2, z2 = quant_params(ctx, 1)
    so, zo = quant_params(ctx, 0, out=True)
    t = ctx.out_operand(0).type
    left_shift = 20
    # float scales widened to double, as the reference's arithmetic on Shape::scale
    twice_max = 2.0 * float(max(np.float32(s1), np.float32(s2)))
    m1, sh1 = quantize_multiplier(float(np.float32(s1)) / twice_max)
    m2, sh2 = quantize_multiplier(float(np.float32(s2)) / twice_max)
    mo, sho = quantize_multiplier(twice_max / ((1 << left_shift) * float(np.float32(so))))
    if negate:
        m2 = -m2  # the reference negates the second multiplier to reuse the ADD kernel
    v1 = (x1.astype(np.int64) - z1) * (1 << left_shift)
    v2 = (x2.astype(np.int64) - z2) * (1 << left_shift)
    sc1 = multiply_by_quantized_multiplier(v1, m1, sh1)
    sc2 = multiply_by_quantized_multiplier(v2, m2, sh2)
    raw = multiply_by_quantized_multiplier(sc1 + sc2, mo, sho) + zo
    lo, hi = activation_range_quant(act, so, zo, t)
    return np.clip(raw, lo, hi).astype(dtype_of(t))


def _mul_quant(ctx: OpContext, x1: np.ndarray, x2: np.ndarray, act: int) -> np.ndarray:
    """mulQuant8 of the reference: the scale product is formed in float32, the ratio in double."""
    s1, z1 = quant_params(ctx, 0)
    s2, z2 = quant_params(ctx, 1)
    so, zo = quant_params(ctx, 0, out=True)
    t = ctx.out_operand(0).type
    product = float(np.float32(s1) * np.float32(s2))
    if not product < float(np.float32(so)):
        raise OpError("MUL: output_scale must be greater than input1_scale * input2_scale")
    m, sh = quantize_multiplier(product / float(np.float32(so)))
    prod = (x1.astype(np.int64) - z1) * (x2.astype(np.int64) - z2)
    raw = multiply_by_quantized_multiplier(prod, m, sh) + zo
    lo, hi = activation_range_quant(act, so, zo, t)
    return np.clip(raw, lo, hi).astype(dtype_of(t))


def _int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """int32 division rounding toward negative infinity; x / 0 is undefined in NNAPI and the
    reference returns 0 rather than failing."""
    a, b = np.broadcast_arrays(a.astype(np.int64), b.astype(np.int64))
    safe = np.where(b == 0, 1, b)
    return np.where(b == 0, 0, np.floor_divide(a, safe))


FloatFn = Callable[[np.ndarray, np.ndarray], np.ndarray]
_FLOAT: dict[Op, FloatFn] = {Op.ADD: np.add, Op.SUB: np.subtract, Op.MUL: np.multiply, Op.DIV: np.divide}
_INT: dict[Op, FloatFn] = {Op.ADD: np.add, Op.SUB: np.subtract, Op.MUL: np.multiply, Op.DIV: _int_div}


def _binary_reference(op: Op) -> Callable[[OpContext], list[np.ndarray]]:
    def reference(ctx: OpContext) -> list[np.ndarray]:
        x1, x2 = ctx.input(0), ctx.input(1)
        t = ctx.in_operand(0).type
        act = activation_of(ctx, 2, t == T.TENSOR_INT32)
        broadcast_shape(x1.shape, x2.shape)
        if t in QUANT8_TYPES:
            if op == Op.MUL:
                return [_mul_quant(ctx, x1, x2, act)]
            return [_add_sub_quant(ctx, x1, x2, act, negate=op == Op.SUB)]
        if t == T.TENSOR_INT32:
            return [wrap_int32(_INT[op](x1.astype(np.int64), x2.astype(np.int64))).astype(np.int32)]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            y = _FLOAT[op](float_compute(x1), float_compute(x2))
        return [apply_activation_float(y, act).astype(x1.dtype)]

    return reference


def _validate_mul(ctx: OpContext) -> None:
    _validate_binary(ctx)
    if ctx.in_operand(0).type in QUANT8_TYPES:
        s1, s2 = np.float32(ctx.in_operand(0).scale), np.float32(ctx.in_operand(1).scale)
        if not float(s1 * s2) < float(np.float32(ctx.out_operand(0).scale)):
            raise OpError("MUL: output_scale must be greater than input1_scale * input2_scale")


_F32, _F16, _Q8, _Q8S, _I32 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED, T.TENSOR_INT32
_TYPES: dict[Op, list[tuple[T, V]]] = {
    Op.ADD: [(_F32, V.V1_0), (_Q8, V.V1_0), (_F16, V.V1_2), (_Q8S, V.V1_3), (_I32, V.V1_3)],
    Op.MUL: [(_F32, V.V1_0), (_Q8, V.V1_0), (_F16, V.V1_2), (_Q8S, V.V1_3), (_I32, V.V1_3)],
    Op.SUB: [(_F32, V.V1_1), (_F16, V.V1_2), (_Q8, V.V1_2), (_Q8S, V.V1_3), (_I32, V.V1_3)],
    Op.DIV: [(_F32, V.V1_1), (_F16, V.V1_2), (_I32, V.V1_3)],
}

_C_BINARY = {Op.ADD: lambda a, b: a + b, Op.SUB: lambda a, b: a - b, Op.MUL: lambda a, b: a * b,
             Op.DIV: lambda a, b: a / b}


def _float_binary(op: Op):
    def build(node: OpNode, ins: list):
        act = int(node.scalar(2))
        return elementwise(node.out_shape(0), "float", lambda a, b: activation(_C_BINARY[op](a, b), act), *ins[:2])
    build.__name__ = f"float_{op.name.lower()}"
    return build


for _op, _types in _TYPES.items():
    _spec = register(OpSpec(_op, same_type_sigs(_types, 2, (T.INT32,)), _binary_reference(_op),
                            validate=_validate_mul if _op == Op.MUL else _validate_binary,
                            shape=broadcast_shapes(0, 1), pattern=Pattern.ELEMENTWISE))
    _spec.device(floats(0, 1))(_float_binary(_op))


# ---- POW -----------------------------------------------------------------------------------
def _pow(ctx: OpContext) -> list[np.ndarray]:
    base, exponent = ctx.input(0), ctx.input(1)
    broadcast_shape(base.shape, exponent.shape)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return [np.power(float_compute(base), float_compute(exponent)).astype(base.dtype)]


def _validate_pow(ctx: OpContext) -> None:
    a, b = ctx.in_operand(0).dimensions, ctx.in_operand(1).dimensions
    if a and b and all(a) and all(b):
        broadcast_shape(tuple(a), tuple(b))


POW = register(OpSpec(Op.POW, same_type_sigs([(_F16, V.V1_2), (_F32, V.V1_2)], 2), _pow, validate=_validate_pow,
                      shape=broadcast_shapes(0, 1), pattern=Pattern.ELEMENTWISE))


@POW.device(floats(0, 1))
def _float_pow(node: OpNode, ins: list):
    return elementwise(node.out_shape(0), "float", lambda a, b: fn("pow", a, b), *ins)
