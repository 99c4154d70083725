"""FULLY_CONNECTED: activation(input · weightsᵀ + bias) over an input reshaped to
[batch_size, input_size], input_size being the weights' second dimension.

Float inputs (float16 too) are computed in float32 like the reference. Quantized inputs are
accumulated exactly in float64 after removing zero points and requantized
with the reference's single multiplier (GetQuantizedConvolutionMultipler + QuantizeMultiplier);
the numpy plan makes the float64 weights and the multiplier once, at prepare (_bind).
"""
from __future__ import annotations

import numpy as np

from ..hal.types import OperationType as Op
from ..ir import Acc, BufferTensor, Compute, Const, Coords, Expr, Loop, Reduce, Stored, Var
from .lib.conv_common import (
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
    requantize_device,
)
from .lib.conv_kernels import bound_quant_layer
from .lib.device import activation, floats, gemm_epilogue
from .node import OpNode
from .registry import HalVersion, Kernel, OpContext, OpError, OpSpec, Pattern, register

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


def _shape(ctx: OpContext) -> list[tuple[int, ...]]:
    batch, _, units = _shapes(ctx.in_shape(0), ctx.in_shape(1), ctx.in_shape(2))
    return [(batch, units)]


def _bind(node: OpNode) -> Kernel | None:
    """The numpy plan's quantized layer with constant weights and bias: the weights transposed
    in float64 with their zero point removed, and the requantization multiplier, made once."""
    in_op = node.in_operand(0)
    if not is_quant(in_op.type) or not (node.is_constant(1) and node.is_constant(2) and node.is_constant(3)):
        return None
    batch, k, _ = _shapes(node.in_shape(0), node.in_shape(1), node.in_shape(2))
    layer = bound_quant_layer(node, 0, check_activation(int_arg(node, 3)))
    if layer is None:              # a sum of products past float64's exact integers
        return None
    weights, epilogue = layer
    wt = np.ascontiguousarray(weights.T)

    def kernel(ins, outs: list[np.ndarray]) -> list[np.ndarray]:
        x = ins[0].reshape(batch, k).astype(wt.dtype)
        x -= in_op.zeroPoint
        epilogue(x @ wt, outs[0])
        return outs
    return kernel


SPEC = register(OpSpec(Op.FULLY_CONNECTED, build_signatures(_CONFIGS, [([I32], HalVersion.V1_0)]), _reference,
                       _validate, shape=_shape, pattern=Pattern.REDUCTION, bind=_bind))


def _dot(node: OpNode, x, w_at, init, cast, dtype: str) -> Compute:
    """out[b, u] = init(u) + sum over k of cast(x[b, k]) * w_at(k, u), in `dtype`."""
    batch, k, units = _shapes(node.in_shape(0), node.in_shape(1), node.in_shape(2))

    def value(c: Coords) -> Expr:
        kv = Var("k", "int")
        body = cast(x.at(c[0] * k + kv)) * w_at(kv, c[1])
        return Reduce([Loop(kv, k)], [Acc(init(c[1]), body, lambda a, v: a + v)])

    return Compute((batch, units), dtype, value)


def _weights(node: OpNode, w, prepare):
    """(k, u) -> the weight: a constant matrix is copied as [K, units] (`prepare` gives its
    values and type), so neighbouring threads (units) read neighbouring weights."""
    if node.known(1):
        values, operand_type = prepare(node.input(1))
        wt = node.constant(np.ascontiguousarray(values.T), operand_type)
        return lambda kv, u: wt.load(Coords(wt.shape, [kv, u]))
    return lambda kv, u: w.load(Coords(w.shape, [u, kv]))


@SPEC.device(floats(0, 1, 2))
def _float_fully_connected(node: OpNode, ins: list) -> Compute | Stored:
    x, w, b = ins[:3]
    act = check_activation(int_arg(node, 3))
    batch, k, units = _shapes(node.in_shape(0), node.in_shape(1), node.in_shape(2))
    bias = lambda u: b.at(u)  # noqa: E731
    # from the target's threshold on, as a convolution (OpenCL's vector GEMM reads a 1280 x 1000
    # classifier in a quarter of the generated dot products' time on PoCL)
    if node.known(1) and node.in_operand(0).type == F32 and batch * units * k >= node.gemm_min_work():
        w = node.constant(node.input(1), F32)  # [units, k]: B transposed, read in place
        a = x if isinstance(x, BufferTensor) else node.materialize(x, "input", values=True)
        product = node.gemm(a, w, batch, units, k, b_transposed=True, epilogue=gemm_epilogue(b, act))
        if isinstance(product, Stored):
            return product
        return Compute((batch, units), "float", lambda c: activation(product.at(c.flat_in((batch, units))) + bias(c[1]), act))
    dot = _dot(node, x, _weights(node, w, lambda v: (v, node.in_operand(1).type)), bias, lambda v: v, "float")
    return Compute(dot.shape, "float", lambda c: activation(dot.load(c), act))


def _quantized(node: OpNode) -> bool:
    t = node.in_operand(0).type
    return t in (Q8, S8) and node.in_operand(1).type == t


@SPEC.device(_quantized)
def _quant_fully_connected(node: OpNode, ins: list) -> Compute:
    x, w, b = ins[:3]
    act = check_activation(int_arg(node, 3))
    _, k, _ = _shapes(node.in_shape(0), node.in_shape(1), node.in_shape(2))
    zx, zw = node.in_operand(0).zeroPoint, node.in_operand(1).zeroPoint
    mults, shifts = conv_requant_params(node, filter_scales(node, 1, 0, 1), False)
    acc = "int" if k * 255 * 255 < 1 << 31 else "long"
    w_at = _weights(node, w, lambda v: (v.astype(np.int32) - zw, TI32))
    if not node.known(1):
        raw = w_at
        w_at = lambda kv, u: raw(kv, u) - zw  # noqa: E731
    dot = _dot(node, x, lambda kv, u: w_at(kv, u).cast(acc), lambda u: Const(0, acc), lambda v: (v - zx).cast(acc),
               acc)
    return Compute(dot.shape, "int", lambda c: requantize_device(dot.load(c).cast("long") + b.at(c[1]), int(mults[0]),
                                                                 int(shifts[0]), node, act))
