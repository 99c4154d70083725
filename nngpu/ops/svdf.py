"""SVDF: rank-constrained stateful filter (feature filter, then time filter over a memory).

State layout as the reference: [batch, num_filters * memory_size], each filter's memory
contiguous, newest activation in the last slot. float16 is computed in float32.
"""
from __future__ import annotations

import numpy as np

from ..hal.types import FusedActivationFunc as Act
from ..hal.types import OperandType as T
from ..hal.types import OperationType
from .lib.quant import apply_activation_float
from .registry import HalVersion, OpContext, OpError, OpSpec, register, sig

_ACTS = {int(a) for a in (Act.NONE, Act.RELU, Act.RELU1, Act.RELU6)}


def _shape(node: OpContext) -> list[tuple[int, ...]]:
    """state out [batch, num_filters * memory_size] and output [batch, num_units]."""
    x, w_feat, w_time, state = (node.in_shape(i) for i in (0, 1, 2, 4))
    if any(len(s) != 2 for s in (x, w_feat, w_time, state)):
        raise OpError("SVDF tensors must be 2-D")
    rank = node.scalar(5)
    (batch, input_size), num_filters, memory = x, w_feat[0], w_time[1]
    if rank <= 0 or num_filters % rank:
        raise OpError("num_filters must be a positive multiple of rank")
    num_units = num_filters // rank
    if w_feat[1] != input_size or w_time[0] != num_filters:
        raise OpError("weights do not match the input")
    if state != (batch, memory * num_filters):
        raise OpError(f"state must have shape {[batch, memory * num_filters]}")
    if node.given(3) and node.in_shape(3) != (num_units,):
        raise OpError("bias must have shape [num_units]")
    return [(batch, memory * num_filters), (batch, num_units)]


def _reference(ctx: OpContext) -> list[np.ndarray]:
    _, (batch, num_units) = _shape(ctx)
    act = ctx.scalar(6)
    if act not in _ACTS:
        raise OpError(f"bad activation {act}")
    x = ctx.input(0).astype(np.float32)
    w_feat = ctx.input(1).astype(np.float32)
    w_time = ctx.input(2).astype(np.float32)
    state = ctx.input(4).astype(np.float32)
    bias = ctx.input(3).astype(np.float32) if ctx.has_input(3) else None
    num_filters, memory = w_time.shape
    rank = ctx.scalar(5)
    mem = state.reshape(batch, num_filters, memory).copy()
    mem[:, :, -1] = x @ w_feat.T                       # newest activation of each filter
    scratch = np.einsum("bfm,fm->bf", mem, w_time)     # time filtering
    out = scratch.reshape(batch, num_units, rank).sum(axis=2)
    if bias is not None:
        out = out + bias
    out = apply_activation_float(out.astype(np.float32), act)
    shifted = np.zeros_like(mem)
    shifted[:, :, :-1] = mem[:, :, 1:]                 # drop the oldest, free the newest slot
    return [shifted.reshape(batch, -1), out]


def _signatures():
    out = []
    for t, v in ((T.TENSOR_FLOAT32, HalVersion.V1_0), (T.TENSOR_FLOAT16, HalVersion.V1_2)):
        out.append(sig([t, t, t, t, t, T.INT32, T.INT32], [t, t], v))
    return out


register(OpSpec(OperationType.SVDF, _signatures(), _reference, shape=_shape))
