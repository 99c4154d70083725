"""BATCH_MATMUL (NNAPI feature level 6, AIDL HAL version 2): out[..., r, c] = the sum over k of
x[..., r, k] * y[..., k, c], each slice of x (adj_x) or y (adj_y) optionally transposed first,
the adjoint of a real matrix.

As AOSP's BatchMatmul.cpp on TFLite's reference kernels: the inputs have one rank in [2, 4] and
the same batch dimensions (the spec's "same batch size"; nothing is broadcast), every matrix
dimension is non-zero, and the flags are optional (omitted: false). float32 and float16 are
computed in float32 (float16 rounded on output, as the other float16 operations here);
TENSOR_INT32 wraps like the reference's int32 accumulator. TENSOR_QUANT8_ASYMM_SIGNED sums
(x - x zero point) * (y - y zero point) exactly, wraps it to int32 and requantizes it with
MultiplyByQuantizedMultiplier and QuantizeMultiplier(x scale * y scale / output scale, the
product in float32), then adds the output zero point and saturates to int8 (no activation).
On the device each output element is one loop over k in the same arithmetic."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ..hal.types import OperandType as T
from ..hal.types import OperationType as Op
from ..ir import Acc, Compute, Const, Coords, Expr, Loop, Reduce, Tensor, Var
from .lib.device import types_in
from .lib.elementwise_device import clamped, rescale, wrap_int
from .lib.index_map import require_nonempty
from .lib.layout import V, check_shape_rank
from .lib.quant import convolution_multiplier, multiply_by_quantized_multiplier, quantize_multiplier, wrap_int32
from .node import OpNode
from .registry import Kernel, OpContext, OpError, OpSpec, Pattern, register, sig

_S8, _I32 = T.TENSOR_QUANT8_ASYMM_SIGNED, T.TENSOR_INT32
_TYPES = (T.TENSOR_FLOAT16, T.TENSOR_FLOAT32, _S8, _I32)
_INT8_MIN, _INT8_MAX = -128, 127


@dataclass(frozen=True)
class Geometry:
    """The batch dimensions, the output's rows and columns, the summed extent and the flags."""

    batch: tuple[int, ...]
    rows: int
    cols: int
    inner: int
    adj_x: bool
    adj_y: bool


def geometry(a: Sequence[int], b: Sequence[int], adj_x: bool, adj_y: bool) -> Geometry:
    """The product of an x of shape `a` by a y of shape `b`, checked (OpError)."""
    a, b = tuple(int(d) for d in a), tuple(int(d) for d in b)
    if len(a) != len(b):
        raise OpError(f"input ranks {len(a)} and {len(b)} differ")
    check_shape_rank(a, 2, 4)
    if a[:-2] != b[:-2]:
        raise OpError(f"batch dimensions {list(a[:-2])} and {list(b[:-2])} differ")
    if 0 in a[-2:] + b[-2:]:
        raise OpError(f"an empty matrix: {list(a)} x {list(b)}")
    rows, inner = (a[-1], a[-2]) if adj_x else (a[-2], a[-1])
    inner_y, cols = (b[-1], b[-2]) if adj_y else (b[-2], b[-1])
    if inner != inner_y:
        raise OpError(f"cannot multiply {list(a)} (adj_x {adj_x}) by {list(b)} (adj_y {adj_y})")
    return Geometry(a[:-2], rows, cols, inner, adj_x, adj_y)


def _flags(ctx: OpContext) -> tuple[bool, bool]:
    return bool(ctx.scalar(2, False)), bool(ctx.scalar(3, False))


def _geometry(ctx: OpContext) -> Geometry:
    return geometry(ctx.in_shape(0), ctx.in_shape(1), *_flags(ctx))


def _shape(ctx: OpContext) -> list[tuple[int, ...]]:
    g = _geometry(ctx)
    return [g.batch + (g.rows, g.cols)]


def _requant(ctx: OpContext) -> tuple[int, int]:
    """(multiplier, shift) of GetQuantizedConvolutionMultiplier + QuantizeMultiplier."""
    x, y, out = ctx.in_operand(0), ctx.in_operand(1), ctx.out_operand(0)
    return quantize_multiplier(convolution_multiplier(x.scale, y.scale, out.scale))


def _operands(ctx: OpContext, g: Geometry) -> tuple[np.ndarray, np.ndarray]:
    x, y = ctx.input(0), ctx.input(1)
    return (np.swapaxes(x, -1, -2) if g.adj_x else x), (np.swapaxes(y, -1, -2) if g.adj_y else y)


def _batch_matmul(ctx: OpContext) -> list[np.ndarray]:
    g = _geometry(ctx)
    x, y = _operands(ctx, g)
    t = ctx.in_operand(0).type
    if t == _S8:
        acc = np.matmul(x.astype(np.int64) - ctx.in_operand(0).zeroPoint,
                        y.astype(np.int64) - ctx.in_operand(1).zeroPoint)
        m, s = _requant(ctx)
        out = multiply_by_quantized_multiplier(wrap_int32(acc), m, s) + ctx.out_operand(0).zeroPoint
        return [np.clip(out, _INT8_MIN, _INT8_MAX).astype(np.int8)]
    if t == _I32:  # int64 products and sums wrap mod 2^64, so mod 2^32 they are the int32 ones
        return [wrap_int32(np.matmul(x.astype(np.int64), y.astype(np.int64))).astype(np.int32)]
    with np.errstate(over="ignore"):  # beyond float16's range is inf
        return [np.matmul(x.astype(np.float32, copy=False), y.astype(np.float32, copy=False)).astype(x.dtype)]


def _bind(node: OpNode) -> Kernel | None:
    """The numpy plan's float32 product straight into its output; other types run the reference."""
    g = _geometry(node)
    if node.in_operand(0).type != T.TENSOR_FLOAT32:
        return None

    def kernel(ins: Sequence[np.ndarray], outs: list[np.ndarray]) -> list[np.ndarray]:
        x, y = ins[0], ins[1]
        np.matmul(np.swapaxes(x, -1, -2) if g.adj_x else x, np.swapaxes(y, -1, -2) if g.adj_y else y, out=outs[0])
        return outs
    return kernel


def _validate(ctx: OpContext) -> None:
    """The model's ranks (where given) and, where shapes and flags are known, the product."""
    dims = [list(ctx.in_operand(0).dimensions), list(ctx.in_operand(1).dimensions),
            list(ctx.out_operand(0).dimensions)]
    ranks = {len(d) for d in dims if d}
    if len(ranks) > 1:
        raise OpError(f"inputs and output have different ranks: {dims}")
    for d in dims:
        if d:
            check_shape_rank(d, 2, 4)
    known_flags = all(i >= ctx.num_inputs or ctx.is_omitted(i) or ctx.values[i] is not None for i in (2, 3))
    if known_flags and dims[0] and dims[1] and 0 not in dims[0] + dims[1]:
        geometry(dims[0], dims[1], *_flags(ctx))


SPEC = register(OpSpec(Op.BATCH_MATMUL, [sig([t, t, T.BOOL, T.BOOL], [t], V.AIDL_V2, min_inputs=2) for t in _TYPES],
                       _batch_matmul, _validate, shape=_shape, pattern=Pattern.REDUCTION, bind=_bind))


@SPEC.device(types_in(frozenset(_TYPES), 0, 1))
def _batch_matmul_device(node: OpNode, ins: list[Tensor | None]) -> Compute:
    g = _geometry(node)
    x, y = ins[0], ins[1]
    out_shape = node.out_shape(0)
    require_nonempty(out_shape)
    t = node.in_operand(0).type
    nb = len(g.batch)
    if t == _S8:
        zx, zy = node.in_operand(0).zeroPoint, node.in_operand(1).zeroPoint
        m, s = _requant(node)
        zo = node.out_operand(0).zeroPoint
        acc = "int" if g.inner * 255 * 255 < 1 << 31 else "long"
    else:
        acc = "long" if t == _I32 else "float"

    def value(c: Coords) -> Expr:
        kv = Var("k", "int")
        batch, r, col = c.axes[:nb], c[nb], c[nb + 1]
        xv = x.load(Coords(x.shape, batch + ([kv, r] if g.adj_x else [r, kv])))
        yv = y.load(Coords(y.shape, batch + ([col, kv] if g.adj_y else [kv, col])))
        if t == _S8:
            body = (xv - zx).cast(acc) * (yv - zy).cast(acc)
        else:
            body = xv.cast(acc) * yv.cast(acc) if acc == "long" else xv * yv
        total = Reduce([Loop(kv, g.inner)], [Acc(Const(0.0 if acc == "float" else 0, acc), body, lambda a, v: a + v)])
        if t == _S8:
            return clamped(rescale(total, m, s) + zo, _INT8_MIN, _INT8_MAX)
        return wrap_int(total).cast("int") if t == _I32 else total

    return Compute(out_shape, "float" if acc == "float" else "int", value)
