"""RANDOM_MULTINOMIAL: draws class indices from softmax(logits), per batch row.

The reference uses a Philox generator; only the sample distribution is specified (the corpus
checks class frequencies), so a seeded numpy generator is used. Seeds (0, 0) mean random.
"""
from __future__ import annotations

import math

import numpy as np

from ..hal.types import OperandType as T
from ..hal.types import OperationType
from .registry import HalVersion, OpContext, OpError, OpSpec, register, sig


def _shape(node: OpContext) -> list[tuple[int, ...]]:
    """[batches, num_samples] class indices."""
    logits, num_samples = node.in_shape(0), node.scalar(1)
    if len(logits) != 2:
        raise OpError("logits must be 2-D [batches, classes]")
    if num_samples < 0:
        raise OpError("sample count must be non-negative")
    if math.prod(node.in_shape(2)) != 2:
        raise OpError("seeds must have shape [2]")
    return [(logits[0], num_samples)]


def _reference(ctx: OpContext) -> list[np.ndarray]:
    (shape,) = _shape(ctx)
    logits = ctx.input(0).astype(np.float64)
    num_samples = ctx.scalar(1)
    seeds = ctx.input(2).reshape(-1)
    batches, classes = logits.shape
    if classes == 0 and batches and num_samples:
        raise OpError("no classes to draw from")
    seed_words = [int(s) & 0xFFFFFFFF for s in seeds]
    rng = np.random.default_rng(None if not any(seed_words) else seed_words)
    if batches == 0 or num_samples == 0:
        return [np.zeros(shape, dtype=np.int32)]
    shifted = logits - logits.max(axis=1, keepdims=True)
    probs = np.exp(shifted)
    cdf = np.cumsum(probs, axis=1)
    cdf /= cdf[:, -1:]
    u = rng.random((batches, num_samples))
    # per row, the first class whose cumulative probability exceeds u
    idx = np.stack([np.searchsorted(cdf[b], u[b], side="right") for b in range(batches)])
    return [np.minimum(idx, classes - 1).astype(np.int32)]


register(OpSpec(
    OperationType.RANDOM_MULTINOMIAL,
    [sig([t, T.INT32, T.TENSOR_INT32], [T.TENSOR_INT32], HalVersion.V1_2)
     for t in (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16)],
    _reference, shape=_shape, foldable=False))
