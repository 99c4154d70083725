"""Reductions over a list of axes: MEAN, REDUCE_ALL/ANY/MAX/MIN/PROD/SUM.

Axes may be negative and repeated (a repeated axis is reduced once, as the reference's
ResolveAxis); keep_dims keeps reduced extents as 1; reducing every axis without keep_dims gives
shape [1]. Quantized MEAN follows the reference (TFLite reference_ops::Mean<T, int32>): the raw
values, zero point included, are summed in int32 and divided with C truncation. Also holds the
axis helpers the softmax, normalization and selection families share.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..hal.types import OperandType as T
from ..hal.types import OperationType as Op
from .registry import HalVersion as V
from .registry import OpContext, OpError, OpSpec, register, sig

MAX_RANK = 4
_F32, _F16, _Q8, _Q8S, _B8 = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_QUANT8_ASYMM,
                              T.TENSOR_QUANT8_ASYMM_SIGNED, T.TENSOR_BOOL8)


# ---- shared axis helpers -------------------------------------------------------------------
def resolve_axis(axis: int, rank: int) -> int:
    """A single axis in [-rank, rank) as a non-negative index."""
    if not -rank <= axis < rank:
        raise OpError(f"axis {axis} out of range for rank {rank}")
    return axis % rank


def check_max_rank(ctx: OpContext, i: int = 0, max_rank: int = MAX_RANK) -> None:
    dims = ctx.in_operand(i).dimensions
    if dims and len(dims) > max_rank:
        raise OpError(f"input {i} has rank {len(dims)} > {max_rank}")


def ranks_before_v1_2(ctx: OpContext, ranks: tuple[int, ...]) -> None:
    """Model rule: before HAL 1.2 input 0 must have one of `ranks` (validation raises the version)."""
    dims = ctx.in_operand(0).dimensions
    if dims and ctx.version < V.V1_2 and len(dims) not in ranks:
        raise OpError(f"rank {len(dims)} needs HAL version 1.2")


def const_scalar(ctx: OpContext, i: int):
    """Input i as a Python scalar when it is known (constant at validation time), else None."""
    if i >= ctx.num_inputs or ctx.values[i] is None:
        return None
    return ctx.values[i].reshape(-1)[0].item()


# ---- reduction kernels ---------------------------------------------------------------------
def _axes(ctx: OpContext, rank: int) -> tuple[int, ...]:
    raw = np.asarray(ctx.input(1)).reshape(-1)
    return tuple(sorted({resolve_axis(int(a), rank) for a in raw}))


def _out_shape(shape: tuple[int, ...], axes: tuple[int, ...], keep: bool) -> tuple[int, ...]:
    if keep:
        return tuple(1 if d in axes else n for d, n in enumerate(shape))
    kept = tuple(n for d, n in enumerate(shape) if d not in axes)
    return kept if kept else (1,)


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
        x = ctx.input(0)
        if x.ndim > MAX_RANK:
            raise OpError(f"input rank {x.ndim} > {MAX_RANK}")
        axes = _axes(ctx, x.ndim)
        keep = ctx.scalar(2)
        keep = keep > 0 if op == Op.MEAN else bool(keep)
        y = np.asarray(kernel(x, axes))
        return [y.reshape(_out_shape(x.shape, axes, keep))]

    return reference


_TYPES: dict[Op, list[tuple[T, V]]] = {
    Op.MEAN: [(_F32, V.V1_1), (_Q8, V.V1_1), (_F16, V.V1_2), (_Q8S, V.V1_3)],
    Op.REDUCE_ALL: [(_B8, V.V1_2)],
    Op.REDUCE_ANY: [(_B8, V.V1_2)],
    Op.REDUCE_MAX: [(_F32, V.V1_2), (_F16, V.V1_2), (_Q8, V.V1_2), (_Q8S, V.V1_3)],
    Op.REDUCE_MIN: [(_F32, V.V1_2), (_F16, V.V1_2), (_Q8, V.V1_2), (_Q8S, V.V1_3)],
    Op.REDUCE_PROD: [(_F32, V.V1_2), (_F16, V.V1_2)],
    Op.REDUCE_SUM: [(_F32, V.V1_2), (_F16, V.V1_2)],
}

for _op, _types in _TYPES.items():
    _keep = T.INT32 if _op == Op.MEAN else T.BOOL  # MEAN predates the BOOL operand type
    register(OpSpec(_op, [sig([_t, T.TENSOR_INT32, _keep], [_t], _v) for _t, _v in _types],
                    _reference(_op), validate=_validate))
