"""compiler/pool_fold.py: a float MAX_POOL_2D whose windows lie within a depthwise convolution's
over the same input (the MediaPipe detectors' halving blocks: a 3x3 or 5x5 depthwise convolution
at stride 2 and a 2x2 max pool at stride 2 of one tensor) is computed by the depthwise template
kernel, one launch writing both; nothing folds where the windows differ, the pool clamps, or the
convolution is dilated. On the OpenCL device here the folded plan gives the unfolded one's bits
and numpy's answer, NaN and infinities included, with and without a partial last strip and taps
in the padding."""
from __future__ import annotations

import numpy as np
import pytest

from nngpu.backends import create, device_backends
from nngpu.backends.opencl import CPU_TARGET, TARGET as OPENCL
from nngpu.compiler.lower import device_plan, lower_model
from nngpu.compiler.pool_fold import _shares_windows
from nngpu.compiler.steps import TemplateStep
from nngpu.hal import OperationType as Op
from nngpu.runtime.interpreter import GraphRunner

from .model_builder import ModelBuilder, T

SAME, VALID = 1, 2


def halving(hw: int, c: int, pool: int = 2, pool_padding: int = VALID, pool_stride: int = 2, pool_act: int = 0,
            dilation: int = 1, k: int = 3):
    """x [1, hw, hw, c] -> a k x k depthwise convolution (SAME, stride 2, RELU) and a max pool of
    x (`pool` x `pool`, its padding, stride and activation), both outputs: the model and numpy's
    answer."""
    rng = np.random.default_rng(hw + c)
    w = (rng.standard_normal((1, k, k, c)) * 0.3).astype(np.float32)
    bias = rng.standard_normal(c).astype(np.float32)
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, [1, hw, hw, c])
    o = -(-hw // 2)
    conv = [x, b.constant(T.TENSOR_FLOAT32, w), b.constant(T.TENSOR_FLOAT32, bias),
            *(b.constant(T.INT32, v) for v in (SAME, 2, 2, 1, 1))]
    if dilation != 1:
        conv += [b.constant(T.BOOL, False), b.constant(T.INT32, dilation), b.constant(T.INT32, dilation)]
    y = b.op(Op.DEPTHWISE_CONV_2D, conv, T.TENSOR_FLOAT32, [1, o, o, c])
    po = -(-hw // pool_stride) if pool_padding == SAME else (hw - pool) // pool_stride + 1
    z = b.op(Op.MAX_POOL_2D, [x, *(b.constant(T.INT32, v) for v in (pool_padding, pool_stride, pool_stride, pool, pool,
                                                                      pool_act))], T.TENSOR_FLOAT32, [1, po, po, c])
    b.output(y)
    b.output(z)
    return b.build(), lambda v: _reference(v, w, bias, pool, pool_padding, pool_stride)


def _reference(v: np.ndarray, w: np.ndarray, bias: np.ndarray, pool: int, padding: int, stride: int):
    hw, o, k = v.shape[1], -(-v.shape[1] // 2), w.shape[1]
    top = max((o - 1) * 2 + k - hw, 0) // 2
    p = np.pad(v.astype(np.float64), [(0, 0), (top, k), (top, k), (0, 0)])
    conv = sum(p[:, ky:ky + 2 * o:2, kx:kx + 2 * o:2, :] * w[0, ky, kx] for ky in range(k) for kx in range(k)) + bias
    po = -(-hw // stride) if padding == SAME else (hw - pool) // stride + 1
    ptop = max((po - 1) * stride + pool - hw, 0) // 2 if padding == SAME else 0
    q = np.pad(v, [(0, 0), (ptop, pool + stride), (ptop, pool + stride), (0, 0)], constant_values=-np.inf)
    taps = [q[:, ky:ky + stride * po:stride, kx:kx + stride * po:stride, :] for ky in range(pool) for kx in range(pool)]
    most = taps[0]
    for t in taps[1:]:
        most = np.where(np.isnan(t) | (t > most), t, most)   # NaN wins, as the kernels do
    return np.maximum(conv, 0), most


def _depthwise(model, target=CPU_TARGET) -> list[TemplateStep]:
    return [s for s in lower_model(GraphRunner(model), target).steps
            if isinstance(s, TemplateStep) and s.kind in ("depthwise", "max_pool")]


@pytest.mark.parametrize("target", [CPU_TARGET, OPENCL], ids=["cpu", "gpu"])
def test_the_pool_is_written_by_the_depthwise_kernel(target):
    model, _ = halving(16, 28)
    (one,) = _depthwise(model, target)
    assert one.kind == "depthwise" and one.outputs == 2 and one.defines["POOL_KH"] == one.defines["POOL_KW"] == 2
    assert one.defines["POOL_Y0"] == one.defines["POOL_X0"] == 0
    assert one.args[-2:] == model.main.outputIndexes and one.args[0] == model.main.inputIndexes[0]
    assert [model.main.operations[k].type for k in one.ops] == [Op.DEPTHWISE_CONV_2D, Op.MAX_POOL_2D]


def test_a_5x5_window_padded_by_1_holds_the_pool_from_its_second_tap():
    (one,) = _depthwise(halving(16, 32, k=5)[0])
    assert one.outputs == 2 and one.defines["POOL_Y0"] == one.defines["POOL_X0"] == 1


@pytest.mark.parametrize("change", [dict(pool=3), dict(pool_stride=1), dict(pool_act=1), dict(dilation=2)],
                         ids=["3x3-valid", "stride-1", "relu", "dilated"])
def test_nothing_folds_where_the_windows_differ_the_pool_clamps_or_the_convolution_is_dilated(change):
    steps = _depthwise(halving(16, 28, **change)[0])
    assert sorted(s.kind for s in steps) == ["depthwise", "max_pool"] and all(s.outputs == 1 for s in steps)


@pytest.mark.parametrize("dw_pad, pool_pad, holds", [(0, 0, True), (1, 0, True), (2, 0, False), (0, 1, False)])
def test_the_pools_window_must_lie_within_the_convolutions(dw_pad, pool_pad, holds):
    """A 3x3 window padded by dw_pad and a 2x2 one padded by pool_pad: the pool's starts
    dw_pad - pool_pad taps into the convolution's, and must end within it."""
    shared = dict(N=1, H=16, W=16, C=8, OH=8, OW=8, SH=2, SW=2)
    dw = TemplateStep("dw", "", 1, [1, 2, 3, 4], [0], None, kind="depthwise",
                      defines={**shared, "KH": 3, "KW": 3, "DH": 1, "DW": 1, "PT": dw_pad, "PL": dw_pad})
    pool = TemplateStep("pool", "", 1, [1, 5], [1], None, kind="max_pool",
                        defines={**shared, "KH": 2, "KW": 2, "PT": pool_pad, "PL": pool_pad})
    assert _shares_windows(dw, pool) == holds


@pytest.mark.skipif("opencl" not in device_backends(), reason="no OpenCL device here")
@pytest.mark.parametrize("hw, c, pool, padding, k", [(16, 28, 2, VALID, 3), (64, 24, 2, VALID, 3), (32, 42, 2, VALID, 3),
                                                    (13, 32, 3, SAME, 3), (18, 16, 2, VALID, 3), (24, 32, 2, VALID, 5)])
def test_the_folded_plan_gives_the_unfolded_bits_and_numpys_answer(hw, c, pool, padding, k):
    """Vectors of 4, 8, 2 and 16 channels; 13 x 13 at SAME: taps in the padding at both ends, a
    partial last strip; 18 x 18: a row of 9 outputs; 5x5: the pool from the window's second tap."""
    model, want = halving(hw, c, pool, padding, k=k)
    assert len(_depthwise(model)) == 1
    x = np.random.default_rng(3).standard_normal([1, hw, hw, c]).astype(np.float32)
    x[0, 2, 3, 1], x[0, 5, 4, 2], x[0, hw - 1, hw - 1, 3] = np.nan, np.inf, -np.inf
    backend = create("opencl")
    folded = [np.asarray(v) for v in device_plan(GraphRunner(model), backend).execute([x])]
    unfolded = [np.asarray(v) for v in device_plan(GraphRunner(model), backend, fuse=False).execute([x])]
    for a, b in zip(folded, unfolded):
        np.testing.assert_array_equal(a, b)
    conv, most = want(x)
    np.testing.assert_array_equal(folded[1], most)
    with np.errstate(invalid="ignore"):
        np.testing.assert_allclose(folded[0], conv, rtol=1e-5, atol=1e-5)
