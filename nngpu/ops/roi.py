"""Region-of-interest ops: ROI_ALIGN, ROI_POOLING, HEATMAP_MAX_KEYPOINT.

Semantics follow the AOSP reference kernels: coordinates in float32 (quantized boxes dequantized
with scale 0.125), NHWC internally (NCHW inputs are transposed in and out). ROI_ALIGN's quantized
path is integer: bilinear weights quantized to 1/255 steps, sums rescaled by a fixed-point
multiplier. Loops run over regions of interest only; bins, samples and channels are vectorised.
The shape functions hold the shape rules; the references call them first.
"""
from __future__ import annotations

import math
from functools import partial

import numpy as np

from ..hal.types import OperandType as T
from ..hal.types import OperationType as Op
from .lib import boxes as bu
from .lib.boxes import F32, FLOATS, I32T, Q8, Q8S, Q16A, QUANTS, require
from .lib.dtypes import quant_range
from .lib.quant import multiply_by_quantized_multiplier, quantize_multiplier_smaller_than_one, round_half_away
from .registry import HalVersion as V
from .registry import OpContext, OpSpec, register, sig

# ================================================================ shared ROI plumbing

def _roi_check(ctx: OpContext) -> None:
    bu.check_rank(ctx, 0, 4, "input")
    bu.check_rank(ctx, 1, 2, "rois")
    bu.check_rank(ctx, 2, 1, "batch indices")
    bu.check_box_quant(ctx, 1, "rois")
    for i, name in ((3, "output height"), (4, "output width"), (5, "height stride"), (6, "width stride")):
        v = bu.constant_scalar(ctx, i)
        require(v is None or v > 0, f"{name} must be positive")


def _roi_shape(node: OpContext, layout_index: int) -> list[tuple[int, ...]]:
    """One [out_h, out_w] map of the input's depth per region of interest, in the input's
    layout (the layout flag is input `layout_index`)."""
    nchw = bool(node.scalar(layout_index))
    nb, height, width, depth = bu.nhwc_dims(node, 0, nchw, "input")
    (n, four), batch_ids = bu.dims(node, 1, 2, "rois"), bu.dims(node, 2, 1, "batch indices")
    require(nb > 0 and height > 0 and width > 0 and depth > 0, "input extents must be positive")
    require(four == 4, "rois must be [num_rois, 4]")
    require(batch_ids == (n,), "batch indices must be [num_rois]")
    out_h, out_w = int(node.scalar(3)), int(node.scalar(4))
    require(out_h > 0 and out_w > 0, "output size must be positive")
    return [bu.shape_from_nhwc((n, out_h, out_w, depth), nchw)]


def _roi_inputs(ctx: OpContext, layout_index: int):
    """(nhwc input, float32 rois [n, 4], batch ids, out_h, out_w, h_scale, w_scale, nchw)."""
    _roi_shape(ctx, layout_index)
    nchw = bool(ctx.scalar(layout_index))
    x = bu.to_nhwc(ctx.input(0), nchw)
    roi_raw, batch_ids = ctx.input(1), ctx.input(2)
    n = roi_raw.shape[0]
    nb, height, width, _ = x.shape
    out_h, out_w = int(ctx.scalar(3)), int(ctx.scalar(4))
    h_stride, w_stride = bu.float_scalar(ctx, 5), bu.float_scalar(ctx, 6)
    require(h_stride > 0 and w_stride > 0, "strides must be positive")
    rois = bu.to_float(roi_raw, ctx.in_operand(1))
    h_scale, w_scale = F32(1) / F32(h_stride), F32(1) / F32(w_stride)
    if n:
        require(bool(np.all((batch_ids >= 0) & (batch_ids < nb))), "batch index out of range")
        require(bool(np.all(rois >= 0)), "roi coordinates must be non-negative")
        require(bool(np.all(rois[:, [0, 2]] * w_scale <= F32(width))
                     and np.all(rois[:, [1, 3]] * h_scale <= F32(height))), "roi lies outside the feature map")
        bu.check_valid_boxes(rois, "rois")
    return x, rois, batch_ids, out_h, out_w, h_scale, w_scale, nchw


def _roi_signatures(extra: list[T]):
    out = []
    for t, s in FLOATS:
        out.append(sig([t, t, I32T, T.INT32, T.INT32, s, s, *extra, T.BOOL], [t], V.V1_2))
    for q, v in QUANTS:
        out.append(sig([q, Q16A, I32T, T.INT32, T.INT32, T.FLOAT32, T.FLOAT32, *extra, T.BOOL], [q], v))
    return out


# ================================================================ ROI_ALIGN

def _sample_axis(start: F32, step: F32, bins: int, ratio: int, size: int):
    """Sample positions along one axis: lower index, upper index and fraction, each [bins, ratio]."""
    bin_size = F32(step / F32(ratio))
    origin = (step * np.arange(bins, dtype=F32) + start)[:, None]
    pos = (origin + bin_size / F32(2)) + bin_size * np.arange(ratio, dtype=F32)[None, :]
    lo = np.floor(pos).astype(np.int64)
    frac = (pos - lo.astype(F32)).astype(F32)
    edge = lo >= size - 1           # samples past the last row/column read it without blending
    lo = np.where(edge, size - 1, lo)
    hi = np.where(edge, size - 1, lo + 1)
    frac = np.where(edge, F32(0), frac).astype(F32)
    return lo, hi, frac


ALIGN_LAYOUT, POOLING_LAYOUT = 9, 7   # the index of each op's layout flag


def _roi_align(ctx: OpContext) -> list[np.ndarray]:
    _roi_check(ctx)
    x, rois, batch_ids, out_h, out_w, h_scale, w_scale, nchw = _roi_inputs(ctx, ALIGN_LAYOUT)
    h_ratio, w_ratio = int(ctx.scalar(7)), int(ctx.scalar(8))
    require(h_ratio >= 0 and w_ratio >= 0, "sampling ratios must be non-negative")
    in_op, out_op = ctx.in_operand(0), ctx.out_operand(0)
    quant = in_op.type in (Q8, Q8S)
    _, height, width, depth = x.shape
    out = np.zeros((rois.shape[0], out_h, out_w, depth), dtype=np.int64 if quant else F32)
    img_all = x.astype(np.int64) - in_op.zeroPoint if quant else x.astype(F32)
    w_quant_scale = F32(1.0) / F32(255.0)
    for r in range(rois.shape[0]):
        x1, y1, x2, y2 = (F32(v) for v in rois[r])
        ws, hs = x1 * w_scale, y1 * h_scale
        roi_w = F32(max(F32(x2 * w_scale - ws), F32(1)))
        roi_h = F32(max(F32(y2 * h_scale - hs), F32(1)))
        w_step, h_step = F32(roi_w / F32(out_w)), F32(roi_h / F32(out_h))
        wr = w_ratio if w_ratio > 0 else int(math.ceil(w_step))
        hr = h_ratio if h_ratio > 0 else int(math.ceil(h_step))
        ylo, yhi, dy1 = _sample_axis(hs, h_step, out_h, hr, height)
        xlo, xhi, dx1 = _sample_axis(ws, w_step, out_w, wr, width)
        dy1, dy2 = dy1[:, :, None, None], (F32(1) - dy1)[:, :, None, None]
        dx1, dx2 = dx1[None, None], (F32(1) - dx1)[None, None]
        weights = (dx2 * dy2, dx1 * dy2, dx2 * dy1, dx1 * dy1)   # [out_h, hr, out_w, wr] each
        img = img_all[batch_ids[r]]
        corners = (img[ylo[:, :, None, None], xlo[None, None]], img[ylo[:, :, None, None], xhi[None, None]],
                   img[yhi[:, :, None, None], xlo[None, None]], img[yhi[:, :, None, None], xhi[None, None]])
        if quant:
            acc = sum(round_half_away(w.astype(F32) / w_quant_scale).astype(np.int64)[..., None] * v
                      for w, v in zip(weights, corners))
            out[r] = acc.sum(axis=(1, 3))
            real = F32(F32(F32(in_op.scale) * w_quant_scale) / F32(out_op.scale)) / F32(hr * wr)
            require(0.0 <= float(real) < 1.0, "ROI_ALIGN output multiplier must be below one")
            mult, shift = quantize_multiplier_smaller_than_one(float(real))
            lo, hi = quant_range(out_op.type)
            out[r] = np.clip(multiply_by_quantized_multiplier(out[r], mult, -shift) + out_op.zeroPoint, lo, hi)
        else:
            acc = sum(w[..., None] * v for w, v in zip(weights, corners))
            out[r] = acc.sum(axis=(1, 3), dtype=F32) / F32(hr * wr)
    if not quant and in_op.type == T.TENSOR_FLOAT16:
        out = out.astype(np.float16)
    return [bu.from_nhwc(out, nchw)]


register(OpSpec(Op.ROI_ALIGN, _roi_signatures([T.INT32, T.INT32]), _roi_align,
                validate=_roi_check, shape=partial(_roi_shape, layout_index=ALIGN_LAYOUT)))


# ================================================================ ROI_POOLING

def _bin_bounds(start: int, step: F32, bins: int, size: int):
    """[start, end) of each pooling bin along one axis: floor / ceil of the float bin edges."""
    j = np.arange(bins, dtype=F32)
    lo = np.floor(step * j + F32(start)).astype(np.int64)
    hi = np.ceil(step * (j + F32(1)) + F32(start)).astype(np.int64)
    return np.clip(lo, 0, size), np.clip(hi, 0, size)


def _roi_pooling(ctx: OpContext) -> list[np.ndarray]:
    _roi_check(ctx)
    x, rois, batch_ids, out_h, out_w, h_scale, w_scale, nchw = _roi_inputs(ctx, POOLING_LAYOUT)
    _, height, width, depth = x.shape
    in_op = ctx.in_operand(0)
    fill = x.dtype.type(in_op.zeroPoint if in_op.type in (Q8, Q8S) else 0)   # value of an empty bin
    lowest = np.array(-np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min, dtype=x.dtype)
    out = np.empty((rois.shape[0], out_h, out_w, depth), dtype=x.dtype)
    for r in range(rois.shape[0]):
        start = [int(round_half_away(F32(v * s))) for v, s in zip(rois[r], (w_scale, h_scale, w_scale, h_scale))]
        roi_w = F32(max(start[2] - start[0] + 1, 1))
        roi_h = F32(max(start[3] - start[1] + 1, 1))
        wlo, whi = _bin_bounds(start[0], F32(roi_w / F32(out_w)), out_w, width)
        hlo, hhi = _bin_bounds(start[1], F32(roi_h / F32(out_h)), out_h, height)
        # Only the window the bins cover is read (an empty window still needs one element).
        r0, c0 = min(int(hlo.min()), height - 1), min(int(wlo.min()), width - 1)
        r1, c1 = max(int(hhi.max()), r0 + 1), max(int(whi.max()), c0 + 1)
        cols = np.arange(c0, c1)
        rows = np.arange(r0, r1)
        wmask = (cols[None, :] >= wlo[:, None]) & (cols[None, :] < whi[:, None])   # [out_w, window w]
        hmask = (rows[None, :] >= hlo[:, None]) & (rows[None, :] < hhi[:, None])   # [out_h, window h]
        img = x[batch_ids[r], r0:r1, c0:c1]                                        # [window h, window w, D]
        # Max over each bin's columns, then over its rows (the max is separable).
        col_max = np.where(wmask[None, :, :, None], img[:, None, :, :], lowest).max(axis=2)
        pooled = np.where(hmask[:, :, None, None], col_max[None], lowest).max(axis=1)  # [out_h, out_w, D]
        empty = (hhi <= hlo)[:, None] | (whi <= wlo)[None, :]
        out[r] = np.where(empty[:, :, None], fill, pooled)
    return [bu.from_nhwc(out, nchw)]


register(OpSpec(Op.ROI_POOLING, _roi_signatures([]), _roi_pooling,
                validate=_roi_check, shape=partial(_roi_shape, layout_index=POOLING_LAYOUT)))


# ================================================================ HEATMAP_MAX_KEYPOINT

def _heatmap_check(ctx: OpContext) -> None:
    bu.check_rank(ctx, 0, 4, "heatmaps")
    bu.check_rank(ctx, 1, 2, "boxes")
    if ctx.in_operand(0).type in (Q8, Q8S):
        bu.check_box_quant(ctx, 1, "boxes")


def _solve_delta(g: np.ndarray, atol: float, rtol: float):
    """Taylor-expansion refinement of the max location from its 3x3 neighbourhood g [..., 3, 3].

    Returns (delta_w, delta_h, score), float32, as the reference's solveForDelta."""
    two, four = F32(2), F32(4)
    b0 = -(g[..., 1, 2] - g[..., 1, 0]) / two
    b1 = -(g[..., 2, 1] - g[..., 0, 1]) / two
    a00 = g[..., 1, 0] - two * g[..., 1, 1] + g[..., 1, 2]
    a01 = (g[..., 2, 2] - g[..., 2, 0] - g[..., 0, 2] + g[..., 0, 0]) / four
    a11 = g[..., 0, 1] - two * g[..., 1, 1] + g[..., 2, 1]
    cross1 = a00 * a11
    det = cross1 - a01 * a01
    solvable = ~(np.abs(det) < F32(atol) + F32(rtol) * cross1)
    safe = np.where(solvable, det, F32(1))
    d0 = np.where(solvable, (a11 * b0 - a01 * b1) / safe, F32(0)).astype(F32)
    d1 = np.where(solvable, (a00 * b1 - a01 * b0) / safe, F32(0)).astype(F32)
    big = np.maximum(np.abs(d0), np.abs(d1))
    clip = big > F32(1.5)
    scale = np.where(clip, F32(1.5) / np.where(clip, big, F32(1)), F32(1)).astype(F32)
    d0 = np.where(clip, d0 * scale, d0).astype(F32)
    d1 = np.where(clip, d1 * scale, d1).astype(F32)
    score = (g[..., 1, 1] - b0 * d0 - b1 * d1
             + ((a00 * d0 + a01 * d1) * d0 + (a01 * d0 + a11 * d1) * d1) / two)
    score = np.where(solvable, score, g[..., 1, 1]).astype(F32)
    return d0, d1, score


def _heatmap_shape(node: OpContext) -> list[tuple[int, ...]]:
    """scores [num_boxes, num_keypoints] and keypoints [num_boxes, num_keypoints, 2]."""
    n, size, size_w, k = bu.nhwc_dims(node, 0, bool(node.scalar(2)), "heatmaps")
    require(size == size_w, "heatmaps must be square")
    require(size >= 2, "heatmap size must be at least 2")
    require(bu.dims(node, 1, 2, "boxes") == (n, 4), "boxes must be [num_boxes, 4]")
    return [(n, k), (n, k, 2)]


def _heatmap_max_keypoint(ctx: OpContext) -> list[np.ndarray]:
    _heatmap_check(ctx)
    _heatmap_shape(ctx)
    nchw = bool(ctx.scalar(2))
    hm_op, box_op = ctx.in_operand(0), ctx.in_operand(1)
    hm = bu.to_nhwc(bu.to_float(ctx.input(0), hm_op), nchw)
    boxes = bu.to_float(ctx.input(1), box_op)
    n, size, _, k = hm.shape
    bu.check_valid_boxes(boxes, "boxes")
    tol = 1e-3 if hm_op.type == T.TENSOR_FLOAT16 else 1e-5

    flat = hm.reshape(n, size * size, k)
    idx = np.argmax(flat, axis=1)                                  # [n, k]: the first maximum
    mh, mw = idx // size, idx % size
    off = np.arange(-1, 2)
    rows = mh[..., None] + off                                     # [n, k, 3], mirrored at the edges
    cols = mw[..., None] + off
    rows = np.where(rows < 0, 1, np.where(rows >= size, size - 2, rows))
    cols = np.where(cols < 0, 1, np.where(cols >= size, size - 2, cols))
    bi = np.arange(n)[:, None, None, None]
    ki = np.arange(k)[None, :, None, None]
    grid = hm[bi, rows[..., :, None], cols[..., None, :], ki].astype(F32)  # [n, k, 3, 3]
    d0, d1, score = _solve_delta(grid, tol, tol)

    x1, y1 = boxes[:, 0:1], boxes[:, 1:2]
    roi_w, roi_h = boxes[:, 2:3] - x1, boxes[:, 3:4] - y1
    fsize = F32(size)
    kx = (mw.astype(F32) + d0 + F32(0.5)) / fsize * roi_w + x1
    ky = (mh.astype(F32) + d1 + F32(0.5)) / fsize * roi_h + y1
    keypoints = np.stack([kx, ky], axis=-1).astype(F32)
    kp_op = bu.QUANT_BOX if hm_op.type in (Q8, Q8S) else ctx.out_operand(1)
    return [bu.from_float(score, ctx.out_operand(0)), bu.from_float(keypoints, kp_op)]


def _heatmap_signatures():
    out = [sig([t, t, T.BOOL], [t, t], V.V1_2) for t, _ in FLOATS]
    out += [sig([q, Q16A, T.BOOL], [q, Q16A], v) for q, v in QUANTS]
    return out


register(OpSpec(Op.HEATMAP_MAX_KEYPOINT, _heatmap_signatures(), _heatmap_max_keypoint,
                validate=_heatmap_check, shape=_heatmap_shape))
