"""FULLY_CONNECTED: activation(input · weightsᵀ + bias) over an input reshaped to
[batch_size, input_size], input_size being the weights' second dimension.

Float inputs (float16 too) are computed in float32 like the reference. Quantized inputs are
accumulated exactly in float64 after removing zero points and requantized
with the reference's single multiplier (GetQuantizedConvolutionMultipler + QuantizeMultiplier).
"""
from __future__ import annotations

import numpy as np

from ..hal.types import OperationType as Op
from .conv_common import (
    F16,
    F32,
    I32,
    Q8,
    S8,
    TI32,
    build_signatures,
    check_activation,
    clip_activation,
    conv_requant_params,
    filter_scales,
    int_arg,
    is_quant,
    quant_scale_rule,
    requantize,
)
from .registry import HalVersion, OpContext, OpError, OpSpec, register

_CONFIGS = [
    ((F32, F32, F32), HalVersion.V1_0),
    ((Q8, Q8, TI32), HalVersion.V1_0),
    ((F16, F16, F16), HalVersion.V1_2),
    ((S8, S8, TI32), HalVersion.V1_3),
]


def _shapes(in_dims, w_dims, b_dims) -> tuple[int, int, int]:
    """(batch_size, input_size, num_units) per the reference's shape rules."""
    if not 2 <= len(in_dims) <= 4:
        raise OpError(f"input rank must be 2..4, got {len(in_dims)}")
    if len(w_dims) != 2 or len(b_dims) < 1:
        raise OpError("weights must be 2-D and bias at least 1-D")
    num_units, input_size = int(w_dims[0]), int(w_dims[1])
    if num_units <= 0 or input_size <= 0:
        raise OpError(f"weights shape {list(w_dims)} must be non-empty (only the batch may be zero)")
    # The spec says 1-D, but the corpus (while_fib) feeds a [num_units, 1] bias that the
    # reference accepts: take any bias holding exactly num_units values along dimension 0.
    if len(b_dims) > 1 and int(np.prod(b_dims[1:])) != 1:
        raise OpError(f"bias of shape {list(b_dims)} is not a vector")
    total = int(np.prod(in_dims))
    batch = total // input_size
    if total % input_size:
        raise OpError(f"{total} input elements do not split into rows of {input_size}")
    if b_dims[0] != num_units:
        raise OpError(f"bias length {b_dims[0]} != num_units {num_units}")
    return batch, input_size, num_units


def _reference(ctx: OpContext) -> list[np.ndarray]:
    x, w, b = ctx.input(0), ctx.input(1), ctx.input(2)
    act = check_activation(int_arg(ctx, 3))
    batch, input_size, num_units = _shapes(x.shape, w.shape, b.shape)
    in_op = ctx.in_operand(0)
    bias = b.reshape(-1)
    if is_quant(in_op.type):
        x2 = x.reshape(batch, input_size).astype(np.float64) - in_op.zeroPoint
        w2 = w.astype(np.float64) - ctx.in_operand(1).zeroPoint
        acc = np.rint(x2 @ w2.T).astype(np.int64) + bias.astype(np.int64)
        mults, shifts = conv_requant_params(ctx, filter_scales(ctx, 1, 0, 1), False)
        return [requantize(acc, mults, shifts, ctx, act)]
    # Float (float16 too) in float32 like the reference: one BLAS GEMM, no widening copies.
    x2 = x.reshape(batch, input_size).astype(np.float32, copy=False)
    y = x2 @ w.astype(np.float32, copy=False).T
    y += bias.astype(np.float32, copy=False)
    return [clip_activation(y, act)]


def _validate(ctx: OpContext) -> None:
    quant_scale_rule(ctx)
    dims = [ctx.in_operand(i).dimensions for i in range(3)]
    if dims[0] and not 2 <= len(dims[0]) <= 4:
        raise OpError(f"input rank must be 2..4, got {len(dims[0])}")
    if dims[1] and len(dims[1]) != 2:
        raise OpError("weights must be 2-D")
    if all(d and all(k > 0 for k in d) for d in dims):
        _shapes(*dims)
    if ctx.values[3] is not None:
        check_activation(int_arg(ctx, 3))


register(OpSpec(Op.FULLY_CONNECTED, build_signatures(_CONFIGS, [([I32], HalVersion.V1_0)]), _reference,
                _validate))
