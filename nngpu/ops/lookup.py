"""Table lookups: EMBEDDING_LOOKUP (rows by index) and HASHTABLE_LOOKUP (rows by sorted key)."""
from __future__ import annotations

import numpy as np

from ..hal.types import OperandType as T
from ..hal.types import OperationType as Op
from .lib.layout import V, same_quant
from .registry import OpContext, OpError, OpSpec, register, sig


def _rows(node: OpContext, lookups: int, values: int) -> tuple[int, ...]:
    """The shape of the rows picked: one row of `values` (rank 2 or more) per entry of the 1-D
    `lookups`."""
    n, table = node.in_shape(lookups), node.in_shape(values)
    if len(n) != 1:
        raise OpError(f"lookups must be 1-D, has rank {len(n)}")
    if len(table) < 2:
        raise OpError(f"values must have rank 2 or more, has {len(table)}")
    return n + table[1:]


def _embedding_shape(node: OpContext) -> list[tuple[int, ...]]:
    return [_rows(node, 0, 1)]


def _embedding_lookup(ctx: OpContext) -> list[np.ndarray]:
    _embedding_shape(ctx)
    lookups, values = ctx.input(0).astype(np.int64), ctx.input(1)
    if lookups.size and (lookups.min() < 0 or lookups.max() >= values.shape[0]):
        raise OpError(f"lookup index out of [0, {values.shape[0]})")
    return [values[lookups]]


def _hashtable_shape(node: OpContext) -> list[tuple[int, ...]]:
    """the rows found [n, ...] and the hits [n]."""
    rows, keys = _rows(node, 0, 2), node.in_shape(1)
    if len(keys) != 1:
        raise OpError(f"keys must be 1-D, has rank {len(keys)}")
    if keys[0] != node.in_shape(2)[0]:
        raise OpError(f"{keys[0]} keys for {node.in_shape(2)[0]} value rows")
    return [rows, rows[:1]]


def _hashtable_lookup(ctx: OpContext) -> list[np.ndarray]:
    shape, _ = _hashtable_shape(ctx)
    lookups, keys, values = ctx.input(0).astype(np.int64), ctx.input(1).astype(np.int64), ctx.input(2)
    # Keys are sorted ascending (the reference binary-searches them); a miss gives a zero row.
    pos = np.minimum(np.searchsorted(keys, lookups), max(keys.shape[0] - 1, 0))
    hit = (keys[pos] == lookups) if keys.size else np.zeros(lookups.shape, dtype=bool)
    out = np.zeros(shape, dtype=values.dtype)
    out[hit] = values[pos[hit]]
    return [out, hit.astype(np.uint8)]


def _validate_embedding(ctx: OpContext) -> None:
    same_quant(ctx, 1, 0)


def _validate_hashtable(ctx: OpContext) -> None:
    same_quant(ctx, 2, 0)
    hits = ctx.out_operand(1)
    if hits.scale != 1.0 or hits.zeroPoint != 0:
        raise OpError("hits output must have scale 1 and zeroPoint 0")


_EMBEDDING_TYPES = ((T.TENSOR_FLOAT32, V.V1_0), (T.TENSOR_INT32, V.V1_2), (T.TENSOR_QUANT8_ASYMM, V.V1_2),
                    (T.TENSOR_FLOAT16, V.V1_3), (T.TENSOR_QUANT8_ASYMM_SIGNED, V.V1_3))
register(OpSpec(Op.EMBEDDING_LOOKUP, [sig([T.TENSOR_INT32, t], [t], v) for t, v in _EMBEDDING_TYPES],
                _embedding_lookup, _validate_embedding, shape=_embedding_shape))

register(OpSpec(Op.HASHTABLE_LOOKUP,
                [sig([T.TENSOR_INT32, T.TENSOR_INT32, t], [t, T.TENSOR_QUANT8_ASYMM], V.V1_0)
                 for t in (T.TENSOR_FLOAT32, T.TENSOR_INT32, T.TENSOR_QUANT8_ASYMM)],
                _hashtable_lookup, _validate_hashtable, shape=_hashtable_shape))
