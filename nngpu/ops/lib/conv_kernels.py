"""The numpy kernels of the convolutions (the reference's arithmetic), shared by conv.py and
transpose_conv.py.

They work in NHWC on strided views: conv is im2col + GEMM (1x1 is one plain GEMM), grouped conv
a batched GEMM, depthwise einsums of the filter taps over strided views. Float tensors (float16 too)
are computed in float32 like the reference; quantized inputs have their zero points removed and
are accumulated exactly in float64 (sums of 8-bit products stay far below 2^53), then
requantized per output channel like the reference. The numpy plan's bound layers
(bound_quant_layer) accumulate in float32 where their weights bound every partial sum below
2^24, and requantize in float64 (requant_float.py), bit for bit the same."""
from __future__ import annotations

from dataclasses import replace
from typing import Callable

import numpy as np

from ..registry import OpContext, OpError
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
from . import jit
from .byte_tables import as_words
from .quant import activation_range_quant
from .requant_float import FloatRequantizer

# Largest im2col matrix built at once; bigger layers run in blocks of output rows so the copy
# stays cache- and memory-friendly.
_IM2COL_BYTES = 32 << 20
# From this many (repeated) channels on, depthwise runs as one einsum over the window view,
# which measured faster than the row einsums there (the stride's phase copies cost more).
_DW_EINSUM_CHANNELS = 64
# Stride 1 in W needs no phase copy: the row einsum wins up to this many channels, where the
# filter taps tiled along the row start to cost more than the window einsum's short loops.
_DW_ROWS_CHANNELS = 192


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


def depthwise_forward(x: np.ndarray, f: np.ndarray, mult: int, win: Window, oh: int, ow: int,
                      out: np.ndarray | None = None) -> np.ndarray:
    """x [N,H,W,C], f [1,KH,KW,C*M] -> [N,OH,OW,C*M]. Output channel c*M+m reads input c, so
    repeating each input channel M times reduces every multiplier to 1. Narrow layers (and
    stride-1 ones up to _DW_ROWS_CHANNELS) run as einsums over image rows, wide ones as one
    einsum over the window view. `out`: a contiguous [N,OH,OW,C*M] buffer to compute into."""
    if mult > 1:
        x = np.repeat(x, mult, axis=3)
    c = x.shape[3]
    kh, kw = f.shape[1], f.shape[2]
    xp = pad_nhwc(x, win)
    f = f.reshape(kh, kw, c)
    if c < _DW_EINSUM_CHANNELS or (win.stride_w == 1 and c < _DW_ROWS_CHANNELS):
        return _depthwise_rows(xp, f, win, oh, ow, out)
    # Wide layers: einsum's channel-contiguous inner loop over the window view wins.
    return np.einsum("nhwijc,ijc->nhwc", window_view(xp, win, kh, kw, oh, ow), f, out=out)


def _depthwise_rows(xp: np.ndarray, f: np.ndarray, win: Window, oh: int, ow: int,
                    out: np.ndarray | None) -> np.ndarray:
    """The depthwise sum with W and C merged into one contiguous axis, so every tap is a long
    multiply-accumulate run. Tap j reads column phase q = (j*dil) % sw of the stride (a
    contiguous copy unless sw == 1) from phase column (j*dil) // sw on; a phase's taps are
    evenly spaced there, so one einsum per phase sums them (in (i, j) order) against the filter
    taps tiled along the row."""
    n, _, _, c = xp.shape
    kh, kw, _ = f.shape
    sw = win.stride_w
    acc = None if out is None else out.reshape(n, oh, ow * c)
    first = True
    for q in range(sw):
        js = [j for j in range(kw) if (j * win.dil_w) % sw == q]
        if not js:
            continue
        ph = np.ascontiguousarray(xp[:, :, q::sw, :]) if sw > 1 else xp
        rows = ph.reshape(n, ph.shape[1], ph.shape[2] * c)[:, :, (js[0] * win.dil_w) // sw * c:]
        step = (js[1] - js[0]) * win.dil_w // sw if len(js) > 1 else 0
        s0, s1, s2 = rows.strides
        view = np.lib.stride_tricks.as_strided(rows, (n, oh, kh, len(js), ow * c),
                                               (s0, s1 * win.stride_h, s1 * win.dil_h, s2 * c * step, s2),
                                               writeable=False)
        taps = np.tile(f[:, js], (1, 1, ow))                    # [KH,J,OW*C]
        if first:
            acc = np.einsum("nrijx,ijx->nrx", view, taps, out=acc)
            first = False
        else:
            acc += np.einsum("nrijx,ijx->nrx", view, taps)
    return acc.reshape(n, oh, ow, c)


def conv_forward(x: np.ndarray, f: np.ndarray, win: Window, oh: int, ow: int,
                 out: np.ndarray | None = None) -> np.ndarray:
    """x [N,H,W,Cin], f [Cout,KH,KW,Cin] -> [N,OH,OW,Cout] as im2col + one GEMM per block
    (into `out`, a contiguous buffer of that shape, when given)."""
    n, _, _, cin = x.shape
    cout, kh, kw, _ = f.shape
    k = kh * kw * cin
    w = f.reshape(cout, k).T                                    # BLAS takes the transpose as is
    acc = np.empty((n, oh, ow, cout), dtype=x.dtype) if out is None else out
    if kh == 1 and kw == 1:                                     # pads are 0 (< filter size)
        xs = x[:, ::win.stride_h, ::win.stride_w, :]
        np.matmul(xs.reshape(n * oh * ow, cin), w, out=acc.reshape(n * oh * ow, cout))
        return acc
    view = window_view(pad_nhwc(x, win), win, kh, kw, oh, ow)   # [N,OH,OW,KH,KW,Cin], no copy
    rows = max(1, min(oh, _IM2COL_BYTES // max(1, ow * k * x.itemsize)))
    for b in range(n):
        for r in range(0, oh, rows):
            r1 = min(oh, r + rows)
            cols = view[b, r:r1].reshape((r1 - r) * ow, k)      # the one im2col copy
            np.matmul(cols, w, out=acc[b, r:r1].reshape((r1 - r) * ow, cout))
    return acc


def grouped_forward(x: np.ndarray, f: np.ndarray, groups: int, win: Window, oh: int, ow: int,
                    out: np.ndarray | None = None) -> np.ndarray:
    """x [N,H,W,G*Cg], f [Cout,KH,KW,Cg] (Cout = G*Cog) -> [N,OH,OW,Cout], one batched GEMM
    (copied into `out` when given)."""
    if groups == 1:
        return conv_forward(x, f, win, oh, ow, out)
    n = x.shape[0]
    cout, kh, kw, cg = f.shape
    m = n * oh * ow
    view = window_view(pad_nhwc(x, win), win, kh, kw, oh, ow).reshape(n, oh, ow, kh, kw, groups, cg)
    p = view.transpose(5, 0, 1, 2, 3, 4, 6).reshape(groups, m, kh * kw * cg)   # the one im2col copy
    w = f.reshape(groups, cout // groups, kh * kw * cg).transpose(0, 2, 1)
    y = np.matmul(p, w).transpose(1, 0, 2).reshape(n, oh, ow, cout)   # from [G, M, Cog]
    if out is None:
        return y
    out[...] = y
    return out


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
        y = float_epilogue(acc, bias, activation)
    return [from_nhwc(y, nchw)]


def bound_quant_layer(ctx: OpContext, channel_dim: int, activation: int
                      ) -> tuple[np.ndarray, FloatRequantizer] | None:
    """A convolution's (or fully connected layer's) constant quantized filter and bias, made
    ready once, at prepare: (the filter with its zero point removed, in the float type whose
    sums are exact; the requantizing epilogue, (exact accumulators, channels last; output
    buffer) -> the output in the buffer). None when a sum could pass 2^53.

    |x - zero point| <= 255 for 8-bit inputs, so each channel's |sum of products| is at most
    255 * sum|filter|. Below 2^24 every partial sum is exact in float32, in any order of
    summation (BLAS's sgemm then gives the integer result at twice float64's speed); below
    2^53 in float64."""
    fq = quant_filter(ctx)
    taps = np.abs(fq).sum(axis=tuple(a for a in range(fq.ndim) if a != channel_dim))
    sums = 255.0 * float(taps.max(initial=0.0))
    if sums >= 1 << 53:
        return None
    cout = ctx.in_shape(1)[channel_dim]
    mults, shifts = conv_requant_params(ctx, filter_scales(ctx, 1, channel_dim, cout), ctx.in_operand(1).type == PC)
    bias = ctx.input(2).reshape(-1).astype(np.float64)      # int32 values: exact in float64
    out_op = ctx.out_operand(0)
    lo, hi = activation_range_quant(activation, out_op.scale, out_op.zeroPoint, out_op.type)
    epilogue = FloatRequantizer(mults, shifts, out_op.zeroPoint, lo, hi, bias, 255.0 * taps + np.abs(bias))
    return fq.astype(np.float32 if sums < 1 << 24 else np.float64, copy=False), epilogue


Spec = tuple[tuple[int, ...], np.dtype]   # an array's shape and type


class QuantConvKernel:
    """A bound quantized convolution (a Kernel) of input x and output `out` (their shapes and
    types). then(table) gives the same convolution with a 256-entry table applied to its output
    bytes as they are written: an 8-bit lookup that was the output's only reader, fused into it
    (compiler/numpy_fuse.py). warm() runs it once on zeros, so that the compiled loops compile
    (or fail) at prepare, not in an execution."""

    def __init__(self, forward: Callable[[np.ndarray | None], Callable[[np.ndarray, np.ndarray], np.ndarray]],
                 x: Spec, out: Spec, table: np.ndarray | None = None):
        self._forward, self._x, self._out, self.table = forward, x, out, table
        self._run = forward(table)

    def __call__(self, ins, outs: list[np.ndarray]) -> list[np.ndarray]:
        self._run(ins[0], outs[0])
        return outs

    def then(self, table: np.ndarray) -> "QuantConvKernel":
        if self.table is not None:          # a lookup after a lookup: one composed table
            table = table[self.table.view(np.uint8)]
        table = np.ascontiguousarray(table)
        return QuantConvKernel(self._forward, self._x, (self._out[0], table.dtype), table)

    def warm(self) -> None:
        if jit.kernels() is not None:       # numpy's passes need no warming
            self._run(np.zeros(*self._x), np.empty(*self._out))


def quant_forward(kind: str, fq: np.ndarray, epilogue: FloatRequantizer, zero_point: int, multiplier: int,
                  groups: int, win: Window, oh: int, ow: int
                  ) -> Callable[[np.ndarray | None], Callable[[np.ndarray, np.ndarray], np.ndarray]]:
    """A bound quantized convolution: table -> (x: stored integers, NHWC; out: [N,OH,OW,Cout])
    -> out, from bound_quant_layer's filter (fq, exact sums in its float type) and epilogue,
    with the output's bytes looked up in `table` when one is given. With the compiled loops
    (jit.py), depthwise is one loop from the stored bytes to the output (one to an
    accumulator tensor when the epilogue checks each call's range), and a convolution's input
    is centered and padded in one pass before its GEMM; else the numpy kernels run on
    x - zero point."""
    loops = jit.kernels()
    if loops is not None and kind == "depthwise":
        taps = np.ascontiguousarray(fq.reshape(fq.shape[1:]))
        zp, two = fq.dtype.type(zero_point), epilogue.proven_two_floors
        window = np.array([win.stride_h, win.stride_w, win.dil_h, win.dil_w, win.pad_top, win.pad_left], np.int64)

        def depthwise(table: np.ndarray | None) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
            def run(x: np.ndarray, out: np.ndarray) -> np.ndarray:
                if two is not None:
                    terms, limits = epilogue.fused_terms(taps.shape[2])
                    words, rows = (table, out) if table is None else as_words(table, out)
                    loops.depthwise(x, zp, taps, multiplier, window, terms, limits, two, words, rows)
                    return out
                acc = np.empty((x.shape[0], oh, ow, taps.shape[2]), fq.dtype)
                loops.depthwise(x, zp, taps, multiplier, window, None, None, False, None, acc)
                return epilogue(acc, out, table)
            return run
        return depthwise
    if loops is not None and kind != "depthwise" and groups == 1:
        zp, unpadded = fq.dtype.type(zero_point), replace(win, pad_top=0, pad_bottom=0, pad_left=0, pad_right=0)

        def conv(table: np.ndarray | None) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
            def run(x: np.ndarray, out: np.ndarray) -> np.ndarray:
                n, h, w, c = x.shape
                xp = np.empty((n, h + win.pad_top + win.pad_bottom, w + win.pad_left + win.pad_right, c), fq.dtype)
                loops.centered_padded(x, zp, win.pad_top, win.pad_left, xp)
                return epilogue(conv_forward(xp, fq, unpadded, oh, ow), out, table)
            return run
        return conv

    def numpy_kernels(table: np.ndarray | None) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
        def run(x: np.ndarray, out: np.ndarray) -> np.ndarray:
            xq = x.astype(fq.dtype)
            xq -= zero_point                          # padding added later is then the zero point
            if kind == "depthwise":
                return epilogue(depthwise_forward(xq, fq, multiplier, win, oh, ow), out, table)
            return epilogue(grouped_forward(xq, fq, groups, win, oh, ow), out, table)
        return run
    return numpy_kernels


def quant_filter(ctx: OpContext) -> np.ndarray:
    """A constant quantized filter in float64 with its zero point removed (per-channel filters
    have none), as `operands` gives it to the kernels."""
    f, f_op = ctx.input(1), ctx.in_operand(1)
    fq = f.astype(np.float64)
    return fq if f_op.type == PC else fq - f_op.zeroPoint


def float_epilogue(acc: np.ndarray, bias: np.ndarray, activation: int) -> np.ndarray:
    """A float kernel's bias and fused activation, in place on its buffer `acc`."""
    return clip_activation(np.add(acc, bias.astype(acc.dtype, copy=False), out=acc), activation)
