"""Detection ops: AXIS_ALIGNED_BBOX_TRANSFORM, BOX_WITH_NMS_LIMIT, GENERATE_PROPOSALS,
DETECTION_POSTPROCESSING.

Semantics follow the AOSP reference (bbox_ops): every variant dequantizes / widens to float32,
runs the float32 algorithm, and converts the results back (quantized boxes use the fixed scale
0.125). NMS is sequential by nature; everything around it is vectorised. The shape functions
hold the shape rules (the references call them first); how many boxes BOX_WITH_NMS_LIMIT and
GENERATE_PROPOSALS keep is known only once they have run.
"""
from __future__ import annotations

import numpy as np

from ..hal.types import OperandType as T
from ..hal.types import OperationType as Op
from .lib import boxes as bu
from .lib.boxes import F32, FLOATS, I32T, Q8, Q8S, Q16A, Q16S, QUANTS, require
from .node import DataDependent
from .registry import HalVersion as V
from .registry import OpContext, OpSpec, register, sig

# ================================================================ AXIS_ALIGNED_BBOX_TRANSFORM

def _bbox_check(ctx: OpContext) -> None:
    for i, rank, name in ((0, 2, "rois"), (1, 2, "deltas"), (2, 1, "batches"), (3, 2, "image info")):
        bu.check_rank(ctx, i, rank, name)
    bu.check_box_quant(ctx, 0, "rois")
    bu.check_box_quant(ctx, 3, "image info")


def _bbox_shape(node: OpContext) -> list[tuple[int, ...]]:
    """The boxes out have the deltas' shape [num_rois, num_classes * 4]."""
    (n, four), deltas = bu.dims(node, 0, 2, "rois"), bu.dims(node, 1, 2, "deltas")
    batches, info = bu.dims(node, 2, 1, "batches"), bu.dims(node, 3, 2, "image info")
    require(four == 4, "rois must be [num_rois, 4]")
    require(deltas[0] == n and deltas[1] > 0 and deltas[1] % 4 == 0, "deltas must be [num_rois, num_classes * 4]")
    require(batches == (n,), "batches must be [num_rois]")
    require(info[0] > 0 and info[1] == 2, "image info must be [batches, 2]")
    return [deltas]


def _bbox_transform(ctx: OpContext) -> list[np.ndarray]:
    _bbox_check(ctx)
    (shape,) = _bbox_shape(ctx)
    roi_raw, delta_raw, batches, info_raw = (ctx.input(i) for i in range(4))
    out_op = ctx.out_operand(0)
    quant = out_op.type == Q16A
    if roi_raw.shape[0] == 0:
        return [np.zeros(shape, dtype=roi_raw.dtype)]
    require(bool(np.all((batches >= 0) & (batches < info_raw.shape[0]))), "batch index out of range")
    rois = bu.to_float(roi_raw, ctx.in_operand(0))
    bu.check_valid_boxes(rois, "rois")
    deltas = bu.to_float(delta_raw, ctx.in_operand(1))
    info = bu.to_float(info_raw, ctx.in_operand(3))
    out = bu.bbox_transform(rois, deltas, info[batches])
    return [bu.from_float(out, bu.QUANT_BOX if quant else out_op)]


def _bbox_signatures():
    out = [sig([t, t, I32T, t], [t], V.V1_2) for t, _ in FLOATS]
    out += [sig([Q16A, q, I32T, Q16A], [Q16A], v) for q, v in QUANTS]
    return out


register(OpSpec(Op.AXIS_ALIGNED_BBOX_TRANSFORM, _bbox_signatures(), _bbox_transform,
                validate=_bbox_check, shape=_bbox_shape))


# ================================================================ BOX_WITH_NMS_LIMIT

def _nms_check(ctx: OpContext) -> None:
    for i, rank, name in ((0, 2, "scores"), (1, 2, "rois"), (2, 1, "batches")):
        bu.check_rank(ctx, i, rank, name)
    if ctx.in_operand(0).type in (Q8, Q8S):
        bu.check_box_quant(ctx, 1, "rois")
    method = bu.constant_scalar(ctx, 5)
    require(method is None or method in (0, 1, 2), f"unsupported NMS kernel {method}")


def _split_batches(batches: np.ndarray) -> list[tuple[int, int]]:
    """[start, end) of each run of equal batch indices (boxes of a batch are grouped)."""
    if batches.size == 0:
        return []
    starts = np.flatnonzero(np.r_[True, batches[1:] != batches[:-1]])
    ends = np.r_[starts[1:], batches.size]
    return list(zip(starts.tolist(), ends.tolist()))


def _box_with_nms_limit(ctx: OpContext) -> list[np.ndarray]:
    _nms_check(ctx)
    score_raw, roi_raw, batches = ctx.input(0), ctx.input(1), ctx.input(2)
    n, num_classes = score_raw.shape
    require(num_classes > 1, "scores need more than one class")
    require(roi_raw.shape == (n, num_classes * 4), "rois must be [num_rois, num_classes * 4]")
    require(batches.shape == (n,), "batches must be [num_rois]")
    score_thr = bu.float_scalar(ctx, 3)
    max_det = int(ctx.scalar(4))
    kernel = bu.soft_nms_kernel(int(ctx.scalar(5)), bu.float_scalar(ctx, 6), bu.float_scalar(ctx, 7))
    nms_score_thr = bu.float_scalar(ctx, 8)

    scores = bu.to_float(score_raw, ctx.in_operand(0)).reshape(-1).copy()
    boxes = bu.to_float(roi_raw, ctx.in_operand(1)).reshape(-1, 4)
    bu.check_valid_boxes(boxes, "rois")
    picked, out_batches = [], []
    for start, end in _split_batches(batches):
        base = start * num_classes
        s = scores[base:end * num_classes]   # a view: soft NMS updates the scores in place
        b = boxes[base:end * num_classes]
        per_class = s.reshape(-1, num_classes)
        result = []
        for c in range(1, num_classes):      # class 0 is the background
            cand = np.flatnonzero(per_class[:, c] > F32(score_thr)) * num_classes + c
            result.append(bu.nms_single_class(s, b, cand, max_det, kernel, 0.0, nms_score_thr))
        result = bu.sort_desc(np.concatenate(result), s)
        if max_det >= 0:
            result = result[:max_det]
        order = np.lexsort((-s[result].astype(np.float64), result % num_classes))  # by class, then score
        picked.append(result[order] + base)
        out_batches.append(np.full(result.size, batches[start], dtype=np.int32))
    sel = np.concatenate(picked) if picked else np.zeros(0, dtype=np.int64)
    return [bu.from_float(scores[sel], ctx.in_operand(0)),
            roi_raw.reshape(-1, 4)[sel],
            (sel % num_classes).astype(np.int32),
            np.concatenate(out_batches) if out_batches else np.zeros(0, dtype=np.int32)]


def _nms_signatures():
    out = []
    for t, s in FLOATS:
        out.append(sig([t, t, I32T, s, T.INT32, T.INT32, s, s, s], [t, t, I32T, I32T], V.V1_2))
    for q, v in QUANTS:
        f = T.FLOAT32
        out.append(sig([q, Q16A, I32T, f, T.INT32, T.INT32, f, f, f], [q, Q16A, I32T, I32T], v))
    return out


def _nms_shape(node: OpContext) -> list[tuple[int, ...]]:
    raise DataDependent("BOX_WITH_NMS_LIMIT: the number of boxes kept depends on the scores and boxes")


register(OpSpec(Op.BOX_WITH_NMS_LIMIT, _nms_signatures(), _box_with_nms_limit, validate=_nms_check,
                shape=_nms_shape))


# ================================================================ GENERATE_PROPOSALS

def _proposals_check(ctx: OpContext) -> None:
    for i, rank, name in ((0, 4, "scores"), (1, 4, "deltas"), (2, 2, "anchors"), (3, 2, "image info")):
        bu.check_rank(ctx, i, rank, name)
    if ctx.in_operand(0).type in (Q8, Q8S):
        bu.check_box_quant(ctx, 2, "anchors", zero_point=None)
        bu.check_box_quant(ctx, 3, "image info")


def _generate_proposals(ctx: OpContext) -> list[np.ndarray]:
    _proposals_check(ctx)
    nchw = bool(ctx.scalar(10))
    score_raw = bu.to_nhwc(ctx.input(0), nchw)
    delta_raw = bu.to_nhwc(ctx.input(1), nchw)
    anchor_raw, info_raw = ctx.input(2), ctx.input(3)
    nb, height, width, na = score_raw.shape
    require(delta_raw.shape == (nb, height, width, na * 4), "deltas must match scores with 4 values per anchor")
    require(anchor_raw.shape == (na, 4), "anchors must be [num_anchors, 4]")
    require(info_raw.shape == (nb, 2), "image info must be [batches, 2]")
    h_stride, w_stride = F32(bu.float_scalar(ctx, 4)), F32(bu.float_scalar(ctx, 5))
    pre_nms, post_nms = int(ctx.scalar(6)), int(ctx.scalar(7))
    iou_thr, min_size = bu.float_scalar(ctx, 8), F32(bu.float_scalar(ctx, 9))

    scores = bu.to_float(score_raw, ctx.in_operand(0)).reshape(nb, -1)
    deltas = bu.to_float(delta_raw, ctx.in_operand(1)).reshape(nb, -1, 4)
    anchors = bu.to_float(anchor_raw, ctx.in_operand(2))
    info = bu.to_float(info_raw, ctx.in_operand(3))
    bu.check_valid_boxes(anchors, "anchors")
    # Anchor boxes shifted to every feature-map location, in (h, w, anchor) order.
    hs = np.arange(height, dtype=F32) * h_stride
    ws = np.arange(width, dtype=F32) * w_stride
    shift = np.stack(np.broadcast_arrays(ws[None, :, None], hs[:, None, None],
                                         ws[None, :, None], hs[:, None, None]), axis=-1)
    rois = (anchors[None, None, :, :] + shift).reshape(-1, 4).astype(F32)

    out_scores, out_rois, out_batches = [], [], []
    for b in range(nb):
        boxes = bu.bbox_transform(rois, deltas[b], np.broadcast_to(info[b], (rois.shape[0], 2)))
        s = scores[b]
        select = np.arange(s.size)
        if 0 < pre_nms < select.size:
            select = bu.sort_desc(select, s)[:pre_nms]
        bw = boxes[select, 2] - boxes[select, 0]
        bh = boxes[select, 3] - boxes[select, 1]
        cx = boxes[select, 0] + bw / F32(2)
        cy = boxes[select, 1] + bh / F32(2)
        select = select[(bw > min_size) & (bh > min_size) & (cx < info[b, 1]) & (cy < info[b, 0])]
        keep = bu.nms_single_class(s, boxes, select, post_nms if post_nms > 0 else -1, None, iou_thr, 0.0)
        out_scores.append(s[keep])
        out_rois.append(boxes[keep])
        out_batches.append(np.full(keep.size, b, dtype=np.int32))
    roi_out_op = ctx.out_operand(1)
    return [bu.from_float(np.concatenate(out_scores), ctx.in_operand(0)),  # scores keep input0's quantization
            bu.from_float(np.concatenate(out_rois).reshape(-1, 4), roi_out_op),
            np.concatenate(out_batches)]


def _proposals_signatures():
    out = []
    for t, s in FLOATS:
        out.append(sig([t, t, t, t, s, s, T.INT32, T.INT32, s, s, T.BOOL], [t, t, I32T], V.V1_2))
    for q, v in QUANTS:
        f = T.FLOAT32
        out.append(sig([q, q, Q16S, Q16A, f, f, T.INT32, T.INT32, f, f, T.BOOL], [q, Q16A, I32T], v))
    return out


def _proposals_shape(node: OpContext) -> list[tuple[int, ...]]:
    raise DataDependent("GENERATE_PROPOSALS: the number of proposals kept depends on the scores and boxes")


register(OpSpec(Op.GENERATE_PROPOSALS, _proposals_signatures(), _generate_proposals,
                validate=_proposals_check, shape=_proposals_shape))


# ================================================================ DETECTION_POSTPROCESSING

def _postprocess_check(ctx: OpContext) -> None:
    for i, rank, name in ((0, 3, "scores"), (1, 3, "deltas"), (2, 2, "anchors")):
        bu.check_rank(ctx, i, rank, name)
    for i, name in ((3, "scale_y"), (4, "scale_x"), (5, "scale_h"), (6, "scale_w")):
        v = bu.constant_scalar(ctx, i)
        require(v is None or v > 0, f"{name} must be positive")
    for i, name in ((11, "score threshold"), (12, "IoU threshold")):
        v = bu.constant_scalar(ctx, i)
        require(v is None or v >= 0, f"{name} must be non-negative")
    max_det = bu.constant_scalar(ctx, 8)
    require(max_det is None or max_det > 0, "max_num_detections must be positive")
    regular = bu.constant_scalar(ctx, 7)
    if regular is not None:
        k = bu.constant_scalar(ctx, 10 if regular else 9)
        require(k is None or k > 0, "max detections per class / classes per detection must be positive")


def _postprocess_shape(node: OpContext) -> list[tuple[int, ...]]:
    """scores [batches, n], boxes [batches, n, 4], classes [batches, n], detection counts
    [batches], n the most detections of one batch: max_num_detections in regular NMS, times
    max_classes_per_detection otherwise (the rows past a batch's count are zeros)."""
    _postprocess_check(node)
    nb, na, nc = bu.dims(node, 0, 3, "scores")
    deltas, anchors = bu.dims(node, 1, 3, "deltas"), bu.dims(node, 2, 2, "anchors")
    require(nc > 1, "scores need more than one class")
    require(deltas[:2] == (nb, na) and deltas[2] >= 4, "deltas must be [batches, num_anchors, >=4]")
    require(anchors == (na, 4), "anchors must be [num_anchors, 4]")
    regular, max_det = bool(node.scalar(7)), int(node.scalar(8))
    n = max_det if regular else max_det * int(node.scalar(9))
    return [(nb, n), (nb, n, 4), (nb, n), (nb,)]


def _detection_postprocess(ctx: OpContext) -> list[np.ndarray]:
    shapes = _postprocess_shape(ctx)
    score_raw, delta_raw, anchor_raw = ctx.input(0), ctx.input(1), ctx.input(2)
    nb, _, nc = score_raw.shape
    sy, sx, sh, sw = (F32(bu.float_scalar(ctx, i)) for i in (3, 4, 5, 6))
    regular = bool(ctx.scalar(7))
    max_det, max_cls, max_per_class = int(ctx.scalar(8)), int(ctx.scalar(9)), int(ctx.scalar(10))
    score_thr, iou_thr = F32(bu.float_scalar(ctx, 11)), bu.float_scalar(ctx, 12)
    label_offset = 0 if ctx.scalar(13) else 1

    scores = bu.to_float(score_raw, ctx.in_operand(0))
    d = bu.to_float(delta_raw, ctx.in_operand(1))[..., :4]
    a = bu.to_float(anchor_raw, ctx.in_operand(2))
    # Decode [dy, dx, dh, dw] against [ctr_y, ctr_x, h, w] anchors into [y1, x1, y2, x2].
    with np.errstate(over="ignore"):
        y_ctr = a[:, 0] + a[:, 2] * d[..., 0] / sy
        x_ctr = a[:, 1] + a[:, 3] * d[..., 1] / sx
        h_half = a[:, 2] * np.exp(d[..., 2] / sh) * F32(0.5)
        w_half = a[:, 3] * np.exp(d[..., 3] / sw) * F32(0.5)
    boxes = np.stack([y_ctr - h_half, x_ctr - w_half, y_ctr + h_half, x_ctr + w_half], axis=-1).astype(F32)

    out_scores, out_boxes = np.zeros(shapes[0], dtype=F32), np.zeros(shapes[1], dtype=F32)
    out_classes, out_counts = np.zeros(shapes[2], dtype=np.int32), np.zeros(shapes[3], dtype=np.int32)
    for b in range(nb):
        s = scores[b]
        if regular:
            flat = s.reshape(-1)
            per_box = np.repeat(boxes[b], nc, axis=0)   # index a * nc + c -> box of anchor a
            sel = []
            for c in range(1, nc):
                cand = np.flatnonzero(s[:, c] > score_thr) * nc + c
                sel.append(bu.nms_single_class(flat, per_box, cand, max_per_class, None, iou_thr, 0.0))
            sel = bu.sort_desc(np.concatenate(sel), flat)[:max_det]
            k = sel.size
            out_scores[b, :k] = flat[sel]
            out_boxes[b, :k] = boxes[b][sel // nc]
            out_classes[b, :k] = sel % nc - label_offset
            out_counts[b] = k
        else:
            n_cls = min(nc - 1, max_cls)
            max_scores = s[:, 1:].max(axis=1)
            cand = np.flatnonzero(max_scores > score_thr)
            sel = bu.nms_single_class(max_scores, boxes[b], cand, max_det, None, iou_thr, 0.0)
            # Each kept anchor contributes its n_cls best classes, best first.
            cls = np.argsort(-s[sel, 1:].astype(np.float64), axis=1, kind="stable")[:, :n_cls] + 1
            k = sel.size * n_cls
            out_scores[b, :k] = np.take_along_axis(s[sel], cls, axis=1).reshape(-1)
            out_boxes[b, :k] = np.repeat(boxes[b][sel], n_cls, axis=0)
            out_classes[b, :k] = (cls - label_offset).reshape(-1)
            out_counts[b] = k
    out_type = ctx.out_operand(0)
    return [bu.from_float(out_scores, out_type), bu.from_float(out_boxes, ctx.out_operand(1)),
            out_classes, out_counts]


def _postprocess_signatures():
    out = []
    for t, s in FLOATS:
        ins = [t, t, t, s, s, s, s, T.BOOL, T.INT32, T.INT32, T.INT32, s, s, T.BOOL]
        out.append(sig(ins, [t, t, I32T, I32T], V.V1_2))
    return out


register(OpSpec(Op.DETECTION_POSTPROCESSING, _postprocess_signatures(), _detection_postprocess,
                validate=_postprocess_check, shape=_postprocess_shape))
