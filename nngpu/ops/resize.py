"""RESIZE_BILINEAR and RESIZE_NEAREST_NEIGHBOR, as the TFLite reference kernels compute them
(float32 arithmetic in the reference's operation order; quantized bilinear truncates toward
zero as its static_cast does). Output size by shape (INT32) or by scale (FLOAT32 / FLOAT16),
optional NCHW layout (1.2), align_corners and half_pixel_centers (1.3)."""
from __future__ import annotations

import math

import numpy as np

from ..hal.types import OperandType as T
from ..hal.types import OperationType as Op
from ._movement_util import QUANT8, V, check_rank, from_nhwc, rules, to_nhwc
from .registry import OpContext, OpError, OpSpec, register, sig

F32 = np.float32


def _output_size(ctx: OpContext, in_h: int, in_w: int) -> tuple[int, int]:
    if ctx.in_operand(1).type == T.INT32:
        h, w = int(ctx.scalar(2)), int(ctx.scalar(1))
    else:  # new size = floor(size * scale), the product formed in float32
        h = math.floor(F32(in_h) * F32(ctx.scalar(2)))
        w = math.floor(F32(in_w) * F32(ctx.scalar(1)))
    if h <= 0 or w <= 0:
        raise OpError(f"output size {h}x{w} must be positive")
    return h, w


def _scale(in_size: int, out_size: int, align_corners: bool) -> np.float32:
    if align_corners and out_size > 1:
        return F32(in_size - 1) / F32(out_size - 1)
    return F32(in_size) / F32(out_size)


def _bilinear_axis(out_size: int, in_size: int, align: bool, half: bool):
    """Per output coordinate: the source position and its two neighbours (ComputeInterpolationValues)."""
    scale = _scale(in_size, out_size, align)
    v = np.arange(out_size, dtype=F32)
    pos = (v + F32(0.5)) * scale - F32(0.5) if half else v * scale
    lo = np.maximum(np.floor(pos).astype(np.int64), 0)
    hi = np.minimum(np.ceil(pos).astype(np.int64), in_size - 1)
    return pos.astype(F32), lo, hi


def _bilinear(x: np.ndarray, out_h: int, out_w: int, align: bool, half: bool) -> np.ndarray:
    n, in_h, in_w, c = x.shape
    fy, y0, y1 = _bilinear_axis(out_h, in_h, align, half)
    fx, x0, x1 = _bilinear_axis(out_w, in_w, align, half)
    xf = x.astype(F32)
    dy = (fy - y0.astype(F32)).reshape(1, out_h, 1, 1)
    dx = (fx - x0.astype(F32)).reshape(1, 1, out_w, 1)
    one = F32(1)
    rows0, rows1 = xf[:, y0], xf[:, y1]
    # Same operand order as the reference, so float32 rounding matches.
    return (rows0[:, :, x0] * (one - dy) * (one - dx) + rows1[:, :, x0] * dy * (one - dx)
            + rows0[:, :, x1] * (one - dy) * dx + rows1[:, :, x1] * dy * dx)


def _nearest_axis(out_size: int, in_size: int, align: bool, half: bool) -> np.ndarray:
    """GetNearestNeighbor for every output coordinate."""
    scale = _scale(in_size, out_size, align)
    pos = (np.arange(out_size, dtype=F32) + F32(0.5 if half else 0.0)) * scale
    pos = pos.astype(np.float64)
    idx = (np.sign(pos) * np.floor(np.abs(pos) + 0.5)) if align else np.floor(pos)
    idx = np.minimum(idx.astype(np.int64), in_size - 1)
    return np.maximum(idx, 0) if half else idx


def _resize(kind: Op):
    def reference(ctx: OpContext) -> list[np.ndarray]:
        x = ctx.input(0)
        check_rank(x, 4, 4)
        nchw = bool(ctx.scalar(3, False))
        align, half = bool(ctx.scalar(4, False)), bool(ctx.scalar(5, False))
        if align and half:
            raise OpError("align_corners and half_pixel_centers cannot both be set")
        img = to_nhwc(x, nchw)
        n, in_h, in_w, c = img.shape
        if in_h <= 0 or in_w <= 0 or c <= 0:
            raise OpError(f"input image {in_h}x{in_w}x{c} must not be empty")
        out_h, out_w = _output_size(ctx, in_h, in_w)
        if kind == Op.RESIZE_NEAREST_NEIGHBOR:
            out = img[:, _nearest_axis(out_h, in_h, align, half)][:, :, _nearest_axis(out_w, in_w, align, half)]
        else:
            out = _bilinear(img, out_h, out_w, align, half)
            if ctx.in_operand(0).type in QUANT8:  # static_cast<T>(float): truncation toward zero
                info = np.iinfo(x.dtype)
                out = np.clip(np.trunc(out), info.min, info.max).astype(x.dtype)
        return [from_nhwc(out, nchw)]
    return reference


def _signatures(kind: Op) -> list:
    """Scalars are INT32 (by shape) or the input's float type (by scale, since 1.2); input 3 is the
    layout flag (1.2; required for NEAREST_NEIGHBOR), inputs 4-5 align_corners and
    half_pixel_centers (1.3)."""
    first = V.V1_0 if kind == Op.RESIZE_BILINEAR else V.V1_2
    types = [(T.TENSOR_FLOAT32, V.V1_0), (T.TENSOR_FLOAT16, V.V1_2), (T.TENSOR_QUANT8_ASYMM, V.V1_2),
             (T.TENSOR_QUANT8_ASYMM_SIGNED, V.V1_3)]
    count_version = {3: V.V1_0, 4: V.V1_2, 5: V.V1_3, 6: V.V1_3}
    out = []
    for t, tv in types:
        for s, sv in ((T.INT32, V.V1_0), (T.FLOAT16 if t == T.TENSOR_FLOAT16 else T.FLOAT32, V.V1_2)):
            for count in range(3 if kind == Op.RESIZE_BILINEAR else 4, 7):
                version = max(first, tv, sv, count_version[count])
                out.append(sig([t, s, s] + [T.BOOL] * (count - 3), [t], version))
    return out


for _kind in (Op.RESIZE_BILINEAR, Op.RESIZE_NEAREST_NEIGHBOR):
    register(OpSpec(_kind, _signatures(_kind), _resize(_kind), rules(min_rank=4)))
