"""ROI_ALIGN, ROI_POOLING, HEATMAP_MAX_KEYPOINT: edges the corpus leaves out, checked against
straightforward loops, and error paths."""
from __future__ import annotations

import math

import numpy as np
import pytest

from nngpu.hal.types import ErrorStatus
from nngpu.hal.types import OperandType as T
from nngpu.hal.types import OperationType as Op
from nngpu.ops import load_all
from nngpu.ops.registry import HalVersion, OpContext, lookup
from nngpu.testing import output, run_op, scalar, single_op_model, tensor

load_all()
F32, I32 = T.TENSOR_FLOAT32, T.TENSOR_INT32
Q8, Q16A = T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT16_ASYMM


def run_kernel(op_type, inputs, outputs):
    """Call the kernel directly (zero-sized tensors only reach it from an earlier operation)."""
    model = single_op_model(op_type, inputs, outputs)
    return lookup(op_type).reference(OpContext(model.operations[0], model.operands, [v.value for v in inputs]))


# ---------------------------------------------------------------- ROI_ALIGN

def _align_loop(img, rois, batch, oh, ow, stride, ratio):
    """ROI_ALIGN by the definition: average of bilinear samples on a regular grid in each bin."""
    n, (_, H, W, D) = len(rois), img.shape
    out = np.zeros((n, oh, ow, D))
    for r in range(n):
        x1, y1, x2, y2 = np.asarray(rois[r], dtype=np.float64) / stride
        bh, bw = max(y2 - y1, 1.0) / oh, max(x2 - x1, 1.0) / ow
        sh = ratio or math.ceil(bh)
        sw = ratio or math.ceil(bw)
        for i in range(oh):
            for j in range(ow):
                acc = np.zeros(D)
                for a in range(sh):
                    for b in range(sw):
                        y = y1 + i * bh + (a + 0.5) * bh / sh
                        x = x1 + j * bw + (b + 0.5) * bw / sw
                        y0, x0 = min(int(y), H - 1), min(int(x), W - 1)
                        fy = 0.0 if y0 == H - 1 else y - y0
                        fx = 0.0 if x0 == W - 1 else x - x0
                        ya, xa = min(y0 + 1, H - 1), min(x0 + 1, W - 1)
                        p = img[batch[r]]
                        acc += ((1 - fy) * (1 - fx) * p[y0, x0] + (1 - fy) * fx * p[y0, xa]
                                + fy * (1 - fx) * p[ya, x0] + fy * fx * p[ya, xa])
                out[r, i, j] = acc / (sh * sw)
    return out


def _align_inputs(img, rois, batch, oh=2, ow=3, stride=2.0, ratio=0, nchw=False, t=F32, roi_t=F32,
                  scale=0.0, zp=0):
    s = T.FLOAT32
    return [tensor(t, img, scale, zp), tensor(roi_t, rois, 0.125 if roi_t == Q16A else 0.0), tensor(I32, batch),
            scalar(T.INT32, oh), scalar(T.INT32, ow), scalar(s, stride), scalar(s, stride),
            scalar(T.INT32, ratio), scalar(T.INT32, ratio), scalar(T.BOOL, nchw)]


@pytest.mark.parametrize("ratio", [0, 2])
def test_roi_align_matches_loop_including_edge_samples(ratio):
    rng = np.random.default_rng(4)
    img = rng.normal(size=(2, 5, 6, 3)).astype(np.float32)
    rois = np.array([[0, 0, 12, 10], [3, 2, 11.5, 9], [10, 8, 12, 10], [1, 1, 1, 1]], dtype=np.float32)
    batch = np.array([0, 1, 1, 0], dtype=np.int32)
    r = run_op(Op.ROI_ALIGN, _align_inputs(img, rois, batch, ratio=ratio), [output(F32, [4, 2, 3, 3])])
    assert r.status == ErrorStatus.NONE
    np.testing.assert_allclose(r.outputs[0], _align_loop(img, rois, batch, 2, 3, 2.0, ratio), rtol=1e-5, atol=1e-5)


def test_roi_align_nchw_is_transposed_nhwc():
    rng = np.random.default_rng(5)
    img = rng.normal(size=(1, 4, 4, 2)).astype(np.float32)
    rois = np.array([[0, 0, 6, 8], [2, 2, 8, 8]], dtype=np.float32)
    batch = np.zeros(2, dtype=np.int32)
    a = run_op(Op.ROI_ALIGN, _align_inputs(img, rois, batch), [output(F32, [2, 2, 3, 2])])
    b = run_op(Op.ROI_ALIGN, _align_inputs(img.transpose(0, 3, 1, 2), rois, batch, nchw=True),
               [output(F32, [2, 2, 2, 3])])
    np.testing.assert_array_equal(a.outputs[0], b.outputs[0].transpose(0, 2, 3, 1))


def test_roi_align_quant_close_to_float():
    rng = np.random.default_rng(6)
    q = rng.integers(0, 256, size=(1, 4, 4, 2)).astype(np.uint8)
    rois = np.array([[0, 0, 8, 8], [1, 3, 6, 7]], dtype=np.float32)
    batch = np.zeros(2, dtype=np.int32)
    r = run_op(Op.ROI_ALIGN, _align_inputs(q, (rois * 8).astype(np.uint16), batch, t=Q8, roi_t=Q16A,
                                           scale=0.5, zp=100), [output(Q8, [2, 2, 3, 2], 0.25, 120)])
    assert r.status == ErrorStatus.NONE
    ref = _align_loop((q.astype(np.float64) - 100) * 0.5, rois, batch, 2, 3, 2.0, 0)
    expected = np.clip(np.round(ref / 0.25 + 120), 0, 255)
    assert np.max(np.abs(r.outputs[0].astype(np.int64) - expected)) <= 1


def test_roi_align_zero_rois():
    outs = run_kernel(Op.ROI_ALIGN, _align_inputs(np.ones((1, 4, 4, 2), np.float32), np.zeros((0, 4), np.float32),
                                                  np.zeros(0, np.int32), nchw=True), [output(F32, [0, 4, 2, 3])])
    assert outs[0].shape == (0, 4, 2, 3)   # NCHW: depth 4 first


@pytest.mark.parametrize("roi,batch", [([0, 0, 20, 4], 0), ([0, 0, 4, 4], 1), ([4, 0, 2, 4], 0), ([-1, 0, 2, 4], 0)])
def test_roi_align_bad_regions_fail(roi, batch):
    r = run_op(Op.ROI_ALIGN, _align_inputs(np.ones((1, 4, 4, 1), np.float32), [roi], [batch]),
               [output(F32, [1, 2, 3, 1])])
    assert r.status == ErrorStatus.GENERAL_FAILURE


def test_roi_align_bad_output_size_fails():
    r = run_op(Op.ROI_ALIGN, _align_inputs(np.ones((1, 4, 4, 1), np.float32), [[0, 0, 2, 2]], [0], oh=0),
               [output(F32, [1, 0, 3, 1])])
    assert r.status != ErrorStatus.NONE


def test_roi_signatures():
    spec = lookup(Op.ROI_ALIGN)
    q = T.TENSOR_QUANT8_ASYMM_SIGNED
    ins = [q, Q16A, I32, T.INT32, T.INT32, T.FLOAT32, T.FLOAT32, T.INT32, T.INT32, T.BOOL]
    assert spec.match(ins, [q]).version == HalVersion.V1_3
    assert spec.match([Q8] + ins[1:], [Q8]).version == HalVersion.V1_2
    assert spec.match([Q8, Q8] + ins[2:], [Q8]) is None
    assert lookup(Op.ROI_POOLING).match(ins[:7] + [T.BOOL], [q]).version == HalVersion.V1_3


# ---------------------------------------------------------------- ROI_POOLING

def _pool_loop(img, rois, batch, oh, ow, stride):
    """ROI_POOLING by the definition: rounded roi, floor/ceil bin edges, max (0 for empty bins)."""
    _, H, W, D = img.shape
    out = np.zeros((len(rois), oh, ow, D), dtype=img.dtype)
    for r, roi in enumerate(rois):
        x1, y1, x2, y2 = (int(math.floor(v / stride + 0.5)) for v in roi)
        bh, bw = max(y2 - y1 + 1, 1) / oh, max(x2 - x1 + 1, 1) / ow
        for i in range(oh):
            for j in range(ow):
                h0, h1 = min(math.floor(i * bh + y1), H), min(math.ceil((i + 1) * bh + y1), H)
                w0, w1 = min(math.floor(j * bw + x1), W), min(math.ceil((j + 1) * bw + x1), W)
                if h1 > h0 and w1 > w0:
                    out[r, i, j] = img[batch[r], h0:h1, w0:w1].max(axis=(0, 1))
    return out


def _pool_inputs(img, rois, batch, oh=2, ow=2, stride=2.0, nchw=False):
    return [tensor(F32, img), tensor(F32, rois), tensor(I32, batch), scalar(T.INT32, oh), scalar(T.INT32, ow),
            scalar(T.FLOAT32, stride), scalar(T.FLOAT32, stride), scalar(T.BOOL, nchw)]


def test_roi_pooling_matches_loop_with_edge_clipping():
    rng = np.random.default_rng(7)
    img = rng.normal(size=(2, 6, 5, 2)).astype(np.float32)
    rois = np.array([[0, 0, 10, 12], [6, 4, 10, 12], [9, 11, 10, 12], [2, 2, 3, 3]], dtype=np.float32)
    batch = np.array([1, 0, 1, 0], dtype=np.int32)
    r = run_op(Op.ROI_POOLING, _pool_inputs(img, rois, batch, oh=3, ow=2), [output(F32, [4, 3, 2, 2])])
    assert r.status == ErrorStatus.NONE
    np.testing.assert_array_equal(r.outputs[0], _pool_loop(img, rois, batch, 3, 2, 2.0))


def test_roi_pooling_zero_rois_nchw():
    outs = run_kernel(Op.ROI_POOLING, _pool_inputs(np.ones((1, 2, 4, 4), np.float32), np.zeros((0, 4), np.float32),
                                                   np.zeros(0, np.int32), nchw=True), [output(F32, [0, 2, 2, 2])])
    assert outs[0].shape == (0, 2, 2, 2)


def test_roi_pooling_invalid_roi_fails():
    r = run_op(Op.ROI_POOLING, _pool_inputs(np.ones((1, 4, 4, 1), np.float32), [[2, 2, 1, 4]], [0]),
               [output(F32, [1, 2, 2, 1])])
    assert r.status == ErrorStatus.GENERAL_FAILURE


# ---------------------------------------------------------------- HEATMAP_MAX_KEYPOINT

def _heatmap_loop(hm, boxes):
    """Max location refined by a Newton step on the quadratic fit of its mirrored 3x3 window."""
    n, s, _, k = hm.shape
    scores, points = np.zeros((n, k)), np.zeros((n, k, 2))
    for b in range(n):
        for j in range(k):
            m = hm[b, :, :, j].astype(np.float64)
            h, w = np.unravel_index(np.argmax(m), m.shape)
            mirror = lambda v: 1 if v < 0 else (s - 2 if v >= s else v)
            g = np.array([[m[mirror(h + dh), mirror(w + dw)] for dw in (-1, 0, 1)] for dh in (-1, 0, 1)])
            grad = np.array([(g[1, 2] - g[1, 0]) / 2, (g[2, 1] - g[0, 1]) / 2])
            hess = np.array([[g[1, 0] - 2 * g[1, 1] + g[1, 2], (g[2, 2] - g[2, 0] - g[0, 2] + g[0, 0]) / 4],
                             [0, g[0, 1] - 2 * g[1, 1] + g[2, 1]]])
            hess[1, 0] = hess[0, 1]
            delta, score = np.zeros(2), g[1, 1]
            if abs(np.linalg.det(hess)) >= 1e-5 + 1e-5 * hess[0, 0] * hess[1, 1]:
                delta = -np.linalg.solve(hess, grad)
                if np.abs(delta).max() > 1.5:
                    delta *= 1.5 / np.abs(delta).max()
                score = g[1, 1] + grad @ delta + 0.5 * delta @ hess @ delta
            x1, y1, x2, y2 = boxes[b]
            scores[b, j] = score
            points[b, j] = [(w + delta[0] + 0.5) / s * (x2 - x1) + x1, (h + delta[1] + 0.5) / s * (y2 - y1) + y1]
    return scores, points


def test_heatmap_max_keypoint_matches_newton_step_at_borders():
    rng = np.random.default_rng(8)
    hm = rng.normal(size=(3, 5, 5, 4)).astype(np.float32)
    hm[0, 0, 0, 0] = hm[1, 4, 4, 1] = hm[2, 0, 4, 2] = 10.0      # maxima on corners: mirrored windows
    boxes = np.array([[0, 0, 10, 10], [2, 3, 7, 20], [5, 5, 5, 5]], dtype=np.float32)
    r = run_op(Op.HEATMAP_MAX_KEYPOINT, [tensor(F32, hm), tensor(F32, boxes), scalar(T.BOOL, False)],
               [output(F32, [3, 4]), output(F32, [3, 4, 2])])
    assert r.status == ErrorStatus.NONE
    scores, points = _heatmap_loop(hm, boxes)
    np.testing.assert_allclose(r.outputs[0], scores, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(r.outputs[1], points, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("shape,box", [((1, 1, 1, 2), [0, 0, 1, 1]), ((1, 3, 4, 2), [0, 0, 1, 1]),
                                       ((1, 3, 3, 2), [2, 0, 1, 1])])
def test_heatmap_max_keypoint_errors(shape, box):
    r = run_op(Op.HEATMAP_MAX_KEYPOINT, [tensor(F32, np.ones(shape)), tensor(F32, [box]), scalar(T.BOOL, False)],
               [output(F32, [1, 2]), output(F32, [1, 2, 2])])
    assert r.status == ErrorStatus.GENERAL_FAILURE
