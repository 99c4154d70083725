"""The numpy kernels of the convolutions (the reference's arithmetic), shared by conv.py and
transpose_conv.py.

They work in NHWC on strided views: conv is im2col + GEMM (1x1 is one plain GEMM), grouped conv
a batched GEMM, depthwise one multiply-accumulate per filter tap. Float tensors (float16 too)
are computed in float32 like the reference; quantized inputs have their zero points removed and
are accumulated exactly in float64 (sums of 8-bit products stay far below 2^53), then
requantized per output channel like the reference."""
from __future__ import annotations

import numpy as np

from .conv_common import (
    PC,
    Window,
    clip_activation,
    compute_dtype,
    conv_requant_params,
    filter_scales,
    from_nhwc,
    is_quant,
    pad_nhwc,
    requantize,
    to_nhwc,
    window_view,
)
from .registry import OpContext, OpError

# Largest im2col matrix built at once; bigger layers run in blocks of output rows so the copy
# stays cache- and memory-friendly.
_IM2COL_BYTES = 32 << 20
# Output block of the depthwise tap loop: small enough to stay in L2 across all taps.
_DW_BLOCK_BYTES = 128 << 10
# From this many (repeated) channels on, depthwise runs as one einsum over the window view,
# which measured faster than the tap loop there (and slower below).
_DW_EINSUM_CHANNELS = 64


def operands(ctx: OpContext, nchw: bool):
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


def depthwise_forward(x: np.ndarray, f: np.ndarray, mult: int, win: Window, oh: int, ow: int) -> np.ndarray:
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


def conv_forward(x: np.ndarray, f: np.ndarray, win: Window, oh: int, ow: int) -> np.ndarray:
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


def grouped_forward(x: np.ndarray, f: np.ndarray, groups: int, win: Window, oh: int, ow: int) -> np.ndarray:
    """x [N,H,W,G*Cg], f [Cout,KH,KW,Cg] (Cout = G*Cog) -> [N,OH,OW,Cout], one batched GEMM."""
    if groups == 1:
        return conv_forward(x, f, win, oh, ow)
    n = x.shape[0]
    cout, kh, kw, cg = f.shape
    m = n * oh * ow
    view = window_view(pad_nhwc(x, win), win, kh, kw, oh, ow).reshape(n, oh, ow, kh, kw, groups, cg)
    p = view.transpose(5, 0, 1, 2, 3, 4, 6).reshape(groups, m, kh * kw * cg)   # the one im2col copy
    w = f.reshape(groups, cout // groups, kh * kw * cg).transpose(0, 2, 1)
    y = np.matmul(p, w)                                         # [G, M, Cog]
    return y.transpose(1, 0, 2).reshape(n, oh, ow, cout)


def finish(ctx: OpContext, acc: np.ndarray, bias: np.ndarray, activation: int,
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
