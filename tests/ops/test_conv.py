"""CONV_2D, DEPTHWISE_CONV_2D, GROUPED_CONV_2D, TRANSPOSE_CONV_2D and FULLY_CONNECTED against
straightforward loop references, plus the error paths."""
from __future__ import annotations

import math

import numpy as np
import pytest

from nngpu.hal.types import ErrorStatus, OperationType as Op, OperandType as T
from nngpu.ops import load_all
from nngpu.ops.registry import OpContext, lookup
from nngpu.testing import output, run_op, scalar, single_op_model, tensor

F32, Q8, S8, PC, I32 = T.TENSOR_FLOAT32, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED, \
    T.TENSOR_QUANT8_SYMM_PER_CHANNEL, T.TENSOR_INT32
rng = np.random.default_rng(7)


def i32(v):
    return scalar(T.INT32, v)


def loop_conv(x, f, b, pads, strides, dil=(1, 1), groups=1):
    """NHWC grouped convolution, one output element at a time. pads = (top, bottom, left, right)."""
    n, h, w, c = x.shape
    cout, kh, kw, cg = f.shape
    (pt, pb, pl, pr), (sh, sw), (dh, dw) = pads, strides, dil
    oh = (h - ((kh - 1) * dh + 1) + sh + pt + pb) // sh
    ow = (w - ((kw - 1) * dw + 1) + sw + pl + pr) // sw
    out = np.zeros((n, oh, ow, cout))
    per_group = cout // groups
    for bi in range(n):
        for y in range(oh):
            for xo in range(ow):
                for o in range(cout):
                    g = o // per_group
                    s = b[o]
                    for i in range(kh):
                        for j in range(kw):
                            yy, xx = y * sh - pt + i * dh, xo * sw - pl + j * dw
                            if 0 <= yy < h and 0 <= xx < w:
                                s += np.dot(x[bi, yy, xx, g * cg:(g + 1) * cg], f[o, i, j])
                    out[bi, y, xo, o] = s
    return out


def test_conv_float_explicit_stride_dilation_nchw():
    x = rng.standard_normal((2, 7, 6, 3)).astype(np.float32)
    f = rng.standard_normal((4, 3, 2, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    want = loop_conv(x, f, b, (2, 1, 1, 0), (2, 1), (2, 3))
    res = run_op(Op.CONV_2D, [tensor(F32, x.transpose(0, 3, 1, 2)), tensor(F32, f, const=True),
                              tensor(F32, b, const=True), i32(1), i32(0), i32(2), i32(1), i32(1), i32(2),
                              i32(0), scalar(T.BOOL, True), i32(3), i32(2)],
                 [output(F32, [0, 0, 0, 0])])
    assert res.status == ErrorStatus.NONE
    np.testing.assert_allclose(res.outputs[0], want.transpose(0, 3, 1, 2), rtol=1e-5, atol=1e-5)


def test_conv_implicit_same_relu6_matches_explicit_padding():
    x = rng.standard_normal((1, 5, 4, 2)).astype(np.float32) * 4
    f = rng.standard_normal((3, 3, 3, 2)).astype(np.float32)
    b = np.zeros(3, np.float32)
    # SAME with stride 2 on 5x4: out 3x2, total pad h = 2 -> (1, 1), w = 1 -> (0, 1)
    want = np.clip(loop_conv(x, f, b, (1, 1, 0, 1), (2, 2)), 0, 6)
    res = run_op(Op.CONV_2D, [tensor(F32, x), tensor(F32, f), tensor(F32, b), i32(1), i32(2), i32(2), i32(3)],
                 [output(F32, [1, 3, 2, 3])])
    np.testing.assert_allclose(res.outputs[0], want, rtol=1e-5, atol=1e-5)


def requant_reference(acc, real_multiplier, zp, lo, hi):
    """Independent float requantization: may differ from the fixed-point path by one step."""
    return np.clip(np.floor(acc * real_multiplier + 0.5) + zp, lo, hi)


def test_conv_per_channel_quant_saturates_per_channel():
    x = rng.integers(0, 256, (1, 4, 4, 2)).astype(np.uint8)
    f = rng.integers(-127, 128, (3, 2, 2, 2)).astype(np.int8)
    scales = [0.01, 0.5, 0.003]
    in_scale, in_zp, out_scale, out_zp = 0.1, 128, 0.2, 100
    b = rng.integers(-500, 500, 3).astype(np.int32)
    acc = loop_conv(x.astype(np.float64) - in_zp, f.astype(np.float64), b.astype(np.float64), (0, 0, 0, 0), (1, 1))
    mult = np.array([np.float32(in_scale) * np.float32(s) for s in scales], np.float64) / np.float32(out_scale)
    want = requant_reference(acc, mult, out_zp, 0, 255)
    res = run_op(Op.CONV_2D, [tensor(Q8, x, in_scale, in_zp),
                              tensor(PC, f, const=True, channel_quant=(scales, 0)),
                              tensor(I32, b, 0.0, 0, const=True), i32(2), i32(1), i32(1), i32(0)],
                 [output(Q8, [1, 3, 3, 3], out_scale, out_zp)])
    assert res.status == ErrorStatus.NONE
    assert np.abs(res.outputs[0].astype(int) - want).max() <= 1
    assert (res.outputs[0][..., 1] == 255).any() or (res.outputs[0][..., 1] == 0).any()  # big scale saturates


def run_kernel(op_type, inputs, outputs):
    """The op's numpy kernel on a one-op model: reaches zero-sized inputs, which a request
    cannot carry (a 0 extent there means unspecified)."""
    load_all()
    model = single_op_model(op_type, inputs, outputs)
    ctx = OpContext(model.operations[0], model.operands, [None if v.omitted else v.value for v in inputs])
    return lookup(op_type).reference(ctx)


@pytest.mark.parametrize("t", [F32, Q8])
def test_conv_zero_batch(t):
    x = np.zeros((0, 3, 3, 1))
    q = dict(scale=0.5) if t == Q8 else {}
    bias = tensor(I32, np.zeros(2), 0.25) if t == Q8 else tensor(F32, np.zeros(2))
    out = run_kernel(Op.CONV_2D, [tensor(t, x, **q), tensor(t, np.ones((2, 2, 2, 1)), **q), bias,
                                  i32(2), i32(1), i32(1), i32(0)], [output(t, [0, 2, 2, 2], **q)])
    assert out[0].shape == (0, 2, 2, 2)   # VALID 2x2 filter on 3x3


def test_depthwise_multiplier_dilation():
    x = rng.standard_normal((1, 6, 6, 2)).astype(np.float32)
    fd = rng.standard_normal((1, 2, 2, 6)).astype(np.float32)   # multiplier 3
    b = rng.standard_normal(6).astype(np.float32)
    # channel c*3+m reads input channel c: as a grouped conv with 2 groups of 1 channel
    fg = fd.transpose(3, 1, 2, 0)
    want = loop_conv(x, fg, b, (0, 1, 1, 0), (1, 2), (2, 2), groups=2)
    res = run_op(Op.DEPTHWISE_CONV_2D, [tensor(F32, x), tensor(F32, fd, const=True), tensor(F32, b, const=True),
                                        i32(1), i32(0), i32(0), i32(1), i32(2), i32(1), i32(3), i32(0),
                                        scalar(T.BOOL, False), i32(2), i32(2)],
                 [output(F32, [0, 0, 0, 0])])
    assert res.status == ErrorStatus.NONE
    np.testing.assert_allclose(res.outputs[0], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("t", [Q8, S8])
def test_grouped_conv_nchw_quant(t):
    lo, hi = (0, 255) if t == Q8 else (-128, 127)
    x = rng.integers(lo, hi + 1, (1, 3, 3, 4))
    f = rng.integers(lo, hi + 1, (6, 2, 2, 2))
    b = rng.integers(-100, 100, 6).astype(np.int32)
    shift = 0 if t == Q8 else -128
    in_scale, in_zp, f_scale, f_zp, out_scale, out_zp = 0.05, 125 + shift, 0.02, 133 + shift, 0.5, 118 + shift
    acc = loop_conv(x.astype(np.float64) - in_zp, f.astype(np.float64) - f_zp, b.astype(np.float64),
                    (0, 1, 0, 1), (1, 1), groups=2)
    real = float(np.float32(in_scale) * np.float32(f_scale)) / float(np.float32(out_scale))
    want = requant_reference(acc, real, out_zp, lo, hi)
    ins = [tensor(t, x.transpose(0, 3, 1, 2), in_scale, in_zp), tensor(t, f, f_scale, f_zp),
           tensor(I32, b, in_scale * f_scale), i32(0), i32(1), i32(0), i32(1), i32(1), i32(1), i32(2), i32(0),
           scalar(T.BOOL, True)]
    outs = [output(t, [1, 6, 3, 3], out_scale, out_zp)]
    # run_op prepares through HAL 1.2, so the 1.3-only signed variant runs the kernel directly
    got = run_op(Op.GROUPED_CONV_2D, ins, outs).outputs[0] if t == Q8 else run_kernel(Op.GROUPED_CONV_2D, ins, outs)[0]
    assert np.abs(got.astype(int) - want.transpose(0, 3, 1, 2)).max() <= 1


def loop_transpose_conv(x, f, b, pad_t, pad_l, oh, ow, sh, sw):
    n, h, w, c = x.shape
    cout, kh, kw, _ = f.shape
    out = np.zeros((n, oh, ow, cout)) + b
    for bi in range(n):
        for y in range(h):
            for xo in range(w):
                for i in range(kh):
                    for j in range(kw):
                        yy, xx = y * sh - pad_t + i, xo * sw - pad_l + j
                        if 0 <= yy < oh and 0 <= xx < ow:
                            out[bi, yy, xx] += f[:, i, j, :] @ x[bi, y, xo]
    return out


def test_transpose_conv_explicit_float():
    x = rng.standard_normal((2, 3, 2, 3)).astype(np.float32)
    f = rng.standard_normal((2, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(2).astype(np.float32)
    # out = stride*(in-1) + filter - pads: h = 2*2+3-1-0 = 6, w = 3*1+3-0-1 = 5
    want = loop_transpose_conv(x, f, b, 1, 0, 6, 5, 2, 3)
    res = run_op(Op.TRANSPOSE_CONV_2D, [tensor(F32, x), tensor(F32, f), tensor(F32, b),
                                        i32(0), i32(1), i32(1), i32(0), i32(3), i32(2), i32(0),
                                        scalar(T.BOOL, False)],
                 [output(F32, [2, 6, 5, 2])])
    assert res.status == ErrorStatus.NONE
    np.testing.assert_allclose(res.outputs[0], want, rtol=1e-5, atol=1e-5)


def test_transpose_conv_implicit_same_hits_requested_shape():
    # SAME, stride 2, filter 3, requested 5x4 output: the tail pad may be negative (w: 4 = 2*2).
    x = rng.standard_normal((1, 3, 2, 1)).astype(np.float32)
    f = rng.standard_normal((1, 3, 3, 1)).astype(np.float32)
    b = np.zeros(1, np.float32)
    # h: in 5 -> out_size 3, tmp = 2*2+3 = 7, total 2 -> head 1; w: in 4 -> 2, tmp 5, total 1 -> head 0
    want = loop_transpose_conv(x, f, b, 1, 0, 5, 4, 2, 2)
    res = run_op(Op.TRANSPOSE_CONV_2D, [tensor(F32, x), tensor(F32, f), tensor(F32, b),
                                        tensor(I32, [1, 5, 4, 1], const=True), i32(1), i32(2), i32(2), i32(0),
                                        scalar(T.BOOL, False)],
                 [output(F32, [1, 5, 4, 1])])
    assert res.status == ErrorStatus.NONE
    np.testing.assert_allclose(res.outputs[0], want, rtol=1e-5, atol=1e-5)


def test_transpose_conv_per_channel_quant_nchw():
    x = rng.integers(0, 256, (1, 2, 2, 2)).astype(np.uint8)
    f = rng.integers(-127, 128, (3, 2, 2, 2)).astype(np.int8)
    scales = [0.02, 0.05, 0.01]
    b = rng.integers(-200, 200, 3).astype(np.int32)
    in_scale, in_zp, out_scale, out_zp = 0.1, 120, 0.3, 128
    acc = loop_transpose_conv(x.astype(np.float64) - in_zp, f.astype(np.float64), b.astype(np.float64), 0, 0, 4, 4, 2, 2)
    mult = np.array([np.float32(in_scale) * np.float32(s) for s in scales], np.float64) / np.float32(out_scale)
    want = requant_reference(acc, mult, out_zp, 0, 255)
    res = run_op(Op.TRANSPOSE_CONV_2D, [tensor(Q8, x.transpose(0, 3, 1, 2), in_scale, in_zp),
                                        tensor(PC, f, channel_quant=(scales, 0)), tensor(I32, b),
                                        i32(0), i32(0), i32(0), i32(0), i32(2), i32(2), i32(0),
                                        scalar(T.BOOL, True)],
                 [output(Q8, [1, 3, 4, 4], out_scale, out_zp)])
    assert res.status == ErrorStatus.NONE
    assert np.abs(res.outputs[0].astype(int) - want.transpose(0, 3, 1, 2)).max() <= 1


def test_fully_connected_4d_input_reshaped_and_saturating():
    x = rng.integers(0, 256, (2, 3, 2, 2)).astype(np.uint8)        # 24 elements -> [4, 6]
    w = rng.integers(0, 256, (5, 6)).astype(np.uint8)
    b = rng.integers(-1000, 1000, 5).astype(np.int32)
    in_s, in_zp, w_s, w_zp, out_s, out_zp = 0.5, 127, 0.5, 120, 1.0, 128
    acc = (x.reshape(4, 6).astype(np.float64) - in_zp) @ (w.astype(np.float64) - w_zp).T + b
    want = requant_reference(acc, 0.25, out_zp, 0, 255)
    res = run_op(Op.FULLY_CONNECTED, [tensor(Q8, x, in_s, in_zp), tensor(Q8, w, w_s, w_zp, const=True),
                                      tensor(I32, b, 0.25, const=True), i32(0)],
                 [output(Q8, [4, 5], out_s, out_zp)])
    assert res.status == ErrorStatus.NONE
    assert np.abs(res.outputs[0].astype(int) - want).max() <= 1
    assert {0, 255} & set(res.outputs[0].ravel().tolist())


def test_fully_connected_zero_batch_float():
    out = run_kernel(Op.FULLY_CONNECTED, [tensor(F32, np.zeros((0, 3))), tensor(F32, np.ones((2, 3))),
                                          tensor(F32, np.zeros(2)), i32(1)], [output(F32, [0, 2])])
    assert out[0].shape == (0, 2)


def _conv_inputs(stride=1, code=1, act=0, filt=None, nchw=None):
    filt = np.ones((1, 2, 2, 1), np.float32) if filt is None else filt
    ins = [tensor(F32, np.ones((1, 3, 3, 1))), tensor(F32, filt, const=True),
           tensor(F32, np.zeros(filt.shape[0] if filt.shape[0] > 1 else filt.shape[3]), const=True),
           i32(code), i32(stride), i32(1), i32(act)]
    return ins


@pytest.mark.parametrize("kwargs", [dict(stride=0), dict(code=7), dict(act=9)])
def test_conv_bad_scalars_rejected(kwargs):
    res = run_op(Op.CONV_2D, _conv_inputs(**kwargs), [output(F32, [0, 0, 0, 0])])
    assert res.status == ErrorStatus.INVALID_ARGUMENT


def test_conv_filter_depth_mismatch_fails():
    res = run_op(Op.CONV_2D, _conv_inputs(filt=np.ones((1, 2, 2, 2), np.float32)), [output(F32, [0, 0, 0, 0])])
    assert res.status != ErrorStatus.NONE


def test_depthwise_filter_first_dim_must_be_one():
    ins = [tensor(F32, np.ones((1, 3, 3, 2))), tensor(F32, np.ones((2, 2, 2, 2)), const=True),
           tensor(F32, np.zeros(2), const=True), i32(2), i32(1), i32(1), i32(1), i32(0)]
    assert run_op(Op.DEPTHWISE_CONV_2D, ins, [output(F32, [0, 0, 0, 0])]).status == ErrorStatus.INVALID_ARGUMENT


def test_per_channel_wrong_channel_dim_rejected():
    ins = [tensor(Q8, np.ones((1, 3, 3, 1)), 0.5, 0), tensor(PC, np.ones((2, 2, 2, 1)), const=True,
                                                             channel_quant=([0.1, 0.1], 3)),
           tensor(I32, np.zeros(2), 0.0, 0, const=True), i32(2), i32(1), i32(1), i32(0)]
    assert run_op(Op.CONV_2D, ins, [output(Q8, [0, 0, 0, 0], 1.0, 0)]).status == ErrorStatus.INVALID_ARGUMENT


def test_bias_scale_mismatch_fails_at_execution():
    ins = [tensor(Q8, np.ones((1, 3, 3, 1)), 0.5, 0), tensor(Q8, np.ones((1, 2, 2, 1)), 0.5, 0, const=True),
           tensor(I32, np.zeros(1), 0.3, 0, const=True), i32(2), i32(1), i32(1), i32(0)]
    assert run_op(Op.CONV_2D, ins, [output(Q8, [0, 0, 0, 0], 1.0, 0)]).status != ErrorStatus.NONE


def test_fully_connected_bad_split_fails():
    res = run_op(Op.FULLY_CONNECTED, [tensor(F32, np.ones((2, 5))), tensor(F32, np.ones((2, 3)), const=True),
                                      tensor(F32, np.zeros(2), const=True), i32(0)],
                 [output(F32, [0, 0])])
    assert res.status != ErrorStatus.NONE


def test_quant8_output_scale_rule_raises_model_version():
    from nngpu.ops.registry import HalVersion
    from nngpu.testing import single_op_model
    from nngpu.validation.model import validate_model

    def model(out_scale):
        return single_op_model(Op.FULLY_CONNECTED, [tensor(Q8, np.ones((1, 2)), 0.5, 0),
                                                    tensor(Q8, np.ones((1, 2)), 0.5, 0, const=True),
                                                    tensor(I32, np.zeros(1), 0.25, 0, const=True), i32(0)],
                               [output(Q8, [1, 1], out_scale, 0)])
    assert validate_model(model(0.5)) == HalVersion.V1_0
    assert validate_model(model(0.25)) == HalVersion.V1_2
    assert math.isclose(0.25, 0.5 * 0.5)


# --- the fast kernels: depthwise einsums, blocked im2col, 1x1 GEMM, float16 in float32 -----

@pytest.mark.parametrize("cin", [3, 40])      # 80 output channels take the einsum path
def test_depthwise_strided_dilated_multiplier_batch_nchw(cin):
    # stride 2 splits columns into phases; dilation 3 makes taps cross phases; multiplier 2
    x = rng.standard_normal((2, 9, 11, cin)).astype(np.float32)
    fd = rng.standard_normal((1, 3, 2, 2 * cin)).astype(np.float32)
    b = rng.standard_normal(2 * cin).astype(np.float32)
    want = loop_conv(x, fd.transpose(3, 1, 2, 0), b, (1, 2, 2, 0), (3, 2), (1, 3), groups=cin)
    res = run_op(Op.DEPTHWISE_CONV_2D, [tensor(F32, x.transpose(0, 3, 1, 2)), tensor(F32, fd), tensor(F32, b),
                                        i32(2), i32(0), i32(1), i32(2), i32(2), i32(3), i32(2), i32(0),
                                        scalar(T.BOOL, True), i32(3), i32(1)],
                 [output(F32, [0, 0, 0, 0])])
    assert res.status == ErrorStatus.NONE
    np.testing.assert_allclose(res.outputs[0], want.transpose(0, 3, 1, 2), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("c", [4, 70, 200])    # row einsum, row einsum (stride 1 only), window einsum
@pytest.mark.parametrize("stride_w, dil_w", [(1, 2), (3, 1)])   # 3: a column phase without taps
def test_depthwise_paths_match_loop(c, stride_w, dil_w):
    x = rng.standard_normal((1, 7, 9, c)).astype(np.float32)
    fd = rng.standard_normal((1, 3, 2, c)).astype(np.float32)
    b = rng.standard_normal(c).astype(np.float32)
    want = loop_conv(x, fd.transpose(3, 1, 2, 0), b, (1, 1, 1, 0), (1, stride_w), (1, dil_w), groups=c)
    res = run_op(Op.DEPTHWISE_CONV_2D, [tensor(F32, x), tensor(F32, fd), tensor(F32, b), i32(1), i32(0), i32(1),
                                        i32(1), i32(stride_w), i32(1), i32(1), i32(0), scalar(T.BOOL, False),
                                        i32(dil_w), i32(1)], [output(F32, list(want.shape))])
    assert res.status == ErrorStatus.NONE
    np.testing.assert_allclose(res.outputs[0], want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("cin", [3, 40])      # 80 output channels take the einsum path
@pytest.mark.parametrize("t", [Q8, S8])
def test_depthwise_quant_equals_grouped_conv_exactly(t, cin):
    # Two independent exact integer paths (tap loop / einsum vs im2col GEMM) must agree bit for bit.
    lo, hi = (0, 255) if t == Q8 else (-128, 127)
    cout = 2 * cin
    x = rng.integers(lo, hi + 1, (2, 6, 7, cin))
    fd = rng.integers(lo, hi + 1, (1, 3, 3, cout))
    b = rng.integers(-3000, 3000, cout).astype(np.int32)
    zp = 125 if t == Q8 else -7
    q = dict(in_scale=0.5, out_scale=0.7)
    # explicit pads (left 1, right 0, top 2, bottom 1), stride 2x2, then multiplier / groups, RELU
    common = [tensor(t, x, q["in_scale"], zp), None, tensor(I32, b, q["in_scale"] * 0.03), i32(1), i32(0), i32(2),
              i32(1), i32(2), i32(2)]
    dw_ins = common[:1] + [tensor(t, fd, 0.03, zp + 1)] + common[2:] + [i32(2), i32(1)]
    gc_ins = common[:1] + [tensor(t, fd.transpose(3, 1, 2, 0), 0.03, zp + 1)] + common[2:] + [i32(cin), i32(1)]
    outs = [output(t, [2, 4, 3, cout], q["out_scale"], zp)]
    got = run_kernel(Op.DEPTHWISE_CONV_2D, dw_ins, outs)[0]
    grouped = run_kernel(Op.GROUPED_CONV_2D, gc_ins + [scalar(T.BOOL, False)], outs)[0]
    assert got.shape == (2, 4, 3, cout)
    np.testing.assert_array_equal(got, grouped)
    assert len(np.unique(got)) > 3 and ((got == lo) | (got == hi)).any()   # saturation reached


@pytest.mark.parametrize("c", [2, 64])
def test_depthwise_zero_batch(c):
    out = run_kernel(Op.DEPTHWISE_CONV_2D, [tensor(F32, np.zeros((0, 4, 4, c))), tensor(F32, np.ones((1, 3, 3, c))),
                                            tensor(F32, np.zeros(c)), i32(1), i32(1), i32(1), i32(1), i32(0)],
                     [output(F32, [0, 4, 4, c])])
    assert out[0].shape == (0, 4, 4, c)


def test_conv_im2col_in_row_blocks_matches_loop(monkeypatch):
    from nngpu.ops.lib import conv_kernels
    monkeypatch.setattr(conv_kernels, "_IM2COL_BYTES", 1)       # one output row per GEMM, batch by batch
    x = rng.standard_normal((2, 7, 6, 3)).astype(np.float32)
    f = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    want = loop_conv(x, f, b, (1, 1, 1, 1), (2, 1))    # SAME, stride 1x2 (w, h)
    res = run_op(Op.CONV_2D, [tensor(F32, x), tensor(F32, f), tensor(F32, b), i32(1), i32(1), i32(2), i32(0)],
                 [output(F32, [0, 0, 0, 0])])
    np.testing.assert_allclose(res.outputs[0], want, rtol=1e-5, atol=1e-5)


def test_conv_1x1_strided_odd_size_nchw():
    x = rng.standard_normal((2, 5, 7, 6)).astype(np.float32)
    f = rng.standard_normal((3, 1, 1, 6)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    want = np.clip(loop_conv(x, f, b, (0, 0, 0, 0), (2, 3)), -1, 1)
    res = run_op(Op.CONV_2D, [tensor(F32, x.transpose(0, 3, 1, 2)), tensor(F32, f), tensor(F32, b), i32(2),
                              i32(3), i32(2), i32(2), scalar(T.BOOL, True)], [output(F32, [0, 0, 0, 0])])
    assert res.status == ErrorStatus.NONE
    np.testing.assert_allclose(res.outputs[0], want.transpose(0, 3, 1, 2), rtol=1e-5, atol=1e-5)


def test_conv_float32_long_reduction_within_corpus_tolerance():
    # 5x5x96 = 2400 products per output accumulated in float32: still within 1e-5 + 5.96e-7 rel
    x = rng.uniform(-1, 1, (1, 8, 8, 96)).astype(np.float32)
    f = rng.uniform(-0.1, 0.1, (8, 5, 5, 96)).astype(np.float32)
    b = rng.uniform(-1, 1, 8).astype(np.float32)
    want = loop_conv(x.astype(np.float64), f.astype(np.float64), b.astype(np.float64), (0, 0, 0, 0), (1, 1))
    res = run_op(Op.CONV_2D, [tensor(F32, x), tensor(F32, f), tensor(F32, b), i32(2), i32(1), i32(1), i32(0)],
                 [output(F32, [1, 4, 4, 8])])
    np.testing.assert_allclose(res.outputs[0], want, rtol=5.96e-7, atol=1e-5)


def test_float16_conv_and_depthwise_computed_in_float32():
    F16 = T.TENSOR_FLOAT16
    x = rng.uniform(-2, 2, (1, 6, 6, 8)).astype(np.float16)
    f = rng.uniform(-1, 1, (4, 3, 3, 8)).astype(np.float16)
    fd = rng.uniform(-1, 1, (1, 3, 3, 8)).astype(np.float16)
    b = rng.uniform(-1, 1, 8).astype(np.float16)
    x64, b64 = x.astype(np.float64), b.astype(np.float64)
    want = loop_conv(x64, f.astype(np.float64), b64[:4], (1, 1, 1, 1), (1, 1))
    res = run_op(Op.CONV_2D, [tensor(F16, x), tensor(F16, f), tensor(F16, b[:4]), i32(1), i32(1), i32(1), i32(0)],
                 [output(F16, [1, 6, 6, 4])])
    assert res.outputs[0].dtype == np.float16
    np.testing.assert_allclose(res.outputs[0].astype(np.float64), want, rtol=2 ** -10, atol=2 ** -8)
    want = loop_conv(x64, fd.astype(np.float64).transpose(3, 1, 2, 0), b64, (1, 1, 1, 1), (1, 1), groups=8)
    res = run_op(Op.DEPTHWISE_CONV_2D, [tensor(F16, x), tensor(F16, fd), tensor(F16, b), i32(1), i32(1), i32(1),
                                        i32(1), i32(0)], [output(F16, [1, 6, 6, 8])])
    np.testing.assert_allclose(res.outputs[0].astype(np.float64), want, rtol=2 ** -10, atol=2 ** -8)


def test_transpose_conv_float16_nchw_relu():
    F16 = T.TENSOR_FLOAT16
    x = rng.uniform(-1, 1, (2, 3, 4, 3)).astype(np.float16)
    f = rng.uniform(-1, 1, (4, 2, 3, 3)).astype(np.float16)
    b = rng.uniform(-1, 1, 4).astype(np.float16)
    # explicit pads left 1, right 0, top 0, bottom 1; stride w 2, h 1: h = 3+2-1-1 = 3, w = 4*2+3-2-1 = 8
    want = np.maximum(loop_transpose_conv(x.astype(np.float64), f.astype(np.float64), b.astype(np.float64),
                                          0, 1, 3, 8, 1, 2), 0)
    res = run_op(Op.TRANSPOSE_CONV_2D, [tensor(F16, x.transpose(0, 3, 1, 2)), tensor(F16, f), tensor(F16, b),
                                        i32(1), i32(0), i32(0), i32(1), i32(2), i32(1), i32(1),
                                        scalar(T.BOOL, True)],
                 [output(F16, [2, 4, 3, 8])])
    assert res.status == ErrorStatus.NONE
    np.testing.assert_allclose(res.outputs[0].astype(np.float64), want.transpose(0, 3, 1, 2), rtol=2 ** -10,
                               atol=2 ** -8)
