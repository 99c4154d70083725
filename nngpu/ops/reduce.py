"""Reductions over a list of axes: MEAN, REDUCE_ALL/ANY/MAX/MIN/PROD/SUM.

Axes may be negative and repeated (a repeated axis is reduced once, as the reference's
ResolveAxis); keep_dims keeps reduced extents as 1; reducing every axis without keep_dims gives
shape [1]. Quantized MEAN follows the reference (TFLite reference_ops::Mean<T, int32>): the raw
values, zero point included, are summed in int32 and divided with C truncation. Also holds the
axis helpers the softmax, normalization and selection families share.

Every type runs on the device: each output element loops over the elements it reduces (float
sums compensated, quantized MEAN in 64-bit integers with C's truncating division, exact). A
target with a column_sum kernel (OpenCL on CPU devices) sums float32 over a run of middle axes,
a global average pool say, a vector of neighbouring outputs per thread, with the same bits.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..hal.types import OperandType as T
from ..hal.types import OperationType as Op
from ..ir import Acc, BufferTensor, Compute, Const, Expr, Loop, Reduce, Stored, reduce_sum
from .lib.axes import MAX_RANK, check_max_rank, resolve_axis
from .lib.device import COPYABLE, channel_lanes, largest_divisor, types_in
from .lib.reduce_device import extreme, float_sum, reduced_count, reduced_slice
from .node import OpNode
from .registry import HalVersion as V
from .registry import OpContext, OpError, OpSpec, Pattern, register, sig

_F32, _F16, _Q8, _Q8S, _B8 = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_QUANT8_ASYMM,
                              T.TENSOR_QUANT8_ASYMM_SIGNED, T.TENSOR_BOOL8)


# ---- reduction kernels ---------------------------------------------------------------------
@dataclass(frozen=True)
class ReduceParams:
    axes: tuple[int, ...]   # sorted, each once
    keep: bool


def _params(ctx: OpContext) -> ReduceParams:
    rank = len(ctx.in_shape(0))
    if rank > MAX_RANK:
        raise OpError(f"input rank {rank} > {MAX_RANK}")
    raw = np.asarray(ctx.input(1)).reshape(-1)
    keep = ctx.scalar(2)
    return ReduceParams(tuple(sorted({resolve_axis(int(a), rank) for a in raw})),
                        keep > 0 if ctx.operation.type == Op.MEAN else bool(keep))


def _out_shape(shape: tuple[int, ...], axes: tuple[int, ...], keep: bool) -> tuple[int, ...]:
    if keep:
        return tuple(1 if d in axes else n for d, n in enumerate(shape))
    kept = tuple(n for d, n in enumerate(shape) if d not in axes)
    return kept if kept else (1,)


def _shape(node: OpContext) -> list[tuple[int, ...]]:
    p = node.params
    return [_out_shape(node.in_shape(0), p.axes, p.keep)]


def _mean_quant(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    count = int(np.prod([x.shape[a] for a in axes], dtype=np.int64)) if axes else 1
    total = np.sum(x.astype(np.int64), axis=axes)
    if count == 0:
        return total
    # C integer division truncates toward zero (the int8 sums may be negative)
    q = np.abs(total) // count * np.sign(total)
    return q


def _float(fn: Callable) -> Callable[[np.ndarray, tuple[int, ...]], np.ndarray]:
    """float16 is computed in float32 and rounded on output (the executor casts back)."""
    def run(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
        with np.errstate(over="ignore", invalid="ignore"):
            return fn(x.astype(np.float32) if x.dtype == np.float16 else x, axis=axes)
    return run


def _minmax(fn: Callable) -> Callable[[np.ndarray, tuple[int, ...]], np.ndarray]:
    def run(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
        if x.size == 0 and axes and any(x.shape[a] == 0 for a in axes):
            raise OpError("REDUCE_MAX/MIN over an empty extent")
        return fn(x, axis=axes)
    return run


def _mean(x: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    if x.dtype in (np.uint8, np.int8):
        return _mean_quant(x, axes)
    return _float(np.mean)(x, axes)


_KERNELS: dict[Op, Callable[[np.ndarray, tuple[int, ...]], np.ndarray]] = {
    Op.MEAN: _mean,
    Op.REDUCE_ALL: lambda x, axes: np.all(x, axis=axes),
    Op.REDUCE_ANY: lambda x, axes: np.any(x, axis=axes),
    Op.REDUCE_MAX: _minmax(np.max),
    Op.REDUCE_MIN: _minmax(np.min),
    Op.REDUCE_PROD: _float(np.prod),
    Op.REDUCE_SUM: _float(np.sum),
}


def _validate(ctx: OpContext) -> None:
    check_max_rank(ctx)
    dims = ctx.in_operand(0).dimensions
    axes = ctx.values[1]
    if axes is not None and dims:
        for a in np.asarray(axes).reshape(-1):
            resolve_axis(int(a), len(dims))
    t = ctx.in_operand(0).type
    if t in (_Q8, _Q8S):
        i, o = ctx.in_operand(0), ctx.out_operand(0)
        if np.float32(i.scale) != np.float32(o.scale) or i.zeroPoint != o.zeroPoint:
            raise OpError("quantized reduction: output scale and zeroPoint must equal the input's")


def _reference(op: Op) -> Callable[[OpContext], list[np.ndarray]]:
    kernel = _KERNELS[op]

    def reference(ctx: OpContext) -> list[np.ndarray]:
        _validate(ctx)  # the model rules again, now that every value is known
        y = np.asarray(kernel(ctx.input(0), ctx.params.axes))
        return [y.reshape(_shape(ctx)[0])]

    return reference


def _bind(op: Op) -> Callable[[OpNode], Callable | None]:
    """The numpy plan's reduction: the reference's kernel with the model rules checked and the
    axes parsed once, here (an empty input runs the reference, which says what it refuses)."""
    kernel = _KERNELS[op]

    def bind(node: OpNode) -> Callable | None:
        if 0 in node.in_shape(0):
            return None
        _validate(node)
        axes, shape = node.params.axes, node.out_shape(0)

        def run(ins, outs: list[np.ndarray]) -> list[np.ndarray]:
            np.copyto(outs[0], np.asarray(kernel(ins[0], axes)).reshape(shape), casting="unsafe")
            return outs
        return run
    return bind


_TYPES: dict[Op, list[tuple[T, V]]] = {
    Op.MEAN: [(_F32, V.V1_1), (_Q8, V.V1_1), (_F16, V.V1_2), (_Q8S, V.V1_3)],
    Op.REDUCE_ALL: [(_B8, V.V1_2)],
    Op.REDUCE_ANY: [(_B8, V.V1_2)],
    Op.REDUCE_MAX: [(_F32, V.V1_2), (_F16, V.V1_2), (_Q8, V.V1_2), (_Q8S, V.V1_3)],
    Op.REDUCE_MIN: [(_F32, V.V1_2), (_F16, V.V1_2), (_Q8, V.V1_2), (_Q8S, V.V1_3)],
    Op.REDUCE_PROD: [(_F32, V.V1_2), (_F16, V.V1_2)],
    Op.REDUCE_SUM: [(_F32, V.V1_2), (_F16, V.V1_2)],
}


def _accumulate(op: Op, loops: list[Loop], v: Expr, count: int) -> Expr:
    """Reduction `op` of the values `v` over `loops` (`count` iterations), as the reference."""
    if op in (Op.MEAN, Op.REDUCE_SUM):
        if v.dtype == "float":
            total = float_sum(loops, v)
            return total / float(count) if op == Op.MEAN else total
        return reduce_sum(loops, v.cast("long")) / count  # quantized MEAN: C's truncating division
    if op == Op.REDUCE_PROD:
        return Reduce(loops, [Acc(Const(1.0, "float"), v, lambda a, b: a * b)])
    if op in (Op.REDUCE_MAX, Op.REDUCE_MIN):
        return extreme(loops, v, op == Op.REDUCE_MAX)
    every = op == Op.REDUCE_ALL
    return Reduce(loops, [Acc(Const(every, "bool"), v, (lambda a, b: a & b) if every else (lambda a, b: a | b))])


def _column_sum(node: OpNode, x, count: int) -> Stored | None:
    """The target's column_sum kernel (compiler/library.py) for a float32 MEAN or REDUCE_SUM
    whose axes are one run with at least 4 elements after it, in vectors that divide them (the
    input as [B, R, C], the output as [B, C]); None where it does not apply."""
    op, axes, shape = node.operation.type, node.params.axes, node.in_shape(0)
    if (op not in (Op.MEAN, Op.REDUCE_SUM) or node.in_operand(0).type != _F32 or not axes
            or list(axes) != list(range(axes[0], axes[-1] + 1)) or not isinstance(x, BufferTensor)
            or x.buffer.storage != "float" or node.out_storage(0) != "float" or not node.has_library("column_sum")):
        return None
    b, r, c = (int(np.prod(shape[s], dtype=np.int64)) for s in (slice(0, axes[0]), slice(axes[0], axes[-1] + 1),
                                                                  slice(axes[-1] + 1, None)))
    vectors = _column_vectors(b, c)
    if vectors is None or b * r * c >= 2 ** 31 or r == 0:
        return None
    vw, cv = vectors
    defines: dict[str, object] = dict(VW=vw, CV=cv, B=b, R=r, C=c)
    if op == Op.MEAN:
        defines["COUNT"] = f"{float(count)!r}f"   # as the generated kernel writes total / count
    # a work-group a work-item: a CPU device's threads share out the few there are
    return Stored(node.library("column_sum", [x], b * c // (vw * cv), defines, group=1))


def _column_vectors(b: int, c: int, most: int = 8) -> tuple[int, int] | None:
    """(VW, CV) of column_sum for [B, ., C]: vectors of VW lanes, the widest dividing C, and CV of
    them a work-item: the most (up to `most`, their two accumulators each held in registers)
    that leave two or more work-items (a CPU device's two threads both working); None where 4
    does not divide C. (Narrower vectors for two work-items where C is one vector made
    MobileNet v3's first mean 30% slower on PoCL: both threads read every row's cache line.)"""
    vw = channel_lanes(c)
    if vw is None:
        return None
    per_b = c // vw
    cv = largest_divisor(per_b, most, lambda d: b * per_b // d >= 2)
    return vw, cv


def _reduce_device(node: OpNode, ins: list) -> Compute | Stored:
    """Each output element loops over the input elements it reduces (float16 in float32)."""
    x, p, op = ins[0], node.params, node.operation.type
    count = reduced_count(node, p.axes)
    stored = _column_sum(node, x, count)
    if stored is not None:
        return stored

    def value(c):
        loops, at = reduced_slice(node.in_shape(0), p.axes, p.keep, c)
        return _accumulate(op, loops, x.load(at), count)

    return Compute(node.out_shape(0), x.dtype, value)


for _op, _types in _TYPES.items():
    _keep = T.INT32 if _op == Op.MEAN else T.BOOL  # MEAN predates the BOOL operand type
    register(OpSpec(_op, [sig([_t, T.TENSOR_INT32, _keep], [_t], _v) for _t, _v in _types], _reference(_op),
                    validate=_validate, shape=_shape, params=_params, pattern=Pattern.REDUCTION,
                    bind=_bind(_op))).device(types_in(COPYABLE, 0))(_reduce_device)
