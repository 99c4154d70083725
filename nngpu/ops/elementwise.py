"""Binary arithmetic: ADD, SUB, MUL, DIV, POW with broadcasting (and, but for POW, a fused
activation). The reference helpers the elementwise families share are in lib/broadcast.py.

Quantized kernels follow the reference (AOSP CpuExecutor / TFLite) bit-exactly: ADD and SUB
rescale both inputs to a common fixed-point scale with a 20-bit left shift, SUB negates the
second input's multiplier, MUL requantizes the integer product. TENSOR_INT32 results wrap like
C int32; int32 DIV floors, and x / 0 is 0. Device implementations compute the same arithmetic
per element: float in float32 (float16 rounded on store), int32 in 64 bits then wrapped, quant8
through MultiplyByQuantizedMultiplier with the reference's own multipliers.
"""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from ..hal.types import FusedActivationFunc as Act
from ..hal.types import OperandType as T
from ..hal.types import OperationType as Op
from ..ir import Compute, Expr, fn
from .lib.broadcast import (
    activation_of,
    broadcast_two,
    check_rank,
    f32,
    float_compute,
    np_clip,
    quant_params,
    same_type_sigs,
    validate_broadcast,
)
from .lib.byte_tables import PairTable
from .lib.device import activation, floats
from .lib.dtypes import dtype_of
from .lib.elementwise_device import INT32, clamped, input_type_in, per_element, quantized, rescale, wrap_int
from .lib.quant import (
    QUANT8_TYPES,
    activation_range_float,
    activation_range_quant,
    apply_activation_float,
    multiply_by_quantized_multiplier,
    quantize_multiplier,
    wrap_int32,
)
from .node import OpNode
from .registry import Alias, Kernel, OpContext, OpError, OpSpec, Pattern, register
from .registry import HalVersion as V

ADD_LEFT_SHIFT = 20  # the reference's fixed-point headroom of quantized ADD / SUB


# ---- quantized parameters (the reference's, shared by its kernel and the device's) ---------
def _add_sub_params(ctx: OpContext, negate: bool) -> list[tuple[int, int]]:
    """(multiplier, shift) of input 0, input 1 and the output, as addQuant8 / subQuant8 form them."""
    s1, s2, so = f32(ctx.in_operand(0).scale), f32(ctx.in_operand(1).scale), f32(ctx.out_operand(0).scale)
    twice_max = 2.0 * max(s1, s2)
    m1, sh1 = quantize_multiplier(s1 / twice_max)
    m2, sh2 = quantize_multiplier(s2 / twice_max)
    mo, sho = quantize_multiplier(twice_max / ((1 << ADD_LEFT_SHIFT) * so))
    # the reference negates the second multiplier to reuse the ADD kernel
    return [(m1, sh1), (-m2 if negate else m2, sh2), (mo, sho)]


def _mul_params(ctx: OpContext) -> tuple[int, int]:
    """mulQuant8's multiplier: the scale product formed in float32, the ratio in double."""
    product = float(np.float32(ctx.in_operand(0).scale) * np.float32(ctx.in_operand(1).scale))
    so = f32(ctx.out_operand(0).scale)
    if not product < so:
        raise OpError("MUL: output_scale must be greater than input1_scale * input2_scale")
    return quantize_multiplier(product / so)


def _quant_range(ctx: OpContext, act: int) -> tuple[int, int]:
    so, zo = quant_params(ctx, 0, out=True)
    return activation_range_quant(act, so, zo, ctx.out_operand(0).type)


# ---- references ----------------------------------------------------------------------------
Binary = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _add_sub_quant(ctx: OpContext, act: int, negate: bool) -> Binary:
    (m1, sh1), (m2, sh2), (mo, sho) = _add_sub_params(ctx, negate)
    z1, z2, zo = ctx.in_operand(0).zeroPoint, ctx.in_operand(1).zeroPoint, ctx.out_operand(0).zeroPoint
    lo, hi = _quant_range(ctx, act)
    dtype = dtype_of(ctx.out_operand(0).type)

    def run(x1: np.ndarray, x2: np.ndarray) -> np.ndarray:
        v1 = (x1.astype(np.int64) - z1) * (1 << ADD_LEFT_SHIFT)
        v2 = (x2.astype(np.int64) - z2) * (1 << ADD_LEFT_SHIFT)
        sc1 = multiply_by_quantized_multiplier(v1, m1, sh1)
        sc2 = multiply_by_quantized_multiplier(v2, m2, sh2)
        raw = multiply_by_quantized_multiplier(sc1 + sc2, mo, sho) + zo
        return np.clip(raw, lo, hi).astype(dtype)
    return run


def _mul_quant(ctx: OpContext, act: int) -> Binary:
    m, sh = _mul_params(ctx)
    z1, z2, zo = ctx.in_operand(0).zeroPoint, ctx.in_operand(1).zeroPoint, ctx.out_operand(0).zeroPoint
    lo, hi = _quant_range(ctx, act)
    dtype = dtype_of(ctx.out_operand(0).type)

    def run(x1: np.ndarray, x2: np.ndarray) -> np.ndarray:
        prod = (x1.astype(np.int64) - z1) * (x2.astype(np.int64) - z2)
        raw = multiply_by_quantized_multiplier(prod, m, sh) + zo
        return np.clip(raw, lo, hi).astype(dtype)
    return run


def _int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """int32 division rounding toward negative infinity; x / 0 is undefined in NNAPI and the
    reference returns 0 rather than failing."""
    a, b = np.broadcast_arrays(a.astype(np.int64), b.astype(np.int64))
    safe = np.where(b == 0, 1, b)
    return np.where(b == 0, 0, np.floor_divide(a, safe))


NumpyFn = Callable[[np.ndarray, np.ndarray], np.ndarray]
_FLOAT: dict[Op, NumpyFn] = {Op.ADD: np.add, Op.SUB: np.subtract, Op.MUL: np.multiply, Op.DIV: np.divide}
_INT: dict[Op, NumpyFn] = {Op.ADD: np.add, Op.SUB: np.subtract, Op.MUL: np.multiply, Op.DIV: _int_div}


def _binary(ctx: OpContext, op: Op) -> Binary:
    """The operation on its two input values, its parameters parsed and checked once."""
    t = ctx.in_operand(0).type
    act = activation_of(ctx, 2, t == T.TENSOR_INT32)
    broadcast_two(ctx)
    if t in QUANT8_TYPES:
        return _mul_quant(ctx, act) if op == Op.MUL else _add_sub_quant(ctx, act, negate=op == Op.SUB)
    if t == T.TENSOR_INT32:
        return lambda x1, x2: wrap_int32(_INT[op](x1.astype(np.int64), x2.astype(np.int64))).astype(np.int32)

    def run(x1: np.ndarray, x2: np.ndarray) -> np.ndarray:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            y = _FLOAT[op](float_compute(x1), float_compute(x2))
        return apply_activation_float(y, act).astype(x1.dtype, copy=False)
    return run


def _binary_reference(op: Op) -> Callable[[OpContext], list[np.ndarray]]:
    return lambda ctx: [_binary(ctx, op)(ctx.input(0), ctx.input(1))]


def _pair_table_kernel(run: Binary, dtype: np.dtype) -> Kernel:
    """An 8-bit operation as a lookup in its reference's results over all 65,536 input pairs
    (exact by construction), indexed by the two stored bytes: one pass, where the reference's
    fixed-point arithmetic takes a dozen over int64."""
    stored = np.arange(256, dtype=np.uint8).view(dtype)
    return PairTable(run(np.repeat(stored, 256), np.tile(stored, 256)))


def _binary_bind(op: Op) -> Callable[[OpNode], Kernel]:
    def bind(node: OpNode) -> Kernel:
        run = _binary(node, op)
        t = node.in_operand(0).type
        if t in QUANT8_TYPES:
            return _pair_table_kernel(run, dtype_of(t))
        if t != T.TENSOR_FLOAT32:
            return lambda ins, outs: [run(ins[0], ins[1])]
        f, act = _FLOAT[op], activation_of(node, 2)
        if act == Act.NONE:
            return lambda ins, outs: [f(ins[0], ins[1], out=outs[0])]
        lo, hi = activation_range_float(act)

        def kernel(ins: Sequence[np.ndarray], outs: list[np.ndarray]) -> list[np.ndarray]:
            np_clip(f(ins[0], ins[1], out=outs[0]), lo, hi, out=outs[0])  # apply_activation_float, in place
            return outs
        return kernel
    return bind


def _validate_binary(ctx: OpContext) -> None:
    check_rank(ctx, (0, 1))
    if ctx.values[2] is not None:
        activation_of(ctx, 2, ctx.in_operand(0).type == T.TENSOR_INT32)
    validate_broadcast(ctx)


def _validate_mul(ctx: OpContext) -> None:
    _validate_binary(ctx)
    if ctx.in_operand(0).type in QUANT8_TYPES:
        _mul_params(ctx)


# ---- device implementations ----------------------------------------------------------------
_C_FLOAT: dict[Op, Callable[[Expr, Expr], Expr]] = {
    Op.ADD: lambda a, b: a + b, Op.SUB: lambda a, b: a - b, Op.MUL: lambda a, b: a * b, Op.DIV: lambda a, b: a / b}


def _floor_div(a: Expr, b: Expr) -> Expr:
    """The reference's int32 floor division in 64 bits (so INT32_MIN / -1 does not trap), 0 for
    a zero divisor: C's truncating quotient, less one when the remainder's sign differs."""
    a, b = a.cast("long"), b.cast("long")
    zero = b.eq(0)
    safe = zero.where(1, b)
    q, r = a / safe, a % safe
    q = (r.ne(0) & (r < 0).ne(safe < 0)).where(q - 1, q)
    return zero.where(0, wrap_int(q))


_C_INT: dict[Op, Callable[[Expr, Expr], Expr]] = {
    Op.ADD: lambda a, b: wrap_int(a.cast("long") + b), Op.SUB: lambda a, b: wrap_int(a.cast("long") - b),
    Op.MUL: lambda a, b: wrap_int(a.cast("long") * b), Op.DIV: _floor_div}


def _float_binary(op: Op):
    def build(node: OpNode, ins: list) -> Compute:
        act = int(node.scalar(2))
        return per_element(node, ins, "float", lambda a, b: activation(_C_FLOAT[op](a, b), act))
    build.__name__ = f"float_{op.name.lower()}"
    return build


def _int32_binary(op: Op):
    def build(node: OpNode, ins: list) -> Compute:
        activation_of(node, 2, int_tensor=True)
        return per_element(node, ins, "int", _C_INT[op])
    build.__name__ = f"int32_{op.name.lower()}"
    return build


def _quant_add_sub(op: Op):
    """addQuant8 / subQuant8: both inputs shifted left by 20 bits and rescaled to the common
    scale, summed, rescaled to the output and clamped to the activation's range."""
    def build(node: OpNode, ins: list) -> Compute:
        (m1, sh1), (m2, sh2), (mo, sho) = _add_sub_params(node, negate=op == Op.SUB)
        z1, z2, zo = node.in_operand(0).zeroPoint, node.in_operand(1).zeroPoint, node.out_operand(0).zeroPoint
        lo, hi = _quant_range(node, activation_of(node, 2))

        def value(a: Expr, b: Expr) -> Expr:
            va = rescale((a - z1).cast("long") * (1 << ADD_LEFT_SHIFT), m1, sh1)
            vb = rescale((b - z2).cast("long") * (1 << ADD_LEFT_SHIFT), m2, sh2)
            return clamped(rescale(va + vb, mo, sho) + zo, lo, hi)

        return per_element(node, ins, "int", value)
    build.__name__ = f"quant_{op.name.lower()}"
    return build


def _quant_mul(node: OpNode, ins: list) -> Compute:
    """mulQuant8: the product of the centred inputs rescaled to the output, clamped."""
    m, sh = _mul_params(node)
    z1, z2, zo = node.in_operand(0).zeroPoint, node.in_operand(1).zeroPoint, node.out_operand(0).zeroPoint
    lo, hi = _quant_range(node, activation_of(node, 2))
    return per_element(node, ins, "int",
                       lambda a, b: clamped(rescale((a - z1).cast("long") * (b - z2), m, sh) + zo, lo, hi))


_F32, _F16, _Q8, _Q8S, _I32 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED, T.TENSOR_INT32
_TYPES: dict[Op, list[tuple[T, V]]] = {
    Op.ADD: [(_F32, V.V1_0), (_Q8, V.V1_0), (_F16, V.V1_2), (_Q8S, V.V1_3), (_I32, V.V1_3)],
    Op.MUL: [(_F32, V.V1_0), (_Q8, V.V1_0), (_F16, V.V1_2), (_Q8S, V.V1_3), (_I32, V.V1_3)],
    Op.SUB: [(_F32, V.V1_1), (_F16, V.V1_2), (_Q8, V.V1_2), (_Q8S, V.V1_3), (_I32, V.V1_3)],
    Op.DIV: [(_F32, V.V1_1), (_F16, V.V1_2), (_I32, V.V1_3)],
}
_QUANT_DEVICE = {Op.ADD: _quant_add_sub(Op.ADD), Op.SUB: _quant_add_sub(Op.SUB), Op.MUL: _quant_mul}

for _op, _types in _TYPES.items():
    _spec = register(OpSpec(_op, same_type_sigs(_types, 2, (T.INT32,)), _binary_reference(_op),
                            validate=_validate_mul if _op == Op.MUL else _validate_binary,
                            shape=broadcast_two, pattern=Pattern.ELEMENTWISE, bind=_binary_bind(_op),
                            alias=Alias.IN_PLACE))
    _spec.device(floats(0, 1))(_float_binary(_op))
    _spec.device(input_type_in(INT32, 0, 1))(_int32_binary(_op))
    if _op in _QUANT_DEVICE:
        _spec.device(quantized)(_QUANT_DEVICE[_op])


# ---- POW -----------------------------------------------------------------------------------
def _pow(ctx: OpContext) -> list[np.ndarray]:
    base, exponent = ctx.input(0), ctx.input(1)
    broadcast_two(ctx)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return [np.power(float_compute(base), float_compute(exponent)).astype(base.dtype, copy=False)]


POW = register(OpSpec(Op.POW, same_type_sigs([(_F16, V.V1_2), (_F32, V.V1_2)], 2), _pow,
                      validate=validate_broadcast, shape=broadcast_two, pattern=Pattern.ELEMENTWISE))


@POW.device(floats(0, 1))
def _float_pow(node: OpNode, ins: list) -> Compute:
    return per_element(node, ins, "float", lambda a, b: fn("pow", a, b))
