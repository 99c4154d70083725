"""AXIS_ALIGNED_BBOX_TRANSFORM, BOX_WITH_NMS_LIMIT, GENERATE_PROPOSALS, DETECTION_POSTPROCESSING:
edges the corpus leaves out, checked against straightforward re-computations, and error paths."""
from __future__ import annotations

import math

import numpy as np
import pytest

from nngpu.hal.types import ErrorStatus
from nngpu.hal.types import OperandType as T
from nngpu.hal.types import OperationType as Op
from nngpu.ops.lib import boxes as bu
from nngpu.ops import load_all
from nngpu.ops.registry import HalVersion, OpContext, lookup
from nngpu.testing import output, run_op, scalar, single_op_model, tensor

load_all()
F32, F16, I32 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_INT32



def run_kernel(op_type, inputs, outputs):
    """Call the op's kernel directly: the driver refuses zero-sized model inputs, which these
    ops only ever receive from an earlier operation."""
    model = single_op_model(op_type, inputs, outputs)
    ctx = OpContext(model.operations[0], model.operands, [v.value for v in inputs])
    return lookup(op_type).reference(ctx)


# ---------------------------------------------------------------- helpers under test

def _swap_loop(cand: list[int], keep: dict[int, bool]) -> list[int]:
    """The reference's literal removal loop: swap a dropped element with the last one."""
    a, i, end = list(cand), 0, len(cand)
    while i < end:
        if not keep[a[i]]:
            end -= 1
            a[i], a[end] = a[end], a[i]
        else:
            i += 1
    return a[:end]


def test_partition_matches_swap_loop():
    rng = np.random.default_rng(0)
    for _ in range(200):
        n = int(rng.integers(0, 12))
        cand = rng.permutation(50)[:n]
        keep = rng.random(n) < 0.5
        got = bu._partition(cand, keep)
        assert got.tolist() == _swap_loop(cand.tolist(), dict(zip(cand.tolist(), keep.tolist())))


def _iou(a, b) -> float:
    iw = max(min(a[2], b[2]) - max(a[0], b[0]), 0.0)
    ih = max(min(a[3], b[3]) - max(a[1], b[1]), 0.0)
    inter = iw * ih
    return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)


def _greedy_nms(scores, boxes, thr, limit):
    """Textbook hard NMS on distinct scores: best first, drop overlaps >= thr."""
    order = sorted(range(len(scores)), key=lambda i: -scores[i])
    kept = []
    for i in order:
        if all(_iou(boxes[i], boxes[j]) < thr for j in kept):
            kept.append(i)
        if limit >= 0 and len(kept) == limit:
            break
    return kept


def _random_boxes(rng, n):
    xy = rng.uniform(0, 20, size=(n, 2))
    wh = rng.uniform(1, 8, size=(n, 2))
    return np.concatenate([xy, xy + wh], axis=1).astype(np.float32)


# ---------------------------------------------------------------- BOX_WITH_NMS_LIMIT

def _nms_inputs(scores, boxes, batches, score_thr=0.0, max_det=-1, kernel=0, iou=0.5, sigma=1.0, nms_thr=0.0,
                t=F32, s=T.FLOAT32):
    return [tensor(t, scores), tensor(t, boxes), tensor(I32, batches), scalar(s, score_thr),
            scalar(T.INT32, max_det), scalar(T.INT32, kernel), scalar(s, iou), scalar(s, sigma), scalar(s, nms_thr)]


def _nms_outputs(t=F32, scale=0.0, zp=0, box_t=F32, box_scale=0.0):
    return [output(t, [0], scale, zp), output(box_t, [0, 4], box_scale), output(I32, [0]), output(I32, [0])]


def test_box_with_nms_hard_matches_greedy_nms_two_batches():
    rng = np.random.default_rng(1)
    n, classes = 12, 3
    scores = rng.permutation(n * classes).reshape(n, classes).astype(np.float32) / (n * classes)
    boxes = np.concatenate([_random_boxes(rng, n) for _ in range(classes)], axis=1)
    batches = np.array([0] * 7 + [1] * 5, dtype=np.int32)
    r = run_op(Op.BOX_WITH_NMS_LIMIT, _nms_inputs(scores, boxes, batches, score_thr=0.1, max_det=4),
               _nms_outputs())
    assert r.status == ErrorStatus.NONE
    exp_scores, exp_classes, exp_batches = [], [], []
    for b, (lo, hi) in enumerate(((0, 7), (7, 12))):
        found = []  # (class, score)
        for c in range(1, classes):
            idx = [i for i in range(lo, hi) if scores[i, c] > 0.1]
            kept = _greedy_nms([scores[i, c] for i in idx], [boxes[i, 4 * c:4 * c + 4] for i in idx], 0.5, 4)
            found += [(c, scores[idx[k], c]) for k in kept]
        found = sorted(found, key=lambda f: -f[1])[:4]
        found.sort(key=lambda f: (f[0], -f[1]))
        exp_classes += [f[0] for f in found]
        exp_scores += [f[1] for f in found]
        exp_batches += [b] * len(found)
    np.testing.assert_array_equal(r.outputs[0], np.array(exp_scores, dtype=np.float32))
    np.testing.assert_array_equal(r.outputs[2], exp_classes)
    np.testing.assert_array_equal(r.outputs[3], exp_batches)


def test_box_with_nms_gaussian_decays_overlapping_score():
    scores = np.array([[0.0, 0.9], [0.0, 0.8]], dtype=np.float32)
    boxes = np.array([[0, 0, 1, 1, 0, 0, 10, 10], [0, 0, 1, 1, 0, 0, 10, 5]], dtype=np.float32)
    r = run_op(Op.BOX_WITH_NMS_LIMIT, _nms_inputs(scores, boxes, np.zeros(2, np.int32), kernel=2, sigma=0.5,
                                                  nms_thr=0.01), _nms_outputs())
    assert r.status == ErrorStatus.NONE
    expected = 0.8 * math.exp(-(0.5 ** 2) / 0.5)   # IoU of the two boxes is 0.5
    np.testing.assert_allclose(r.outputs[0], [0.9, expected], rtol=1e-6)


def test_box_with_nms_zero_rois_gives_zero_sized_outputs():
    outs = run_kernel(Op.BOX_WITH_NMS_LIMIT,
                      _nms_inputs(np.zeros((0, 2), np.float32), np.zeros((0, 8), np.float32), np.zeros(0, np.int32)),
                      _nms_outputs())
    assert [list(o.shape) for o in outs] == [[0], [0, 4], [0], [0]]


def test_box_with_nms_nothing_above_threshold_gives_zero_sized_outputs():
    r = run_op(Op.BOX_WITH_NMS_LIMIT, _nms_inputs(np.array([[0.5, 0.2]], np.float32), np.ones((1, 8), np.float32),
                                                  np.zeros(1, np.int32), score_thr=0.3), _nms_outputs())
    assert r.status == ErrorStatus.NONE
    assert r.shapes == [[0], [0, 4], [0], [0]]


def test_box_with_nms_quant_scores_saturate_and_boxes_copy():
    scores = np.array([[0, 200], [0, 100]], dtype=np.uint8)
    boxes = np.array([[0, 0, 8, 8, 0, 0, 80, 80], [0, 0, 8, 8, 160, 160, 240, 240]], dtype=np.uint16)
    r = run_op(Op.BOX_WITH_NMS_LIMIT,
               [tensor(T.TENSOR_QUANT8_ASYMM, scores, 0.01, 0), tensor(T.TENSOR_QUANT16_ASYMM, boxes, 0.125, 0),
                tensor(I32, np.zeros(2, np.int32)), scalar(T.FLOAT32, 0.0), scalar(T.INT32, -1),
                scalar(T.INT32, 0), scalar(T.FLOAT32, 0.5), scalar(T.FLOAT32, 1.0), scalar(T.FLOAT32, 0.0)],
               _nms_outputs(T.TENSOR_QUANT8_ASYMM, 0.01, 0, T.TENSOR_QUANT16_ASYMM, 0.125))
    assert r.status == ErrorStatus.NONE
    np.testing.assert_array_equal(r.outputs[0], [200, 100])
    np.testing.assert_array_equal(r.outputs[1], [[0, 0, 80, 80], [160, 160, 240, 240]])


@pytest.mark.parametrize("case", ["bad_kernel", "invalid_box", "one_class"])
def test_box_with_nms_errors(case):
    scores = np.array([[0.1, 0.9]], dtype=np.float32)
    boxes = np.array([[0, 0, 1, 1, 0, 0, 2, 2]], dtype=np.float32)
    kw = {}
    if case == "bad_kernel":
        kw["kernel"] = 3
    elif case == "invalid_box":
        boxes = np.array([[0, 0, 1, 1, 3, 0, 2, 2]], dtype=np.float32)
    else:
        scores, boxes = scores[:, :1], boxes[:, :4]
    r = run_op(Op.BOX_WITH_NMS_LIMIT, _nms_inputs(scores, boxes, np.zeros(1, np.int32), **kw), _nms_outputs())
    assert r.status != ErrorStatus.NONE


def test_box_with_nms_signatures():
    spec = lookup(Op.BOX_WITH_NMS_LIMIT)
    outs = [F16, F16, I32, I32]
    f16_ok = [F16, F16, I32, T.FLOAT16, T.INT32, T.INT32, T.FLOAT16, T.FLOAT16, T.FLOAT16]
    assert spec.match(f16_ok, outs).version == HalVersion.V1_2
    assert spec.match(f16_ok[:3] + [T.FLOAT32] + f16_ok[4:], outs) is None
    q = T.TENSOR_QUANT8_ASYMM_SIGNED
    q_ins = [q, T.TENSOR_QUANT16_ASYMM, I32, T.FLOAT32, T.INT32, T.INT32, T.FLOAT32, T.FLOAT32, T.FLOAT32]
    assert spec.match(q_ins, [q, T.TENSOR_QUANT16_ASYMM, I32, I32]).version == HalVersion.V1_3


# ---------------------------------------------------------------- AXIS_ALIGNED_BBOX_TRANSFORM

def _bbox_loop(rois, deltas, batches, info):
    out = np.zeros_like(deltas, dtype=np.float64)
    for i, (x1, y1, x2, y2) in enumerate(rois.astype(np.float64)):
        h_img, w_img = info[batches[i]]
        w, h, cx, cy = x2 - x1, y2 - y1, (x1 + x2) / 2, (y1 + y2) / 2
        for c in range(deltas.shape[1] // 4):
            dx, dy, dw, dh = deltas[i, 4 * c:4 * c + 4]
            nw, nh, nx, ny = math.exp(dw) * w, math.exp(dh) * h, cx + dx * w, cy + dy * h
            out[i, 4 * c:4 * c + 4] = [min(max(nx - nw / 2, 0), w_img), min(max(ny - nh / 2, 0), h_img),
                                       min(max(nx + nw / 2, 0), w_img), min(max(ny + nh / 2, 0), h_img)]
    return out


def test_bbox_transform_matches_formula_with_clipping():
    rng = np.random.default_rng(2)
    rois = _random_boxes(rng, 5)
    deltas = rng.normal(0, 0.8, size=(5, 12)).astype(np.float32)  # large enough to hit the clip
    batches = np.array([0, 1, 1, 0, 1], dtype=np.int32)
    info = np.array([[16, 18], [30, 12]], dtype=np.float32)
    r = run_op(Op.AXIS_ALIGNED_BBOX_TRANSFORM, [tensor(F32, rois), tensor(F32, deltas), tensor(I32, batches),
                                                tensor(F32, info)], [output(F32, [5, 12])])
    assert r.status == ErrorStatus.NONE
    np.testing.assert_allclose(r.outputs[0], _bbox_loop(rois, deltas, batches, info), rtol=1e-5, atol=1e-5)


def test_bbox_transform_zero_rois():
    outs = run_kernel(Op.AXIS_ALIGNED_BBOX_TRANSFORM,
                      [tensor(F32, np.zeros((0, 4))), tensor(F32, np.zeros((0, 8))), tensor(I32, np.zeros(0)),
                       tensor(F32, [[10, 10]])], [output(F32, [0, 8])])
    assert outs[0].shape == (0, 8)


@pytest.mark.parametrize("batch,roi", [(2, [0, 0, 4, 4]), (0, [5, 0, 4, 4])])
def test_bbox_transform_errors(batch, roi):
    r = run_op(Op.AXIS_ALIGNED_BBOX_TRANSFORM,
               [tensor(F32, [roi]), tensor(F32, np.zeros((1, 4))), tensor(I32, [batch]),
                tensor(F32, [[10, 10], [10, 10]])], [output(F32, [1, 4])])
    assert r.status == ErrorStatus.GENERAL_FAILURE


# ---------------------------------------------------------------- GENERATE_PROPOSALS

def _proposal_inputs(scores, deltas, anchors, info, pre=-1, post=-1, iou=0.5, min_size=0.0, nchw=False):
    return [tensor(F32, scores), tensor(F32, deltas), tensor(F32, anchors), tensor(F32, info),
            scalar(T.FLOAT32, 2.0), scalar(T.FLOAT32, 2.0), scalar(T.INT32, pre), scalar(T.INT32, post),
            scalar(T.FLOAT32, iou), scalar(T.FLOAT32, min_size), scalar(T.BOOL, nchw)]


def test_generate_proposals_nchw_equals_nhwc_and_shifts_anchors():
    rng = np.random.default_rng(3)
    scores = rng.permutation(2 * 2 * 3 * 2).reshape(2, 2, 3, 2).astype(np.float32) / 24  # [b, h, w, a]
    deltas = np.zeros((2, 2, 3, 8), dtype=np.float32)
    anchors = np.array([[0, 0, 3, 3], [0, 0, 5, 2]], dtype=np.float32)
    info = np.array([[40, 40], [40, 40]], dtype=np.float32)
    outs = [output(F32, [0]), output(F32, [0, 4]), output(I32, [0])]
    a = run_op(Op.GENERATE_PROPOSALS, _proposal_inputs(scores, deltas, anchors, info, iou=1.01), outs)
    b = run_op(Op.GENERATE_PROPOSALS, _proposal_inputs(scores.transpose(0, 3, 1, 2), deltas.transpose(0, 3, 1, 2),
                                                       anchors, info, iou=1.01, nchw=True), outs)
    assert a.status == b.status == ErrorStatus.NONE
    for x, y in zip(a.outputs, b.outputs):
        np.testing.assert_array_equal(x, y)
    # With zero deltas and no suppression every anchor comes back, shifted by its location.
    assert a.shapes[0] == [24]
    top = np.unravel_index(np.argmax(scores[0]), scores[0].shape)   # (h, w, anchor)
    np.testing.assert_array_equal(a.outputs[1][0], anchors[top[2]] + [2 * top[1], 2 * top[0], 2 * top[1], 2 * top[0]])


def test_generate_proposals_invalid_anchor_fails():
    r = run_op(Op.GENERATE_PROPOSALS,
               _proposal_inputs(np.ones((1, 1, 1, 1)), np.zeros((1, 1, 1, 4)), [[3, 0, 1, 2]], [[10, 10]]),
               [output(F32, [0]), output(F32, [0, 4]), output(I32, [0])])
    assert r.status == ErrorStatus.GENERAL_FAILURE


# ---------------------------------------------------------------- DETECTION_POSTPROCESSING

def _postprocess_inputs(scores, deltas, anchors, regular, max_det=3, max_cls=1, per_class=1, thr=0.0, iou=0.5,
                        bg=False):
    f = T.FLOAT32
    return [tensor(F32, scores), tensor(F32, deltas), tensor(F32, anchors), scalar(f, 10.0), scalar(f, 10.0),
            scalar(f, 5.0), scalar(f, 5.0), scalar(T.BOOL, regular), scalar(T.INT32, max_det),
            scalar(T.INT32, max_cls), scalar(T.INT32, per_class), scalar(f, thr), scalar(f, iou), scalar(T.BOOL, bg)]


def test_detection_postprocess_decodes_and_pads():
    scores = np.array([[[0, 0.9, 0.2], [0, 0.1, 0.3]]], dtype=np.float32)
    deltas = np.array([[[1, 2, 0.5, -0.5], [0, 0, 0, 0]]], dtype=np.float32)
    anchors = np.array([[5, 5, 2, 4], [20, 20, 2, 2]], dtype=np.float32)
    r = run_op(Op.DETECTION_POSTPROCESSING, _postprocess_inputs(scores, deltas, anchors, False, max_det=3, max_cls=2),
               [output(F32, [1, 6]), output(F32, [1, 6, 4]), output(I32, [1, 6]), output(I32, [1])])
    assert r.status == ErrorStatus.NONE
    y, x = 5 + 2 * 1 / 10, 5 + 4 * 2 / 10
    h, w = 2 * math.exp(0.5 / 5) / 2, 4 * math.exp(-0.5 / 5) / 2
    np.testing.assert_allclose(r.outputs[1][0, 0], [y - h, x - w, y + h, x + w], rtol=1e-6)
    np.testing.assert_allclose(r.outputs[0][0], [0.9, 0.2, 0.3, 0.1, 0, 0], rtol=1e-6)
    np.testing.assert_array_equal(r.outputs[2][0], [0, 1, 1, 0, 0, 0])
    np.testing.assert_array_equal(r.outputs[3], [4])


def test_detection_postprocess_zero_max_detections_fails():
    scores = np.zeros((1, 1, 2), dtype=np.float32)
    r = run_op(Op.DETECTION_POSTPROCESSING,
               _postprocess_inputs(scores, np.zeros((1, 1, 4)), np.ones((1, 4)), True, max_det=0),
               [output(F32, [1, 0]), output(F32, [1, 0, 4]), output(I32, [1, 0]), output(I32, [1])])
    assert r.status != ErrorStatus.NONE
