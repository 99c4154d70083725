"""Elementwise operators: arithmetic, comparisons, activations, QUANTIZE / DEQUANTIZE / CAST.

Quantized inputs of operations NNAPI has only for float (EXP, LOG, RSQRT, SQRT, ABS, NEG, SIN,
ELU, SQUARE, ...: unary and 8-bit) become a lookup table applied with GATHER
(common.float_table), as TFLite's own int8 kernels compute them; LEAKY_RELU's table is TFLite's
fixed-point arithmetic; a quantized QUANTIZE (requantize) is common.requantize. Operators with
no single NNAPI counterpart but an exact composition (CEIL, SQUARE, ADD_N, FLOOR_DIV, ...) end
the module."""
from __future__ import annotations

import numpy as np

from ...hal.types import OperandLifeTime, OperandType, OperationType
from ...ops.lib.quant import multiply_by_quantized_multiplier, quantize_multiplier
from ..context import OpCtx
from ..tensors import FLOAT16, INT32
from .common import (
    Q8S,
    act,
    apply_table,
    float_table,
    is_quant8,
    registry,
    requantize,
    same_scale_output,
)

Op = OperationType
T = OperandType
MAPPERS, mapper = registry()

_BINARY_FUSED = {"ADD": Op.ADD, "SUB": Op.SUB, "MUL": Op.MUL, "DIV": Op.DIV}


@mapper(*_BINARY_FUSED)
def _binary_fused(c: OpCtx) -> None:
    code = c.activation(act(c))
    c.emit(_BINARY_FUSED[c.op.name], [c.inp(0), c.inp(1), c.b.i32(code)], [c.out()])


_BINARY = {"MAXIMUM": Op.MAXIMUM, "MINIMUM": Op.MINIMUM, "POW": Op.POW, "LESS": Op.LESS,
           "LESS_EQUAL": Op.LESS_EQUAL, "GREATER": Op.GREATER, "GREATER_EQUAL": Op.GREATER_EQUAL,
           "EQUAL": Op.EQUAL, "NOT_EQUAL": Op.NOT_EQUAL, "LOGICAL_AND": Op.LOGICAL_AND,
           "LOGICAL_OR": Op.LOGICAL_OR, "PRELU": Op.PRELU}


@mapper(*_BINARY)
def _binary(c: OpCtx) -> None:
    c.emit(_BINARY[c.op.name], [c.inp(0), c.inp(1)], [c.out()])


@mapper("SQUARED_DIFFERENCE")
def _squared_difference(c: OpCtx) -> None:
    if not c.is_float(0):
        c.unsupported("quantized SQUARED_DIFFERENCE")
    out = c.out()
    diff = c.b.like(out)
    c.emit(Op.SUB, [c.inp(0), c.inp(1), c.b.i32(0)], [diff])
    c.emit(Op.MUL, [diff, diff, c.b.i32(0)], [out])


# NNAPI has these for float (and some for int32) only: 8-bit inputs go through a table.
_FLOAT_ONLY = {"EXP": (Op.EXP, np.exp), "LOG": (Op.LOG, np.log), "SQRT": (Op.SQRT, np.sqrt),
               "RSQRT": (Op.RSQRT, lambda x: np.float32(1) / np.sqrt(x)), "ABS": (Op.ABS, np.abs),
               "NEG": (Op.NEG, np.negative), "SIN": (Op.SIN, np.sin)}
_UNARY = {"RELU": Op.RELU, "RELU6": Op.RELU6, "RELU_N1_TO_1": Op.RELU1, "LOGISTIC": Op.LOGISTIC,
          "TANH": Op.TANH, "HARD_SWISH": Op.HARD_SWISH, "FLOOR": Op.FLOOR, "LOGICAL_NOT": Op.LOGICAL_NOT,
          "RANK": Op.RANK}
_SAME_SCALE = {"RELU", "RELU6", "RELU_N1_TO_1"}  # NNAPI keeps the input's scale: requantize after


@mapper(*_FLOAT_ONLY)
def _float_only(c: OpCtx) -> None:
    op_type, fn = _FLOAT_ONLY[c.op.name]
    x, out = c.inp(0), c.out()
    if not is_quant8(c, x):
        c.emit(op_type, [x], [out])
    elif c.op.name == "NEG":  # TFLite negates the stored int8 values, wrapping, whatever the scales
        raw = np.arange(-128, 128) if c.b.operands[x].type == Q8S else np.arange(256)
        apply_table(c, x, out, (-raw).astype(np.int8 if c.b.operands[out].type == Q8S else np.uint8))
    else:
        apply_table(c, x, out, float_table(c, x, out, fn))


@mapper(*_UNARY)
def _unary(c: OpCtx) -> None:
    x, out = c.inp(0), c.out()
    if c.op.name in _SAME_SCALE:
        same_scale_output(c, x, out, lambda target: c.emit(_UNARY[c.op.name], [x], [target]))
    else:
        c.emit(_UNARY[c.op.name], [x], [out])


@mapper("CAST")
def _cast(c: OpCtx) -> None:
    c.emit(Op.CAST, [c.inp(0)], [c.out()])


@mapper("DEQUANTIZE")
def _dequantize(c: OpCtx) -> None:
    c.emit(Op.DEQUANTIZE, [c.inp(0)], [c.out()])


@mapper("QUANTIZE")
def _quantize(c: OpCtx) -> None:
    x, out = c.inp(0), c.out()
    if is_quant8(c, x) and is_quant8(c, out):
        requantize(c, x, out)
    else:
        c.emit(Op.QUANTIZE, [x], [out])


@mapper("ELU")
def _elu(c: OpCtx) -> None:
    x, out = c.inp(0), c.out()
    if is_quant8(c, x):
        apply_table(c, x, out, float_table(c, x, out, lambda v: np.where(v < 0, np.expm1(v), v)))
    else:
        c.emit(Op.ELU, [x, c.b.f32(1.0)], [out])


@mapper("LEAKY_RELU")
def _leaky_relu(c: OpCtx) -> None:
    # The delegate's mapping: PRELU with a one-element constant alpha; 8-bit by a table.
    x, out = c.inp(0), c.out()
    alpha = float(c.opts.Alpha())
    if is_quant8(c, x):
        apply_table(c, x, out, _leaky_table(c, x, out, alpha))
        return
    if not c.is_float(0):
        c.unsupported(f"LEAKY_RELU of {c.t_in(0).type_name}")
    dtype = np.float16 if c.t_in(0).type == FLOAT16 else np.float32
    a = c.b.constant(c.b.operands[x].type, np.asarray([alpha], dtype))
    c.emit(Op.PRELU, [x, a], [out])


def _leaky_table(c: OpCtx, x: int, out: int, alpha: float) -> np.ndarray:
    """TFLite's QuantizeLeakyRelu on every raw input: q - zi times the identity multiplier
    (si / so) or the alpha one (si * alpha / so), both formed in float32, then MultiplyBy-
    QuantizedMultiplier, plus zo, saturated (bit-exact with the interpreter's kernel)."""
    xo, oo = c.b.operands[x], c.b.operands[out]
    f32 = np.float32
    v = (np.arange(-128, 128) if xo.type == Q8S else np.arange(256)).astype(np.int64) - xo.zeroPoint
    identity = quantize_multiplier(float(f32(xo.scale) / f32(oo.scale)))
    slope = quantize_multiplier(float(f32(f32(xo.scale) * f32(alpha)) / f32(oo.scale)))
    raw = np.where(v >= 0, multiply_by_quantized_multiplier(v, *identity),
                   multiply_by_quantized_multiplier(v, *slope)) + oo.zeroPoint
    return np.clip(raw, *((-128, 127) if oo.type == Q8S else (0, 255)))


@mapper("L2_NORMALIZATION")
def _l2_norm(c: OpCtx) -> None:
    c.activation(act(c), fusable=False)
    c.emit(Op.L2_NORMALIZATION, [c.inp(0)], [c.out()])


@mapper("LOCAL_RESPONSE_NORMALIZATION")
def _lrn(c: OpCtx) -> None:
    o = c.opts
    c.emit(Op.LOCAL_RESPONSE_NORMALIZATION,
           [c.inp(0), c.b.i32(o.Radius()), c.b.f32(o.Bias()), c.b.f32(o.Alpha()), c.b.f32(o.Beta())], [c.out()])


@mapper("SOFTMAX")
def _softmax(c: OpCtx) -> None:
    c.emit(Op.SOFTMAX, [c.inp(0), c.b.f32(c.opts.Beta() if c.opts is not None else 1.0)], [c.out()])


@mapper("LOG_SOFTMAX")
def _log_softmax(c: OpCtx) -> None:
    c.emit(Op.LOG_SOFTMAX, [c.inp(0), c.b.f32(1.0), c.b.i32(-1)], [c.out()])


@mapper("SELECT", "SELECT_V2")
def _select(c: OpCtx) -> None:
    c.emit(Op.SELECT, [c.inp(0), c.inp(1), c.inp(2)], [c.out()])


# ---- compositions of NNAPI operations ------------------------------------------------------------
def _float_or_table(c: OpCtx, fn, emit) -> None:
    """8-bit input: a table of fn; else emit(x, out) writes the float composition."""
    x, out = c.inp(0), c.out()
    if is_quant8(c, x):
        apply_table(c, x, out, float_table(c, x, out, fn))
    else:
        emit(x, out)


@mapper("SQUARE")
def _square(c: OpCtx) -> None:
    _float_or_table(c, np.square, lambda x, out: c.emit(Op.MUL, [x, x, c.b.i32(0)], [out]))


@mapper("CEIL")
def _ceil(c: OpCtx) -> None:
    def emit(x: int, out: int) -> None:  # ceil(x) = -floor(-x), exactly
        neg, low = c.b.like(x), c.b.like(x)
        c.emit(Op.NEG, [x], [neg])
        c.emit(Op.FLOOR, [neg], [low])
        c.emit(Op.NEG, [low], [out])
    _float_or_table(c, np.ceil, emit)


@mapper("RELU_0_TO_1")
def _relu_0_to_1(c: OpCtx) -> None:
    def emit(x: int, out: int) -> None:
        r = c.b.like(x)
        c.emit(Op.RELU, [x], [r])
        one = c.b.constant(c.b.operands[x].type, np.ones(1, np.float16 if c.t_in(0).type == FLOAT16 else np.float32))
        c.emit(Op.MINIMUM, [r, one], [out])
    _float_or_table(c, lambda v: np.clip(v, 0, 1), emit)


@mapper("GELU")
def _gelu(c: OpCtx) -> None:
    # NNAPI has no erf / tanh-approximation composition that is exact: 8-bit inputs only (a table,
    # as TFLite's own int8 GELU is one).
    x, out = c.inp(0), c.out()
    if not is_quant8(c, x):
        c.unsupported("float GELU needs erf, which NNAPI lacks")
    approx = bool(c.opts.Approximate()) if c.opts is not None else False

    def gelu(v: np.ndarray) -> np.ndarray:
        v64 = v.astype(np.float64)
        if approx:
            return 0.5 * v64 * (1 + np.tanh(np.sqrt(2 / np.pi) * (v64 + 0.044715 * v64 ** 3)))
        from math import erf
        return 0.5 * v64 * (1 + np.vectorize(erf)(v64 / np.sqrt(2)))
    apply_table(c, x, out, float_table(c, x, out, gelu))


@mapper("ADD_N")
def _add_n(c: OpCtx) -> None:
    # TFLite sums in input order: a chain of ADDs rounds the same way.
    acc = c.inp(0)
    n = len(c.op.inputs)
    for k in range(1, n):
        target = c.out() if k == n - 1 else c.b.like(acc)
        c.emit(Op.ADD, [acc, c.inp(k), c.b.i32(0)], [target])
        acc = target


@mapper("FLOOR_DIV")
def _floor_div(c: OpCtx) -> None:
    x, y, out = c.inp(0), c.inp(1), c.out()
    if not c.is_float(0):  # NNAPI's int32 DIV rounds toward negative infinity already
        c.emit(Op.DIV, [x, y, c.b.i32(0)], [out])
        return
    q = c.b.like(out)
    c.emit(Op.DIV, [x, y, c.b.i32(0)], [q])
    c.emit(Op.FLOOR, [q], [out])


@mapper("FLOOR_MOD")
def _floor_mod(c: OpCtx) -> None:
    # int32 only: x - floor_div(x, y) * y is exact there (float would round twice).
    if c.t_in(0).type != INT32:
        c.unsupported(f"FLOOR_MOD of {c.t_in(0).type_name}: only int32 has an exact composition")
    x, y, out = c.inp(0), c.inp(1), c.out()
    q, p = c.b.like(out), c.b.like(out)
    c.emit(Op.DIV, [x, y, c.b.i32(0)], [q])
    c.emit(Op.MUL, [q, y, c.b.i32(0)], [p])
    c.emit(Op.SUB, [x, p, c.b.i32(0)], [out])


@mapper("ZEROS_LIKE")
def _zeros_like(c: OpCtx) -> None:
    # FILL of the (static) shape: x - x would give NaN for inf / NaN inputs.
    kind = {0: T.FLOAT32, 1: T.FLOAT16, 2: T.INT32}.get(c.t_in(0).type)
    if kind is None:
        c.unsupported(f"ZEROS_LIKE of {c.t_in(0).type_name}")
    c.emit(Op.FILL, [c.b.i32_tensor(c.t_out().shape or [1]), c.b.scalar(kind, 0)], [c.out()])


@mapper("LSH_PROJECTION")
def _lsh_projection(c: OpCtx) -> None:
    x = c.inp(1)
    weight = c.inp(2) if c.has(2) else c.b.operand(T.TENSOR_FLOAT32, [], lifetime=OperandLifeTime.NO_VALUE)
    # tflite LSHProjectionType SPARSE=1 (with the per-function offset NNAPI 1.0 lacked), DENSE=2;
    # NNAPI: 3 SPARSE, 2 DENSE.
    kind = {1: 3, 2: 2}.get(int(c.opts.Type()))
    if kind is None:
        c.unsupported(f"projection type {int(c.opts.Type())}")
    c.emit(Op.LSH_PROJECTION, [c.inp(0), x, weight, c.b.i32(kind)], [c.out()])
