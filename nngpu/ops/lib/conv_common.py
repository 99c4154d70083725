"""Shared pieces of the windowed ops (convolutions and pooling); registers nothing.

Padding resolution and output sizes follow the reference (OperationsUtils): implicit SAME
padding puts the odd pixel at the tail, sizes use C integer division. Layout helpers move NCHW
to NHWC and back so every kernel is written once for NHWC. Quantized helpers reproduce the
reference's per-tensor / per-channel requantization bit-exactly.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ...hal.types import FusedActivationFunc as Act
from ...hal.types import OperandType as T
from ...ir import Expr, clamp
from ...ir.fixedpoint import mbqm
from ...ir.window import Geometry
from ..registry import HalVersion, OpContext, OpError, Signature, sig
from .layout import pad_constant
from .quant import (
    VALID_ACTIVATIONS,
    activation_range_float,
    activation_range_quant,
    convolution_multiplier,
    multiply_by_quantized_multiplier,
    quantize_multiplier,
    wrap_int32,
)

PADDING_NONE, PADDING_SAME, PADDING_VALID = 0, 1, 2
I32, BOOL = T.INT32, T.BOOL
F32, F16 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16
Q8, S8, PC = T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED, T.TENSOR_QUANT8_SYMM_PER_CHANNEL
TI32 = T.TENSOR_INT32

# (input, filter, bias) type triples of the convolutions, with the HAL version allowing each.
CONV_TENSOR_CONFIGS: list[tuple[tuple[T, T, T], HalVersion]] = [
    ((F32, F32, F32), HalVersion.V1_0),
    ((Q8, Q8, TI32), HalVersion.V1_0),
    ((F16, F16, F16), HalVersion.V1_2),
    ((Q8, PC, TI32), HalVersion.V1_2),
    ((S8, S8, TI32), HalVersion.V1_3),
    ((S8, PC, TI32), HalVersion.V1_3),
]


def build_signatures(tensor_configs: Sequence[tuple[Sequence[T], HalVersion]],
                     forms: Sequence[tuple[Sequence[T], HalVersion]]) -> list[Signature]:
    """One signature per (tensor types, scalar form): exact input counts, version = the later of
    the two. The output type is the first input's."""
    out = []
    for tensors, tv in tensor_configs:
        for scalars, fv in forms:
            out.append(sig([*tensors, *scalars], [tensors[0]], max(tv, fv)))
    return out


def optional_forms(base: Sequence[T], base_version: HalVersion,
                   extras: Sequence[Sequence[T]]) -> list[tuple[list[T], HalVersion]]:
    """The base scalar list at its version, then each cumulative group of 1.2 optional inputs."""
    forms = [(list(base), base_version)]
    acc = list(base)
    for group in extras:
        acc = acc + list(group)
        forms.append((list(acc), HalVersion.V1_2))
    return forms


# --- scalar parameters ------------------------------------------------------------------------

def int_arg(ctx: OpContext, i: int, default: int | None = None) -> int:
    v = ctx.scalar(i, default)
    if v is None:
        raise OpError(f"input {i} has no value")
    return int(v)


def bool_arg(ctx: OpContext, i: int, default: bool = False) -> bool:
    return bool(ctx.scalar(i, default))


def check_activation(act: int) -> int:
    if act not in VALID_ACTIVATIONS:
        raise OpError(f"bad fused activation {act}")
    return act


def clip_activation(y: np.ndarray, activation: int) -> np.ndarray:
    """Fused float activation applied in place (y is the kernel's own buffer)."""
    if activation != Act.NONE:
        lo, hi = activation_range_float(activation)
        np.clip(y, lo, hi, out=y)
    return y


def is_bool_at(ctx: OpContext, i: int) -> bool:
    return i < ctx.num_inputs and ctx.in_operand(i).type == T.BOOL


@dataclass
class Padding:
    """Either an implicit scheme (code) or explicit (left, right, top, bottom) pads."""

    code: int | None = None
    left: int = 0
    right: int = 0
    top: int = 0
    bottom: int = 0


def read_padding(ctx: OpContext, first: int, explicit: bool) -> tuple[Padding, int]:
    """Padding inputs starting at `first`; returns the padding and the next input index."""
    if explicit:
        pads = [int_arg(ctx, first + k) for k in range(4)]
        return Padding(None, *pads), first + 4
    code = int_arg(ctx, first)
    if code not in (PADDING_NONE, PADDING_SAME, PADDING_VALID):
        raise OpError(f"bad implicit padding scheme {code}")
    return Padding(code), first + 1


def implicit_padding(in_size: int, stride: int, dilation: int, filter_size: int, code: int,
                     transpose: bool = False) -> tuple[int, int]:
    """calculateExplicitPadding: SAME centres the window, extra pixel at the tail. For transpose
    conv `in_size` is the requested output size and the tail may come out negative."""
    if code != PADDING_SAME:
        return 0, 0
    effective = (filter_size - 1) * dilation + 1
    out = (in_size + stride - 1) // stride
    total = (out - 1) * stride + effective - in_size
    head = total // 2 if total > 0 else 0
    tail = total - head if (total > 0 or transpose) else 0
    return head, tail


def c_div(a: int, b: int) -> int:
    """C integer division (truncates toward zero)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def out_size(in_size: int, filter_size: int, stride: int, dilation: int, head: int, tail: int) -> int:
    effective = (filter_size - 1) * dilation + 1
    return c_div(in_size - effective + stride + head + tail, stride)


@dataclass
class Window:
    """Resolved geometry of a sliding window over H and W."""

    pad_top: int
    pad_bottom: int
    pad_left: int
    pad_right: int
    stride_h: int
    stride_w: int
    dil_h: int = 1
    dil_w: int = 1


def check_steps(stride_h: int, stride_w: int, dil_h: int = 1, dil_w: int = 1) -> None:
    if stride_h <= 0 or stride_w <= 0:
        raise OpError(f"strides must be positive, got {stride_w}x{stride_h}")
    if dil_h <= 0 or dil_w <= 0:
        raise OpError(f"dilation factors must be positive, got {dil_w}x{dil_h}")


def check_explicit_pads(pad: Padding, allow_negative_tail: bool = False) -> None:
    if pad.code is None and (min(pad.left, pad.top) < 0
                             or (not allow_negative_tail and min(pad.right, pad.bottom) < 0)):
        raise OpError("padding must be non-negative")


def resolve_window(pad: Padding, in_h: int, in_w: int, filter_h: int, filter_w: int,
                   stride_h: int, stride_w: int, dil_h: int = 1, dil_w: int = 1) -> Window:
    check_steps(stride_h, stride_w, dil_h, dil_w)
    if pad.code is not None:
        top, bottom = implicit_padding(in_h, stride_h, dil_h, filter_h, pad.code)
        left, right = implicit_padding(in_w, stride_w, dil_w, filter_w, pad.code)
    else:
        left, right, top, bottom = pad.left, pad.right, pad.top, pad.bottom
    if min(left, right, top, bottom) < 0:
        raise OpError("padding must be non-negative")
    return Window(top, bottom, left, right, stride_h, stride_w, dil_h, dil_w)


def window_geometry(win: Window, filter_h: int, filter_w: int, in_h: int, in_w: int) -> Geometry:
    """The window as device kernels iterate it (nngpu.ir.window)."""
    return Geometry(filter_h, filter_w, win.stride_h, win.stride_w, win.pad_top, win.pad_left, in_h, in_w,
                    win.dil_h, win.dil_w)


def check_padding_below_filter(win: Window, filter_h: int, filter_w: int) -> None:
    """The reference requires each pad to be smaller than the (dilated) filter extent."""
    eff_h = (filter_h - 1) * win.dil_h + 1
    eff_w = (filter_w - 1) * win.dil_w + 1
    if not (win.pad_left < eff_w and win.pad_right < eff_w and win.pad_top < eff_h and win.pad_bottom < eff_h):
        raise OpError("padding must be smaller than the filter size")


def output_hw(win: Window, in_h: int, in_w: int, filter_h: int, filter_w: int) -> tuple[int, int]:
    oh = out_size(in_h, filter_h, win.stride_h, win.dil_h, win.pad_top, win.pad_bottom)
    ow = out_size(in_w, filter_w, win.stride_w, win.dil_w, win.pad_left, win.pad_right)
    if oh <= 0 or ow <= 0:
        raise OpError(f"output spatial size {oh}x{ow} is empty")
    return oh, ow


# --- layout -----------------------------------------------------------------------------------

def to_nhwc(x: np.ndarray, nchw: bool) -> np.ndarray:
    if x.ndim != 4:
        raise OpError(f"expected a 4-D tensor, got rank {x.ndim}")
    return np.transpose(x, (0, 2, 3, 1)) if nchw else x


def from_nhwc(y: np.ndarray, nchw: bool) -> np.ndarray:
    return np.ascontiguousarray(np.transpose(y, (0, 3, 1, 2))) if nchw else y


# --- window extraction ------------------------------------------------------------------------
# Kernels read windows as strided views of one padded copy of the input: no fancy indexing and
# no dtype widening of the whole tensor, so float32 stays float32 end to end.

def compute_dtype(operand_type: int) -> type:
    """Accumulation dtype: float32 for float tensors (what the reference computes in, float16
    included); float64 for zero-point-removed quantized values, where every product and partial
    sum is an integer far below 2^53, so BLAS float64 GEMMs are exact."""
    return np.float64 if is_quant(operand_type) else np.float32


def pad_nhwc(x: np.ndarray, win: Window, fill=0) -> np.ndarray:
    """x [N,H,W,C] with the window's padding added (no copy when there is none)."""
    if not (win.pad_top or win.pad_bottom or win.pad_left or win.pad_right):
        return x
    return pad_constant(x, ((0, 0), (win.pad_top, win.pad_bottom), (win.pad_left, win.pad_right), (0, 0)), fill)


def tap(xp: np.ndarray, win: Window, i: int, j: int, oh: int, ow: int) -> np.ndarray:
    """View [N,OH,OW,C] of the padded input under filter tap (i, j) for every output pixel."""
    r, c = i * win.dil_h, j * win.dil_w
    return xp[:, r:r + (oh - 1) * win.stride_h + 1:win.stride_h, c:c + (ow - 1) * win.stride_w + 1:win.stride_w, :]


def window_view(xp: np.ndarray, win: Window, filter_h: int, filter_w: int, oh: int, ow: int) -> np.ndarray:
    """Read-only im2col view [N,OH,OW,KH,KW,C] of the padded input (no copy)."""
    sn, sh, sw, sc = xp.strides
    shape = (xp.shape[0], oh, ow, filter_h, filter_w, xp.shape[3])
    strides = (sn, sh * win.stride_h, sw * win.stride_w, sh * win.dil_h, sw * win.dil_w, sc)
    return np.lib.stride_tricks.as_strided(xp, shape, strides, writeable=False)


def patches(x: np.ndarray, win: Window, filter_h: int, filter_w: int, oh: int, ow: int,
            fill=0) -> np.ndarray:
    """im2col view: [N, H, W, C] -> [N, OH, OW, KH, KW, C], out-of-image taps set to `fill`."""
    return window_view(pad_nhwc(x, win, fill), win, filter_h, filter_w, oh, ow)


def window_valid_mask(win: Window, h: int, w: int, filter_h: int, filter_w: int, oh: int, ow: int) -> np.ndarray:
    """[OH, OW, KH, KW] True where the tap falls inside the image (not padding)."""
    rows = np.arange(oh)[:, None] * win.stride_h + np.arange(filter_h)[None, :] * win.dil_h - win.pad_top
    cols = np.arange(ow)[:, None] * win.stride_w + np.arange(filter_w)[None, :] * win.dil_w - win.pad_left
    rv = (rows >= 0) & (rows < h)
    cv = (cols >= 0) & (cols < w)
    return rv[:, None, :, None] & cv[None, :, None, :]


# --- quantization -----------------------------------------------------------------------------

def is_quant(t: int) -> bool:
    return t in (Q8, S8)


def filter_scales(ctx: OpContext, idx: int, channel_dim: int, channels: int) -> np.ndarray:
    """Per-output-channel filter scales: channelQuant scales for per-channel filters, else the
    tensor scale repeated. Checks the channel dimension the op requires."""
    op = ctx.in_operand(idx)
    if op.type == PC:
        cq = op.extraParams.channelQuant if op.extraParams else None
        if cq is None:
            raise OpError("per-channel filter without channelQuant parameters")
        if cq.channelDim != channel_dim:
            raise OpError(f"per-channel filter must use channelDim {channel_dim}, got {cq.channelDim}")
        if len(cq.scales) != channels:
            raise OpError(f"per-channel filter has {len(cq.scales)} scales for {channels} channels")
        return np.asarray(cq.scales, dtype=np.float32)
    return np.full(channels, op.scale, dtype=np.float32)


def conv_requant_params(ctx: OpContext, fscales: np.ndarray, per_channel: bool) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel (multiplier, shift) of GetQuantizedConvolutionMultipler + QuantizeMultiplier,
    including its bias-scale consistency check."""
    in_scale = ctx.in_operand(0).scale
    out_scale = ctx.out_operand(0).scale
    bias_scale = ctx.in_operand(2).scale
    mults, shifts = [], []
    for fs in fscales:
        product = float(np.float32(in_scale) * np.float32(fs))
        b = product if per_channel else float(np.float32(bias_scale))
        if abs(product - b) > 1e-6 * min(product, b) or product < 0:
            raise OpError(f"bias scale {b} does not match input scale * filter scale {product}")
        if out_scale <= 0:
            raise OpError("output scale must be positive")
        m, s = quantize_multiplier(convolution_multiplier(in_scale, float(fs), out_scale))
        mults.append(m)
        shifts.append(s)
    return np.asarray(mults, dtype=np.int64), np.asarray(shifts, dtype=np.int64)


def requant_operands(node, mults: np.ndarray, shifts: np.ndarray):
    """channel -> (multiplier, shift) as device expressions: constants when one pair serves every
    channel, else loads from per-channel tables (created now, at build time)."""
    if np.all(mults == mults[0]) and np.all(shifts == shifts[0]):
        return lambda channel: (int(mults[0]), int(shifts[0]))
    m, s = (node.constant(v.astype(np.int32), TI32) for v in (mults, shifts))
    return lambda channel: (m.at(channel), s.at(channel))


def requantize_device(acc: Expr, multiplier, shift, node, activation: int) -> Expr:
    """The device form of `requantize`: an int accumulator to the clamped output value."""
    out = node.out_operand(0)
    lo, hi = activation_range_quant(activation, out.scale, out.zeroPoint, out.type)
    return clamp(mbqm(acc, multiplier, shift) + out.zeroPoint, lo, hi).cast("int")


def requantize(acc: np.ndarray, mults: np.ndarray, shifts: np.ndarray, ctx: OpContext, activation: int) -> np.ndarray:
    """int accumulators (channels last) -> output storage values with the fused activation."""
    out = ctx.out_operand(0)
    lo, hi = activation_range_quant(activation, out.scale, out.zeroPoint, out.type)
    y = multiply_by_quantized_multiplier(wrap_int32(acc), mults, shifts) + out.zeroPoint
    return np.clip(y, lo, hi)


def quant_scale_rule(ctx: OpContext) -> None:
    """Before HAL 1.2 a quant8 convolution / fully connected output needs
    output_scale > input_scale * filter_scale (the product formed in float32)."""
    if ctx.version >= HalVersion.V1_2 or ctx.in_operand(0).type != Q8 or ctx.in_operand(1).type != Q8:
        return
    product = np.float32(ctx.in_operand(0).scale) * np.float32(ctx.in_operand(1).scale)
    if not np.float32(ctx.out_operand(0).scale) > product:
        raise OpError("before HAL 1.2 a quant8 output scale must exceed input scale * filter scale")
