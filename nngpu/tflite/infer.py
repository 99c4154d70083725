"""Output shapes of common TFLite operators from their input shapes, for the rewrite pass.

A tensor the converter saw as dynamic (shape_signature -1) holds a placeholder 1 in its stored
shape. Once the model's inputs are fixed, its real extents follow from its producer's inputs:
infer_shape gives them for the operators shape computations usually run through (the rest:
None, and the tensor's shape stays unknown to SHAPE folding)."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .reader import Operator, Tensor

Rule = Callable[[Operator, list[Tensor]], list[int] | None]

_SAME_SHAPE = frozenset({
    "RELU", "RELU6", "RELU_N1_TO_1", "RELU_0_TO_1", "LOGISTIC", "TANH", "HARD_SWISH", "ELU", "GELU", "LEAKY_RELU",
    "SOFTMAX", "LOG_SOFTMAX", "QUANTIZE", "DEQUANTIZE", "CAST", "EXP", "LOG", "SQRT", "RSQRT", "ABS", "NEG",
    "SIN", "FLOOR", "CEIL", "SQUARE", "L2_NORMALIZATION", "LOCAL_RESPONSE_NORMALIZATION", "PRELU",
    "LOGICAL_NOT", "ZEROS_LIKE"})
_BROADCAST = frozenset({
    "ADD", "SUB", "MUL", "DIV", "MAXIMUM", "MINIMUM", "POW", "SQUARED_DIFFERENCE", "FLOOR_DIV", "LESS",
    "LESS_EQUAL", "GREATER", "GREATER_EQUAL", "EQUAL", "NOT_EQUAL", "LOGICAL_AND", "LOGICAL_OR", "SELECT_V2"})


def _fully_connected(op: Operator, ts: list[Tensor]) -> list[int] | None:
    x, w = ts[0].shape, ts[1].shape
    if len(w) != 2 or not w[1]:
        return None
    if op.options is not None and op.options.KeepNumDims():
        return x[:-1] + [w[0]]
    return [int(np.prod(x, dtype=np.int64)) // w[1], w[0]]


def _concatenation(op: Operator, ts: list[Tensor]) -> list[int] | None:
    shape = list(ts[0].shape)
    a = int(op.options.Axis()) % len(shape)
    shape[a] = sum(t.shape[a] for t in ts)
    return shape


def _reduce(op: Operator, ts: list[Tensor]) -> list[int] | None:
    if ts[1].data is None:
        return None
    rank = len(ts[0].shape)
    axes = {int(a) % rank for a in ts[1].data.reshape(-1)}
    keep = bool(op.options.KeepDims()) if op.options is not None else False
    return [1 if d in axes else n for d, n in enumerate(ts[0].shape) if keep or d not in axes]


def _transpose(op: Operator, ts: list[Tensor]) -> list[int] | None:
    if ts[1].data is None:
        return None
    return [ts[0].shape[int(p)] for p in ts[1].data.reshape(-1)]


def _spatial(n: int, k: int, stride: int, dilation: int, same: bool) -> int:
    return -(-n // stride) if same else -(-(n - (k - 1) * dilation) // stride)


def _conv(op: Operator, ts: list[Tensor]) -> list[int] | None:
    o, x, w = op.options, ts[0].shape, ts[1].shape
    same = int(o.Padding()) == 0
    h = _spatial(x[1], w[1], int(o.StrideH()), int(o.DilationHFactor()), same)
    wd = _spatial(x[2], w[2], int(o.StrideW()), int(o.DilationWFactor()), same)
    return [x[0], h, wd, w[0] if op.name == "CONV_2D" else w[3]]


def _pool(op: Operator, ts: list[Tensor]) -> list[int] | None:
    o, x = op.options, ts[0].shape
    same = int(o.Padding()) == 0
    return [x[0], _spatial(x[1], int(o.FilterHeight()), int(o.StrideH()), 1, same),
            _spatial(x[2], int(o.FilterWidth()), int(o.StrideW()), 1, same), x[3]]


_RULES: dict[str, Rule] = {
    "FULLY_CONNECTED": _fully_connected, "CONCATENATION": _concatenation, "TRANSPOSE": _transpose,
    "MEAN": _reduce, "SUM": _reduce, "REDUCE_MAX": _reduce, "REDUCE_MIN": _reduce, "REDUCE_PROD": _reduce,
    "CONV_2D": _conv, "DEPTHWISE_CONV_2D": _conv,
    "AVERAGE_POOL_2D": _pool, "MAX_POOL_2D": _pool, "L2_POOL_2D": _pool,
}


def infer_shape(op: Operator, ts: list[Tensor]) -> list[int] | None:
    """The shape of op's (single) output from its inputs' shapes, or None when no rule knows it."""
    if not ts:
        return None
    try:
        if op.name in _SAME_SHAPE:
            return list(ts[0].shape)
        if op.name in _BROADCAST:
            return [int(d) for d in np.broadcast_shapes(*(tuple(t.shape) for t in ts))]
        rule = _RULES.get(op.name)
        return None if rule is None else rule(op, ts)
    except (ValueError, IndexError, ZeroDivisionError, AttributeError):
        return None
