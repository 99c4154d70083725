"""Shape-only operations: RESHAPE, SQUEEZE, EXPAND_DIMS (the data is unchanged), RANK, FILL.
RESHAPE of TENSOR_INT32 is new in NNAPI feature level 6 (AIDL HAL version 2)."""
from __future__ import annotations

import numpy as np

from ..hal.types import OperandType as T
from ..hal.types import OperationType as Op
from .lib.layout import CORE4, CORE4_I32, V, check_rank, check_shape_rank, int_vector, rules, typed
from .registry import Alias, Kernel, OpContext, OpError, OpSpec, Pattern, RankLimit, register, sig


def resolve_shape(n_elements: int, shape: np.ndarray) -> tuple[int, ...]:
    """RESHAPE's target shape with its (at most one) -1 entry filled in."""
    stretch = np.flatnonzero(shape == -1)
    if len(stretch) > 1:
        raise OpError("more than one -1 in the new shape")
    if np.any((shape < 0) & (shape != -1)):
        raise OpError(f"negative extent in new shape {shape.tolist()}")
    dims = [int(d) for d in shape]
    if len(stretch):
        known = int(np.prod([d for d in dims if d != -1], dtype=np.int64))
        if known == 0 or n_elements % known:
            raise OpError(f"cannot infer -1 in {dims} for {n_elements} elements")
        dims[int(stretch[0])] = n_elements // known
    if int(np.prod(dims, dtype=np.int64)) != n_elements:
        raise OpError(f"new shape {dims} does not hold {n_elements} elements")
    return tuple(dims)


def _reshape_shape(node: OpContext) -> list[tuple[int, ...]]:
    n = int(np.prod(node.in_shape(0), dtype=np.int64))
    dims = resolve_shape(n, int_vector(node, 1, what="shape"))
    if len(dims) > 4:
        raise RankLimit(f"output rank {len(dims)} above 4")
    return [dims]


def _reshape(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.input(0)
    check_rank(x)
    return [x.reshape(_reshape_shape(ctx)[0])]


def _squeeze_shape(node: OpContext) -> list[tuple[int, ...]]:
    shape = node.in_shape(0)
    if not node.is_omitted(1):
        axes = set()
        for a in int_vector(node, 1, what="squeeze axes"):
            a = int(a) + len(shape) if a < 0 else int(a)
            if not 0 <= a < len(shape) or shape[a] != 1:
                raise OpError(f"cannot squeeze axis {a} of shape {list(shape)}")
            axes.add(a)
    else:
        axes = {a for a, d in enumerate(shape) if d == 1}
    dims = [d for a, d in enumerate(shape) if a not in axes]
    return [tuple(dims or [1])]  # the spec: squeezing every dimension gives shape [1]


def _squeeze(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.input(0)
    check_rank(x)
    return [x.reshape(_squeeze_shape(ctx)[0])]


def _expand_axis(ctx: OpContext, rank: int) -> int:
    axis = int(ctx.scalar(1))
    if not -(rank + 1) <= axis < rank + 1:
        raise OpError(f"axis {axis} outside [-{rank + 1}, {rank + 1})")
    return axis if axis >= 0 else axis + rank + 1


def _expand_dims_shape(node: OpContext) -> list[tuple[int, ...]]:
    shape = node.in_shape(0)
    axis = _expand_axis(node, len(shape))
    return [shape[:axis] + (1,) + shape[axis:]]


def _expand_dims(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.input(0)
    return [np.expand_dims(x, _expand_axis(ctx, x.ndim))]


def _rank(ctx: OpContext) -> list[np.ndarray]:
    return [np.asarray(ctx.input(0).ndim, dtype=np.int32)]


def _fill_shape(node: OpContext) -> list[tuple[int, ...]]:
    dims = int_vector(node, 0, what="shape")
    if np.any(dims < 0):
        raise OpError(f"negative extent in shape {dims.tolist()}")
    return [tuple(int(d) for d in dims)]


def _fill(ctx: OpContext) -> list[np.ndarray]:
    return [np.full(_fill_shape(ctx)[0], ctx.input(1).reshape(()))]


def _view_bind(node) -> Kernel:
    """The numpy plan's RESHAPE / SQUEEZE: the input viewed in the output's static shape."""
    check_shape_rank(node.in_shape(0), 0, 4, "input")
    shape = node.out_shape(0)
    return lambda ins, outs: [ins[0].reshape(shape)]


_RESHAPE_TYPES = CORE4 + ((T.TENSOR_INT32, V.AIDL_V2),)
for _op, _ref, _shape, _types, _since in ((Op.RESHAPE, _reshape, _reshape_shape, _RESHAPE_TYPES, V.V1_0),
                                          (Op.SQUEEZE, _squeeze, _squeeze_shape, CORE4, V.V1_1)):
    register(OpSpec(_op, [sig([t, T.TENSOR_INT32], [t], v) for t, v in typed(_types, _since)], _ref, rules(),
                    shape=_shape, pattern=Pattern.INJECTIVE, bind=_view_bind, alias=Alias.VIEW))

register(OpSpec(Op.EXPAND_DIMS, [sig([t, T.INT32], [t], v) for t, v in typed(CORE4_I32, V.V1_2)],
                _expand_dims, rules(max_rank=None, min_rank=1), shape=_expand_dims_shape,
                pattern=Pattern.INJECTIVE, alias=Alias.VIEW))

_RANK_TYPES = (T.TENSOR_FLOAT16, T.TENSOR_FLOAT32, T.TENSOR_INT32, T.TENSOR_QUANT8_ASYMM,
               T.TENSOR_QUANT16_SYMM, T.TENSOR_BOOL8, T.TENSOR_QUANT8_SYMM_PER_CHANNEL,
               T.TENSOR_QUANT16_ASYMM, T.TENSOR_QUANT8_SYMM, T.TENSOR_QUANT8_ASYMM_SIGNED)
register(OpSpec(Op.RANK, [sig([t], [T.INT32], V.V1_3) for t in _RANK_TYPES], _rank, shape=lambda node: [()]))

_FILL_TYPES = ((T.TENSOR_FLOAT16, T.FLOAT16), (T.TENSOR_FLOAT32, T.FLOAT32), (T.TENSOR_INT32, T.INT32))
register(OpSpec(Op.FILL, [sig([T.TENSOR_INT32, s], [t], V.V1_3) for t, s in _FILL_TYPES], _fill, shape=_fill_shape))
