"""CONV_2D, DEPTHWISE_CONV_2D, GROUPED_CONV_2D and TRANSPOSE_CONV_2D.

Kernels work in NHWC on strided views: conv is im2col + GEMM (1x1 is one plain GEMM), grouped
conv a batched GEMM, depthwise one multiply-accumulate per filter tap. Float tensors (float16
too) are computed in float32 like the reference; quantized inputs have their zero points removed
and are accumulated exactly in float64 (sums of 8-bit products stay far below 2^53), then
requantized per output channel like the reference. Transpose conv scatters each input pixel's
filter-shaped contribution, one strided add per filter tap.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..hal.types import OperationType as Op
from .conv_common import (
    BOOL,
    CONV_TENSOR_CONFIGS,
    I32,
    PC,
    TI32,
    Padding,
    Window,
    bool_arg,
    build_signatures,
    check_activation,
    check_explicit_pads,
    check_steps,
    check_padding_below_filter,
    clip_activation,
    compute_dtype,
    conv_requant_params,
    filter_scales,
    from_nhwc,
    implicit_padding,
    int_arg,
    is_bool_at,
    is_quant,
    optional_forms,
    output_hw,
    pad_nhwc,
    quant_scale_rule,
    read_padding,
    requantize,
    resolve_window,
    to_nhwc,
    window_view,
)
from .registry import HalVersion, OpContext, OpError, OpSpec, register


@dataclass
class ConvParams:
    pad: Padding
    stride_w: int
    stride_h: int
    activation: int
    nchw: bool
    dil_w: int = 1
    dil_h: int = 1
    groups: int = 1          # GROUPED_CONV_2D
    multiplier: int = 1      # DEPTHWISE_CONV_2D


# --- parameter parsing (input positions per the spec) ---------------------------------------

def _checked(p: ConvParams, transpose: bool = False) -> ConvParams:
    """Value rules that need no shapes, so validation can apply them to constant scalars."""
    check_steps(p.stride_h, p.stride_w, p.dil_h, p.dil_w)
    check_explicit_pads(p.pad, allow_negative_tail=transpose)
    return p


def _conv_params(ctx: OpContext) -> ConvParams:
    explicit = not (ctx.num_inputs == 7 or is_bool_at(ctx, 7))
    pad, k = read_padding(ctx, 3, explicit)
    return _checked(ConvParams(pad, int_arg(ctx, k), int_arg(ctx, k + 1), check_activation(int_arg(ctx, k + 2)),
                               bool_arg(ctx, k + 3), int_arg(ctx, k + 4, 1), int_arg(ctx, k + 5, 1)))


def _depthwise_params(ctx: OpContext) -> ConvParams:
    explicit = not (ctx.num_inputs == 8 or is_bool_at(ctx, 8))
    pad, k = read_padding(ctx, 3, explicit)
    p = ConvParams(pad, int_arg(ctx, k), int_arg(ctx, k + 1), check_activation(int_arg(ctx, k + 3)),
                   bool_arg(ctx, k + 4), int_arg(ctx, k + 5, 1), int_arg(ctx, k + 6, 1))
    p.multiplier = int_arg(ctx, k + 2)
    if p.multiplier <= 0:
        raise OpError(f"depth multiplier must be positive, got {p.multiplier}")
    return _checked(p)


def _grouped_params(ctx: OpContext) -> ConvParams:
    pad, k = read_padding(ctx, 3, ctx.num_inputs != 9)
    p = ConvParams(pad, int_arg(ctx, k), int_arg(ctx, k + 1), check_activation(int_arg(ctx, k + 3)),
                   bool_arg(ctx, k + 4))
    p.groups = int_arg(ctx, k + 2)
    if p.groups <= 0:
        raise OpError(f"number of groups must be positive, got {p.groups}")
    return _checked(p)


def _transpose_params(ctx: OpContext) -> ConvParams:
    implicit = ctx.num_inputs == 9
    pad, k = read_padding(ctx, 4 if implicit else 3, not implicit)
    return _checked(ConvParams(pad, int_arg(ctx, k), int_arg(ctx, k + 1), check_activation(int_arg(ctx, k + 2)),
                               bool_arg(ctx, k + 3)), transpose=True)


# --- the forward kernels ----------------------------------------------------------------------

# Largest im2col matrix built at once; bigger layers run in blocks of output rows so the copy
# stays cache- and memory-friendly.
_IM2COL_BYTES = 32 << 20
# Output block of the depthwise tap loop: small enough to stay in L2 across all taps.
_DW_BLOCK_BYTES = 128 << 10
# From this many (repeated) channels on, depthwise runs as one einsum over the window view,
# which measured faster than the tap loop there (and slower below).
_DW_EINSUM_CHANNELS = 64


def _operands(ctx: OpContext, nchw: bool):
    """NHWC input and filter in the compute dtype (zero points removed when quantized), plus bias."""
    x = to_nhwc(ctx.input(0), nchw)
    f = ctx.input(1)
    b = ctx.input(2)
    if f.ndim != 4 or b.ndim != 1:
        raise OpError(f"filter must be 4-D and bias 1-D, got ranks {f.ndim} and {b.ndim}")
    in_op, f_op = ctx.in_operand(0), ctx.in_operand(1)
    dtype = compute_dtype(in_op.type)
    xq = x.astype(dtype, copy=False)
    fq = f.astype(dtype, copy=False)
    if is_quant(in_op.type):
        xq = xq - in_op.zeroPoint           # padding added later is then the zero point
        if f_op.type != PC:
            fq = fq - f_op.zeroPoint
    return xq, fq, b


def _depthwise_forward(x: np.ndarray, f: np.ndarray, mult: int, win: Window, oh: int, ow: int) -> np.ndarray:
    """x [N,H,W,C], f [1,KH,KW,C*M] -> [N,OH,OW,C*M]: one multiply-accumulate of a shifted view
    per filter tap (for wide layers one einsum instead). Output channel c*M+m reads input c, so
    repeating each input channel M times reduces every multiplier to 1. W and C are merged into
    one contiguous axis (the filter tap tiled along it) so numpy's inner loops run long, and the
    output is done in blocks of rows that stay in cache across the taps."""
    if mult > 1:
        x = np.repeat(x, mult, axis=3)
    n, _, _, c = x.shape
    kh, kw = f.shape[1], f.shape[2]
    sh, sw = win.stride_h, win.stride_w
    xp = pad_nhwc(x, win)
    if c >= _DW_EINSUM_CHANNELS:
        # Wide layers: einsum's channel-contiguous inner loop over the window view wins.
        return np.einsum("nhwijc,ijc->nhwc", window_view(xp, win, kh, kw, oh, ow), f.reshape(kh, kw, c))
    # Column phases of the stride: tap j reads phase (j*dil) % sw from column (j*dil) // sw on.
    phases: dict[int, np.ndarray] = {}
    for j in range(kw):
        q = (j * win.dil_w) % sw
        if q not in phases:
            ph = np.ascontiguousarray(xp[:, :, q::sw, :])
            phases[q] = ph.reshape(n, ph.shape[1], ph.shape[2] * c)
    taps = np.tile(f.reshape(kh, kw, c), (1, 1, ow))           # [KH,KW,OW*C]
    acc = np.empty((n, oh, ow * c), dtype=x.dtype)
    rows = max(1, min(oh, _DW_BLOCK_BYTES // (ow * c * x.itemsize)))
    tmp = np.empty((rows, ow * c), dtype=x.dtype)
    for b in range(n):
        for r in range(0, oh, rows):
            r1 = min(oh, r + rows)
            out, t = acc[b, r:r1], tmp[:r1 - r]
            for i in range(kh):
                r0 = r * sh + i * win.dil_h
                for j in range(kw):
                    c0 = (j * win.dil_w) // sw * c
                    v = phases[(j * win.dil_w) % sw][b, r0:r0 + (r1 - r - 1) * sh + 1:sh, c0:c0 + ow * c]
                    if i == 0 and j == 0:
                        np.multiply(v, taps[i, j], out=out)
                    else:
                        np.multiply(v, taps[i, j], out=t)
                        out += t
    return acc.reshape(n, oh, ow, c)


def _conv_forward(x: np.ndarray, f: np.ndarray, win: Window, oh: int, ow: int) -> np.ndarray:
    """x [N,H,W,Cin], f [Cout,KH,KW,Cin] -> [N,OH,OW,Cout] as im2col + one GEMM per block."""
    n, _, _, cin = x.shape
    cout, kh, kw, _ = f.shape
    k = kh * kw * cin
    w = f.reshape(cout, k).T                                    # BLAS takes the transpose as is
    if kh == 1 and kw == 1:                                     # pads are 0 (< filter size)
        xs = x[:, ::win.stride_h, ::win.stride_w, :]
        return (xs.reshape(n * oh * ow, cin) @ w).reshape(n, oh, ow, cout)
    view = window_view(pad_nhwc(x, win), win, kh, kw, oh, ow)   # [N,OH,OW,KH,KW,Cin], no copy
    acc = np.empty((n, oh, ow, cout), dtype=x.dtype)
    rows = max(1, min(oh, _IM2COL_BYTES // max(1, ow * k * x.itemsize)))
    for b in range(n):
        for r in range(0, oh, rows):
            r1 = min(oh, r + rows)
            cols = view[b, r:r1].reshape((r1 - r) * ow, k)      # the one im2col copy
            np.matmul(cols, w, out=acc[b, r:r1].reshape((r1 - r) * ow, cout))
    return acc


def _grouped_forward(x: np.ndarray, f: np.ndarray, groups: int, win: Window, oh: int, ow: int) -> np.ndarray:
    """x [N,H,W,G*Cg], f [Cout,KH,KW,Cg] (Cout = G*Cog) -> [N,OH,OW,Cout], one batched GEMM."""
    if groups == 1:
        return _conv_forward(x, f, win, oh, ow)
    n = x.shape[0]
    cout, kh, kw, cg = f.shape
    m = n * oh * ow
    view = window_view(pad_nhwc(x, win), win, kh, kw, oh, ow).reshape(n, oh, ow, kh, kw, groups, cg)
    p = view.transpose(5, 0, 1, 2, 3, 4, 6).reshape(groups, m, kh * kw * cg)   # the one im2col copy
    w = f.reshape(groups, cout // groups, kh * kw * cg).transpose(0, 2, 1)
    y = np.matmul(p, w)                                         # [G, M, Cog]
    return y.transpose(1, 0, 2).reshape(n, oh, ow, cout)


def _finish(ctx: OpContext, acc: np.ndarray, bias: np.ndarray, activation: int,
            channel_dim: int, nchw: bool) -> list[np.ndarray]:
    """Bias, requantization / activation, layout back. `acc` is the kernel's own buffer."""
    in_type = ctx.in_operand(0).type
    cout = acc.shape[-1]
    if is_quant(in_type):
        per_channel = ctx.in_operand(1).type == PC
        mults, shifts = conv_requant_params(ctx, filter_scales(ctx, 1, channel_dim, cout), per_channel)
        total = np.rint(acc).astype(np.int64) + bias.astype(np.int64)
        y = requantize(total, mults, shifts, ctx, activation)
    else:
        y = np.add(acc, bias.astype(acc.dtype, copy=False), out=acc)
        clip_activation(y, activation)
    return [from_nhwc(y, nchw)]


def _forward(ctx: OpContext, p: ConvParams, kind: str) -> list[np.ndarray]:
    channel_dim = 3 if kind == "depthwise" else 0
    x, f, b = _operands(ctx, p.nchw)
    n, h, w, cin = x.shape
    if kind == "depthwise":
        if f.shape[0] != 1:
            raise OpError(f"depthwise filter must have first dimension 1, got {f.shape[0]}")
        cout = f.shape[3]
        if p.multiplier * cin != cout:
            raise OpError(f"depth_out {cout} != depth_in {cin} * multiplier {p.multiplier}")
        groups = cin
    elif kind == "grouped":
        groups = p.groups
        cout = f.shape[0]
        if f.shape[3] * groups != cin or cout % groups:
            raise OpError(f"filter {list(f.shape)} does not split input depth {cin} into {groups} groups")
    else:
        groups = 1
        cout = f.shape[0]
        if f.shape[3] != cin:
            raise OpError(f"filter depth {f.shape[3]} != input depth {cin}")
    if b.shape[0] != cout:
        raise OpError(f"bias length {b.shape[0]} != output depth {cout}")
    if h <= 0 or w <= 0 or cin <= 0 or cout <= 0:
        raise OpError("only the batch dimension may be zero")
    kh, kw = f.shape[1], f.shape[2]
    if kh <= 0 or kw <= 0:
        raise OpError("filter spatial size must be positive")
    win = resolve_window(p.pad, h, w, kh, kw, p.stride_h, p.stride_w, p.dil_h, p.dil_w)
    check_padding_below_filter(win, kh, kw)
    oh, ow = output_hw(win, h, w, kh, kw)
    if kind == "depthwise":
        acc = _depthwise_forward(x, f, p.multiplier, win, oh, ow)
    else:
        acc = _grouped_forward(x, f, groups, win, oh, ow)
    return _finish(ctx, acc, b, p.activation, channel_dim, p.nchw)


def _conv_ref(ctx: OpContext) -> list[np.ndarray]:
    return _forward(ctx, _conv_params(ctx), "conv")


def _depthwise_ref(ctx: OpContext) -> list[np.ndarray]:
    return _forward(ctx, _depthwise_params(ctx), "depthwise")


def _grouped_ref(ctx: OpContext) -> list[np.ndarray]:
    return _forward(ctx, _grouped_params(ctx), "grouped")


# --- transpose convolution --------------------------------------------------------------------

def _transpose_ref(ctx: OpContext) -> list[np.ndarray]:
    p = _transpose_params(ctx)
    x, f, b = _operands(ctx, p.nchw)
    n, h, w, cin = x.shape
    cout, kh, kw = f.shape[0], f.shape[1], f.shape[2]
    if f.shape[3] != cin or b.shape[0] != cout:
        raise OpError(f"filter {list(f.shape)} / bias {list(b.shape)} do not match input depth {cin}")
    if h <= 0 or w <= 0 or cin <= 0 or cout <= 0 or kh <= 0 or kw <= 0:
        raise OpError("only the batch dimension may be zero")
    if p.stride_h <= 0 or p.stride_w <= 0:
        raise OpError("strides must be positive")
    if p.pad.code is not None:
        shape = np.asarray(ctx.input(3)).reshape(-1)
        if shape.size != 4:
            raise OpError(f"output shape tensor must have 4 elements, got {shape.size}")
        req_h, req_w = (int(shape[2]), int(shape[3])) if p.nchw else (int(shape[1]), int(shape[2]))
        top, bottom = implicit_padding(req_h, p.stride_h, 1, kh, p.pad.code, transpose=True)
        left, right = implicit_padding(req_w, p.stride_w, 1, kw, p.pad.code, transpose=True)
    else:
        left, right, top, bottom = p.pad.left, p.pad.right, p.pad.top, p.pad.bottom
    # Tail pads may be negative (they resolve the stride > 1 ambiguity); heads may not.
    if left < 0 or top < 0:
        raise OpError("leading padding must be non-negative")
    oh = h * p.stride_h + kh - p.stride_h - top - bottom
    ow = w * p.stride_w + kw - p.stride_w - left - right
    if oh <= 0 or ow <= 0:
        raise OpError(f"output spatial size {oh}x{ow} is empty")
    full_h = max((h - 1) * p.stride_h + kh, top + oh)
    full_w = max((w - 1) * p.stride_w + kw, left + ow)
    # Each input pixel's [KH,KW,Cout] contribution in one GEMM, then one strided add per tap.
    wmat = f.transpose(1, 2, 0, 3).reshape(kh * kw * cout, cin)
    contrib = (x.reshape(n * h * w, cin) @ wmat.T).reshape(n, h, w, kh, kw, cout)
    buf = np.zeros((n, full_h, full_w, cout), dtype=x.dtype)
    for i in range(kh):
        for j in range(kw):
            buf[:, i:i + (h - 1) * p.stride_h + 1:p.stride_h,
                j:j + (w - 1) * p.stride_w + 1:p.stride_w, :] += contrib[:, :, :, i, j, :]
    acc = buf[:, top:top + oh, left:left + ow, :]
    return _finish(ctx, acc, b, p.activation, 0, p.nchw)


# --- validation -------------------------------------------------------------------------------

def _scalars_known(ctx: OpContext, first: int) -> bool:
    return all(ctx.values[i] is not None or ctx.is_omitted(i) for i in range(first, ctx.num_inputs))


def _make_validate(parse, channel_dim: int, scale_rule: bool):
    def validate(ctx: OpContext) -> None:
        f_op = ctx.in_operand(1)
        if f_op.type == PC:
            cq = f_op.extraParams.channelQuant if f_op.extraParams else None
            if cq is None or cq.channelDim != channel_dim:
                raise OpError(f"per-channel filter must use channelDim {channel_dim}")
            dims = f_op.dimensions
            if len(dims) == 4 and dims[channel_dim] and len(cq.scales) != dims[channel_dim]:
                raise OpError("per-channel scale count does not match the filter's channels")
        in_rank, f_rank = len(ctx.in_operand(0).dimensions), len(f_op.dimensions)
        if (in_rank and in_rank != 4) or (f_rank and f_rank != 4):
            raise OpError("input and filter must be 4-D")
        if channel_dim == 3 and f_rank == 4 and f_op.dimensions[0] not in (0, 1):
            raise OpError("depthwise filter must have first dimension 1")
        if scale_rule:
            quant_scale_rule(ctx)
        first = 4 if parse is _transpose_params and ctx.num_inputs == 9 else 3
        if _scalars_known(ctx, first):
            parse(ctx)
    return validate


# --- signatures -------------------------------------------------------------------------------

_CONV_FORMS = (optional_forms([I32] * 7, HalVersion.V1_0, [[BOOL], [I32, I32]])
               + optional_forms([I32] * 4, HalVersion.V1_0, [[BOOL], [I32, I32]]))
_DEPTHWISE_FORMS = (optional_forms([I32] * 8, HalVersion.V1_0, [[BOOL], [I32, I32]])
                    + optional_forms([I32] * 5, HalVersion.V1_0, [[BOOL], [I32, I32]]))
_GROUPED_FORMS = [([I32] * 8 + [BOOL], HalVersion.V1_2), ([I32] * 5 + [BOOL], HalVersion.V1_2)]
_TRANSPOSE_FORMS = [([I32] * 7 + [BOOL], HalVersion.V1_2), ([TI32] + [I32] * 4 + [BOOL], HalVersion.V1_2)]

register(OpSpec(Op.CONV_2D, build_signatures(CONV_TENSOR_CONFIGS, _CONV_FORMS), _conv_ref,
                _make_validate(_conv_params, 0, True)))
register(OpSpec(Op.DEPTHWISE_CONV_2D, build_signatures(CONV_TENSOR_CONFIGS, _DEPTHWISE_FORMS), _depthwise_ref,
                _make_validate(_depthwise_params, 3, True)))
register(OpSpec(Op.GROUPED_CONV_2D, build_signatures(CONV_TENSOR_CONFIGS, _GROUPED_FORMS), _grouped_ref,
                _make_validate(_grouped_params, 0, False)))
register(OpSpec(Op.TRANSPOSE_CONV_2D, build_signatures(CONV_TENSOR_CONFIGS, _TRANSPOSE_FORMS), _transpose_ref,
                _make_validate(_transpose_params, 0, False)))
