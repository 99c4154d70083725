"""Shared helpers of the detection and region-of-interest ops (registers no operation).

The reference kernels (AOSP CpuExecutor bbox_ops / roi ops) convert every input to float32,
compute in float32 and convert back; these helpers reproduce those conversions, the float32 IoU,
the in-place NMS selection loops (including their swap-to-the-end candidate order, which decides
ties) and the layout / argument checks the ops share.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from ...hal.types import OperandType as T
from ..registry import HalVersion as V
from ..registry import OpContext, OpError
from .dtypes import quant_range
from .quant import round_half_away

F32 = np.float32
Q8 = T.TENSOR_QUANT8_ASYMM
Q8S = T.TENSOR_QUANT8_ASYMM_SIGNED
Q16A = T.TENSOR_QUANT16_ASYMM
Q16S = T.TENSOR_QUANT16_SYMM
I32T = T.TENSOR_INT32
# (tensor type, its scalar type) of the float variants; (quant8 type, version) of the quantized ones
FLOATS = ((T.TENSOR_FLOAT32, T.FLOAT32), (T.TENSOR_FLOAT16, T.FLOAT16))
QUANTS = ((Q8, V.V1_2), (Q8S, V.V1_3))
QUANT_BOX_SCALE = 0.125  # the fixed scale of TENSOR_QUANT16_ASYMM boxes


# ---------------------------------------------------------------- type conversions

def to_float(value: np.ndarray, operand) -> np.ndarray:
    """The reference's input conversion: float16 widened, quantized (q - zp) * scale in float32."""
    if operand.type in (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.FLOAT32, T.FLOAT16):
        return np.asarray(value, dtype=F32)
    return (np.asarray(value).astype(F32) - F32(operand.zeroPoint)) * F32(operand.scale)


def from_float(x: np.ndarray, operand) -> np.ndarray:
    """convertFloat32ToQuant: round(x / scale + zp) in float32, saturated; floats are just cast."""
    x = np.asarray(x, dtype=F32)
    if operand.type == T.TENSOR_FLOAT32:
        return x
    if operand.type == T.TENSOR_FLOAT16:
        return x.astype(np.float16)
    lo, hi = quant_range(operand.type)
    with np.errstate(invalid="ignore", over="ignore"):
        q = round_half_away(x / F32(operand.scale) + F32(operand.zeroPoint))
    return np.clip(np.nan_to_num(q, nan=0.0), lo, hi).astype(np.int64)


class QuantParams:
    """Just the quantization of an operand (what to_float / from_float read)."""

    def __init__(self, type_: int, scale: float, zero_point: int):
        self.type, self.scale, self.zeroPoint = type_, scale, zero_point


# The quantization the reference gives every TENSOR_QUANT16_ASYMM box output.
QUANT_BOX = QuantParams(T.TENSOR_QUANT16_ASYMM, QUANT_BOX_SCALE, 0)


def float_scalar(ctx: OpContext, i: int) -> float:
    """A FLOAT32 / FLOAT16 scalar as the float32 the reference computes with."""
    return float(F32(ctx.scalar(i)))


# ---------------------------------------------------------------- layout

def to_nhwc(x: np.ndarray, nchw: bool) -> np.ndarray:
    return np.transpose(x, (0, 2, 3, 1)) if nchw else x


def from_nhwc(x: np.ndarray, nchw: bool) -> np.ndarray:
    return np.transpose(x, (0, 3, 1, 2)) if nchw else x


def shape_from_nhwc(shape: tuple[int, int, int, int], nchw: bool) -> tuple[int, int, int, int]:
    """An [batches, height, width, depth] shape in the op's layout."""
    n, h, w, c = shape
    return (n, c, h, w) if nchw else shape


# ---------------------------------------------------------------- checks

def require(cond: bool, reason: str) -> None:
    if not cond:
        raise OpError(reason)


def check_rank(ctx: OpContext, i: int, rank: int, name: str) -> None:
    """Rank check on a known shape (validation: the operand's dims when given; execution: the value)."""
    v = ctx.values[i] if i < len(ctx.values) else None
    if v is not None:
        require(v.ndim == rank, f"{name} must be {rank}-D, got shape {list(v.shape)}")
        return
    dims = ctx.in_operand(i).dimensions
    require(not dims or len(dims) == rank, f"{name} must be {rank}-D, got dims {list(dims)}")


def dims(node: OpContext, i: int, rank: int, name: str) -> tuple[int, ...]:
    """Input i's shape, which must have `rank` dimensions (shape functions)."""
    shape = node.in_shape(i)
    require(len(shape) == rank, f"{name} must be {rank}-D, got shape {list(shape)}")
    return shape


def nhwc_dims(node: OpContext, i: int, nchw: bool, name: str) -> tuple[int, int, int, int]:
    """The 4-D input i's shape as [batches, height, width, depth] (shape functions)."""
    n, a, b, c = dims(node, i, 4, name)
    return (n, b, c, a) if nchw else (n, a, b, c)


def check_box_quant(ctx: OpContext, i: int, name: str, zero_point: int | None = 0) -> None:
    """TENSOR_QUANT16_ASYMM / _SYMM box tensors carry the fixed scale 0.125 (and zero point 0)."""
    op = ctx.in_operand(i)
    if op.type in (T.TENSOR_QUANT16_ASYMM, T.TENSOR_QUANT16_SYMM):
        require(F32(op.scale) == F32(QUANT_BOX_SCALE), f"{name} scale must be 0.125, got {op.scale}")
        if zero_point is not None:
            require(op.zeroPoint == zero_point, f"{name} zeroPoint must be {zero_point}, got {op.zeroPoint}")


def check_valid_boxes(boxes: np.ndarray, name: str) -> None:
    """Boxes [..., 4] as [x1, y1, x2, y2] must satisfy x1 <= x2 and y1 <= y2."""
    b = boxes.reshape(-1, 4)
    require(bool(np.all(b[:, 0] <= b[:, 2]) and np.all(b[:, 1] <= b[:, 3])),
            f"{name} has a box with x2 < x1 or y2 < y1")


def constant_scalar(ctx: OpContext, i: int):
    """A scalar input's value when it is known (constant at validation; always at execution)."""
    v = ctx.values[i] if i < len(ctx.values) else None
    return None if v is None else v.reshape(-1)[0].item()


# ---------------------------------------------------------------- geometry

def iou_one_to_many(box: np.ndarray, boxes: np.ndarray) -> np.ndarray:
    """getIoUAxisAligned of one [x1, y1, x2, y2] box against many, in float32."""
    box = box.astype(F32, copy=False)
    boxes = boxes.astype(F32, copy=False)
    area1 = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    area2 = (box[2] - box[0]) * (box[3] - box[1])
    w = np.maximum(np.minimum(boxes[:, 2], box[2]) - np.maximum(boxes[:, 0], box[0]), F32(0))
    h = np.maximum(np.minimum(boxes[:, 3], box[3]) - np.maximum(boxes[:, 1], box[1]), F32(0))
    inter = w * h
    with np.errstate(invalid="ignore", divide="ignore"):
        return (inter / (area1 + area2 - inter)).astype(F32)


def bbox_transform(rois: np.ndarray, deltas: np.ndarray, image_hw: np.ndarray) -> np.ndarray:
    """Apply [dx, dy, dw, dh] deltas per class to [x1, y1, x2, y2] rois and clip to the image.

    rois [n, 4], deltas [n, C*4], image_hw [n, 2] (height, width of each roi's image), all float32;
    returns [n, C*4] float32 computed in the reference's order of float32 operations."""
    n = rois.shape[0]
    d = deltas.reshape(n, -1, 4)
    w = (rois[:, 2] - rois[:, 0])[:, None]
    h = (rois[:, 3] - rois[:, 1])[:, None]
    cx = ((rois[:, 0] + rois[:, 2]) / F32(2))[:, None]
    cy = ((rois[:, 1] + rois[:, 3]) / F32(2))[:, None]
    with np.errstate(over="ignore"):
        nw = np.exp(d[..., 2]) * w
        nh = np.exp(d[..., 3]) * h
    nx = cx + d[..., 0] * w
    ny = cy + d[..., 1] * h
    img_h = image_hw[:, 0:1]
    img_w = image_hw[:, 1:2]
    out = np.stack([
        np.minimum(np.maximum(nx - nw / F32(2), F32(0)), img_w),
        np.minimum(np.maximum(ny - nh / F32(2), F32(0)), img_h),
        np.minimum(np.maximum(nx + nw / F32(2), F32(0)), img_w),
        np.minimum(np.maximum(ny + nh / F32(2), F32(0)), img_h),
    ], axis=-1)
    return out.astype(F32).reshape(n, -1)


# ---------------------------------------------------------------- NMS

def _partition(cand: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """The kept candidates in the order the reference's swap-to-the-end removal leaves them.

    Scanning left to right, a removed element is swapped with the last unscanned one; so the kept
    elements of the first m slots (m = number kept) stay in place and the holes are filled by the
    kept elements behind slot m, taken from the back."""
    m = int(keep.sum())
    out = cand[:m].copy()
    holes = np.flatnonzero(~keep[:m])
    if holes.size:
        fillers = cand[m:][keep[m:]][::-1]
        out[holes] = fillers
    return out


def nms_single_class(scores: np.ndarray, boxes: np.ndarray, cand: np.ndarray, max_det: int,
                     kernel: Callable[[np.ndarray], np.ndarray] | None,
                     iou_threshold: float, score_threshold: float) -> np.ndarray:
    """The reference's in-place NMS over candidate indices `cand` (into `scores` / `boxes`).

    Hard NMS (`kernel` None) drops candidates with IoU >= iou_threshold. Soft NMS multiplies the
    remaining scores (in place, float32) by kernel(IoU) and drops those below score_threshold.
    Returns the selected indices in selection order; at most max_det (negative: unlimited)."""
    cand = np.asarray(cand, dtype=np.int64)
    if max_det < 0:
        max_det = cand.size
    selected = []
    while cand.size and len(selected) < max_det:
        top = int(np.argmax(scores[cand]))  # std::max_element: the first of equal maxima
        cand[[0, top]] = cand[[top, 0]]
        best = cand[0]
        selected.append(best)
        rest = cand[1:]
        if rest.size == 0:
            break
        iou = iou_one_to_many(boxes[best], boxes[rest])
        if kernel is None:
            keep = ~(iou >= F32(iou_threshold))
        else:
            scores[rest] = (scores[rest] * kernel(iou)).astype(F32)
            keep = ~(scores[rest] < F32(score_threshold))
        cand = _partition(rest, keep)
    return np.asarray(selected, dtype=np.int64)


def soft_nms_kernel(method: int, iou_threshold: float, sigma: float) -> Callable[[np.ndarray], np.ndarray]:
    """The BOX_WITH_NMS_LIMIT score kernels: 0 hard, 1 linear, 2 gaussian (float32)."""
    thr = F32(iou_threshold)
    if method == 0:
        return lambda iou: np.where(iou < thr, F32(1), F32(0)).astype(F32)
    if method == 1:
        return lambda iou: np.where(iou < thr, F32(1), F32(1) - iou).astype(F32)
    if method == 2:
        s = F32(sigma)
        return lambda iou: np.exp(F32(-1) * iou * iou / s).astype(F32)
    raise OpError(f"unsupported NMS kernel {method}")


def sort_desc(indices: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """Indices ordered by descending score, equal scores keeping their order."""
    indices = np.asarray(indices, dtype=np.int64)
    return indices[np.argsort(-scores[indices].astype(np.float64), kind="stable")]
