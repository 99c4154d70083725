"""SVDF: rank-constrained stateful filter (feature filter, then time filter over a memory).

State layout as the reference: [batch, num_filters * memory_size], each filter's memory
contiguous, newest activation in the last slot. float16 is computed in float32.
"""
from __future__ import annotations

import numpy as np

from ..hal.types import FusedActivationFunc as Act
from ..hal.types import OperandType as T
from ..hal.types import OperationType
from .quant import apply_activation_float
from .registry import HalVersion, OpContext, OpError, OpSpec, register, sig

_ACTS = {int(a) for a in (Act.NONE, Act.RELU, Act.RELU1, Act.RELU6)}


def _reference(ctx: OpContext) -> list[np.ndarray]:
    x = ctx.input(0).astype(np.float32)
    w_feat = ctx.input(1).astype(np.float32)
    w_time = ctx.input(2).astype(np.float32)
    state = ctx.input(4).astype(np.float32)
    rank = ctx.scalar(5)
    act = ctx.scalar(6)
    if x.ndim != 2 or w_feat.ndim != 2 or w_time.ndim != 2 or state.ndim != 2:
        raise OpError("SVDF tensors must be 2-D")
    if act not in _ACTS:
        raise OpError(f"bad activation {act}")
    batch, input_size = x.shape
    num_filters = w_feat.shape[0]
    if rank <= 0 or num_filters % rank:
        raise OpError("num_filters must be a positive multiple of rank")
    num_units = num_filters // rank
    memory = w_time.shape[1]
    if w_feat.shape[1] != input_size or w_time.shape[0] != num_filters:
        raise OpError("weights do not match the input")
    if state.shape != (batch, memory * num_filters):
        raise OpError(f"state must have shape {[batch, memory * num_filters]}")
    bias = None
    if ctx.has_input(3):
        bias = ctx.input(3).astype(np.float32)
        if bias.shape != (num_units,):
            raise OpError("bias must have shape [num_units]")
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


register(OpSpec(OperationType.SVDF, _signatures(), _reference))
