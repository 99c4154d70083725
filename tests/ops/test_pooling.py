"""AVERAGE_POOL_2D, MAX_POOL_2D and L2_POOL_2D against loop references, plus error paths."""
from __future__ import annotations

import numpy as np
import pytest

from nngpu.hal.types import ErrorStatus, OperationType as Op, OperandType as T
from nngpu.ops import load_all
from nngpu.ops.registry import OpContext, lookup
from nngpu.testing import output, run_op, scalar, single_op_model, tensor

F32, F16, Q8, S8 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED
rng = np.random.default_rng(11)


def i32(v):
    return scalar(T.INT32, v)


def loop_pool(x, kind, pads, strides, filt):
    """NHWC pooling over in-image taps only. pads = (top, bottom, left, right), filt = (kh, kw)."""
    n, h, w, c = x.shape
    (pt, pb, pl, pr), (sh, sw), (kh, kw) = pads, strides, filt
    oh, ow = (h - kh + sh + pt + pb) // sh, (w - kw + sw + pl + pr) // sw
    out = np.zeros((n, oh, ow, c))
    for y in range(oh):
        for xo in range(ow):
            y0, x0 = y * sh - pt, xo * sw - pl
            win = x[:, max(y0, 0):min(y0 + kh, h), max(x0, 0):min(x0 + kw, w), :].astype(np.float64)
            cnt = win.shape[1] * win.shape[2]
            if kind == "avg":
                out[:, y, xo] = win.sum(axis=(1, 2)) / cnt
            elif kind == "max":
                out[:, y, xo] = win.max(axis=(1, 2))
            else:
                out[:, y, xo] = np.sqrt((win ** 2).sum(axis=(1, 2)) / cnt)
    return out


def explicit(pads, strides, filt, act=0):
    (pt, pb, pl, pr), (sh, sw), (kh, kw) = pads, strides, filt
    return [i32(pl), i32(pr), i32(pt), i32(pb), i32(sw), i32(sh), i32(kw), i32(kh), i32(act)]


@pytest.mark.parametrize("kind,op", [("avg", Op.AVERAGE_POOL_2D), ("max", Op.MAX_POOL_2D), ("l2", Op.L2_POOL_2D)])
def test_float_explicit_padding_excluded_nchw(kind, op):
    x = rng.standard_normal((2, 5, 6, 3)).astype(np.float32)
    geo = ((1, 2, 2, 0), (2, 1), (3, 3))
    want = loop_pool(x, kind, *geo)
    res = run_op(op, [tensor(F32, x.transpose(0, 3, 1, 2)), *explicit(*geo), scalar(T.BOOL, True)],
                 [output(F32, [0, 0, 0, 0])])
    assert res.status == ErrorStatus.NONE
    np.testing.assert_allclose(res.outputs[0], want.transpose(0, 3, 1, 2), rtol=1e-5, atol=1e-5)


def test_float16_implicit_same_relu1():
    x = (rng.standard_normal((1, 5, 5, 2)) * 3).astype(np.float16)
    # SAME, stride 2, filter 2 on 5: out 3, total pad 1 -> (0, 1)
    want = np.clip(loop_pool(x, "avg", (0, 1, 0, 1), (2, 2), (2, 2)), -1, 1)
    res = run_op(Op.AVERAGE_POOL_2D, [tensor(F16, x), i32(1), i32(2), i32(2), i32(2), i32(2), i32(2)],
                 [output(F16, [1, 3, 3, 2])])
    assert res.status == ErrorStatus.NONE
    np.testing.assert_allclose(res.outputs[0].astype(np.float64), want, rtol=5e-3, atol=5e-3)


def run_kernel(op_type, inputs, outputs):
    load_all()
    model = single_op_model(op_type, inputs, outputs)
    ctx = OpContext(model.operations[0], model.operands, [v.value for v in inputs])
    return lookup(op_type).reference(ctx)


def test_signed_average_rounds_half_away_from_zero():
    # windows of two values summing to odd negatives: -3/2 -> -2 (not -1), 3/2 -> 2
    x = np.array([-1, -2, 1, 2, -5, 0], np.int8).reshape(1, 1, 6, 1)
    ins = [tensor(S8, x, 0.5, 0), *explicit((0, 0, 0, 0), (1, 2), (1, 2))]
    out = run_kernel(Op.AVERAGE_POOL_2D, ins, [output(S8, [1, 1, 3, 1], 0.5, 0)])[0]
    assert out.ravel().tolist() == [-2, 2, -3]


def test_quant8_average_and_max_with_relu_clamp():
    x = rng.integers(0, 256, (1, 4, 4, 2)).astype(np.uint8)
    zp, scale = 128, 0.1
    geo = ((1, 1, 1, 1), (2, 2), (3, 3))
    avg = np.floor(loop_pool(x, "avg", *geo) + 0.5)
    mx = loop_pool(x, "max", *geo)
    relu_lo = zp  # RELU clamps at quantized 0.0
    res = run_op(Op.AVERAGE_POOL_2D, [tensor(Q8, x, scale, zp), *explicit(*geo, act=1)],
                 [output(Q8, [1, 2, 2, 2], scale, zp)])
    np.testing.assert_array_equal(res.outputs[0], np.maximum(avg, relu_lo))
    res = run_op(Op.MAX_POOL_2D, [tensor(Q8, x, scale, zp), *explicit(*geo, act=3)],
                 [output(Q8, [1, 2, 2, 2], scale, zp)])
    np.testing.assert_array_equal(res.outputs[0], np.clip(mx, relu_lo, zp + 60))


def test_zero_batch():
    out = run_kernel(Op.MAX_POOL_2D, [tensor(F32, np.zeros((0, 4, 4, 1))), i32(2), i32(2), i32(2), i32(2),
                                       i32(2), i32(0)], [output(F32, [0, 2, 2, 1])])
    assert out[0].shape == (0, 2, 2, 1)


@pytest.mark.parametrize("args", [
    [i32(1), i32(0), i32(1), i32(2), i32(2), i32(0)],        # stride 0
    [i32(1), i32(1), i32(1), i32(0), i32(2), i32(0)],        # filter width 0
    [i32(5), i32(1), i32(1), i32(2), i32(2), i32(0)],        # bad padding scheme
    [i32(1), i32(1), i32(1), i32(2), i32(2), i32(4)],        # bad activation
])
def test_bad_scalars_rejected(args):
    res = run_op(Op.AVERAGE_POOL_2D, [tensor(F32, np.ones((1, 4, 4, 1))), *args], [output(F32, [0, 0, 0, 0])])
    assert res.status == ErrorStatus.INVALID_ARGUMENT


def test_padding_not_smaller_than_filter_fails():
    res = run_op(Op.MAX_POOL_2D, [tensor(F32, np.ones((1, 4, 4, 1))), *explicit((2, 0, 0, 0), (1, 1), (2, 2))],
                 [output(F32, [0, 0, 0, 0])])
    assert res.status != ErrorStatus.NONE


def test_l2_pool_rejects_quant8_by_signature():
    res = run_op(Op.L2_POOL_2D, [tensor(Q8, np.ones((1, 4, 4, 1)), 0.5, 0), i32(1), i32(1), i32(1), i32(2),
                                 i32(2), i32(0)], [output(Q8, [0, 0, 0, 0], 0.5, 0)])
    assert res.status == ErrorStatus.INVALID_ARGUMENT


# --- windows above the tap-loop limit are reduced over a strided view ------------------------

@pytest.mark.parametrize("kind,op", [("avg", Op.AVERAGE_POOL_2D), ("max", Op.MAX_POOL_2D), ("l2", Op.L2_POOL_2D)])
def test_large_window_padded_strided(kind, op):
    x = rng.standard_normal((2, 9, 10, 3)).astype(np.float32)
    geo = ((2, 3, 1, 4), (2, 3), (6, 7))      # 42 taps, windows overlap and hang over padding
    want = loop_pool(x, kind, *geo)
    res = run_op(op, [tensor(F32, x), *explicit(*geo)], [output(F32, [0, 0, 0, 0])])
    assert res.status == ErrorStatus.NONE
    np.testing.assert_allclose(res.outputs[0], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("kind,op", [("avg", Op.AVERAGE_POOL_2D), ("max", Op.MAX_POOL_2D), ("l2", Op.L2_POOL_2D)])
def test_global_window_reduced_over_rows_then_columns(kind, op):
    x = rng.standard_normal((2, 5, 7, 3)).astype(np.float32)
    geo = ((0, 0, 0, 0), (1, 1), (5, 7))      # one window covering the whole image
    want = loop_pool(x, kind, *geo)
    res = run_op(op, [tensor(F32, x), *explicit(*geo)], [output(F32, [0, 0, 0, 0])])
    assert res.status == ErrorStatus.NONE and res.shapes[0] == [2, 1, 1, 3]
    np.testing.assert_allclose(res.outputs[0], want, rtol=1e-5, atol=1e-5)


def test_global_average_quant8_large_window_rounds():
    x = rng.integers(0, 256, (1, 8, 8, 4)).astype(np.uint8)
    want = np.floor(x.astype(np.float64).mean(axis=(1, 2), keepdims=True) + 0.5)   # half up = away (>= 0)
    res = run_op(Op.AVERAGE_POOL_2D, [tensor(Q8, x, 0.1, 0), i32(2), i32(1), i32(1), i32(8), i32(8), i32(0)],  # VALID
                 [output(Q8, [1, 1, 1, 4], 0.1, 0)])
    np.testing.assert_array_equal(res.outputs[0], want)


def test_max_pool_signed_large_window_padding_never_wins():
    x = rng.integers(-128, -100, (1, 6, 6, 2)).astype(np.int8)   # all below any zero padding
    geo = ((2, 2, 2, 2), (3, 3), (6, 6))
    want = loop_pool(x, "max", *geo)
    out = run_kernel(Op.MAX_POOL_2D, [tensor(S8, x, 0.5, 0), *explicit(*geo)], [output(S8, [1, 2, 2, 2], 0.5, 0)])
    np.testing.assert_array_equal(out[0], want)


@pytest.mark.parametrize("op", [Op.AVERAGE_POOL_2D, Op.L2_POOL_2D, Op.MAX_POOL_2D])
@pytest.mark.parametrize("filt", [2, 6])
def test_zero_batch_all_kinds(op, filt):
    out = run_kernel(op, [tensor(F32, np.zeros((0, 6, 6, 1))), i32(1), i32(1), i32(1), i32(filt), i32(filt),
                          i32(0)], [output(F32, [0, 6, 6, 1])])
    assert out[0].shape == (0, 6, 6, 1)
