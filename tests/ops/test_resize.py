"""RESIZE_BILINEAR / RESIZE_NEAREST_NEIGHBOR against float64 formulas written per output pixel."""
import itertools
import math

import numpy as np
import pytest

from nngpu.driver.device import Device
from nngpu.hal.types import ErrorStatus
from nngpu.hal.types import OperandType as T
from nngpu.hal.types import OperationType as Op
from nngpu.modelutil import as_model_1_3
from nngpu.ops.registry import HalVersion, lookup
from nngpu.testing import output, run_op, scalar, tensor

F32, Q8 = T.TENSOR_FLOAT32, T.TENSOR_QUANT8_ASYMM


class Device13(Device):
    """run_op prepares through prepareModel_1_2; route it to the 1.3 rules (align / half-pixel flags)."""

    def prepareModel_1_2(self, model, preference, modelCache, dataCache, token, callback):
        return self.prepare(13, as_model_1_3(model), callback, preference)


def _resize(op, x, size, flags=(), t=F32, qp=(0.0, 0), scalar_type=T.INT32):
    w, h = size
    ins = [tensor(t, x, *qp), scalar(scalar_type, w), scalar(scalar_type, h), *(scalar(T.BOOL, f) for f in flags)]
    return run_op(op, ins, [output(t, [0, 0, 0, 0], *qp)], device=Device13())


def _source(o: int, in_size: int, out_size: int, align: bool, half: bool) -> float:
    scale = (in_size - 1) / (out_size - 1) if align and out_size > 1 else in_size / out_size
    return (o + 0.5) * scale - 0.5 if half else o * scale


@pytest.mark.parametrize("align,half", [(False, False), (True, False), (False, True)])
def test_bilinear_matches_formula(align, half):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 3, 4, 2)).astype(np.float32)
    r = _resize(Op.RESIZE_BILINEAR, x, (7, 5), (False, align, half))
    assert r.status == ErrorStatus.NONE and r.shapes[0] == [2, 5, 7, 2]
    out = r.outputs[0]
    for n, oy, ox, c in itertools.product(range(2), range(5), range(7), range(2)):
        fy, fx = _source(oy, 3, 5, align, half), _source(ox, 4, 7, align, half)
        y0, x0 = max(math.floor(fy), 0), max(math.floor(fx), 0)
        y1, x1 = min(math.ceil(fy), 2), min(math.ceil(fx), 3)
        dy, dx = fy - y0, fx - x0
        expect = (x[n, y0, x0, c] * (1 - dy) * (1 - dx) + x[n, y1, x0, c] * dy * (1 - dx)
                  + x[n, y0, x1, c] * (1 - dy) * dx + x[n, y1, x1, c] * dy * dx)
        assert abs(out[n, oy, ox, c] - expect) < 1e-5


@pytest.mark.parametrize("align,half", [(False, False), (True, False), (False, True)])
def test_nearest_matches_formula_nchw(align, half):
    x = np.arange(1 * 2 * 5 * 3, dtype=np.uint8).reshape(1, 2, 5, 3)  # NCHW: 2 channels, 5x3 image
    r = _resize(Op.RESIZE_NEAREST_NEIGHBOR, x, (4, 3), (True, align, half), t=Q8, qp=(0.5, 3))
    assert r.status == ErrorStatus.NONE and r.shapes[0] == [1, 2, 3, 4]
    out = r.outputs[0]

    def near(o, in_size, out_size):
        scale = (in_size - 1) / (out_size - 1) if align and out_size > 1 else in_size / out_size
        v = (o + (0.5 if half else 0.0)) * scale
        i = min(int(math.floor(v + 0.5)) if align else math.floor(v), in_size - 1)
        return max(i, 0)

    for c, oy, ox in itertools.product(range(2), range(3), range(4)):
        assert out[0, c, oy, ox] == x[0, c, near(oy, 5, 3), near(ox, 3, 4)]


def test_resize_by_scale_and_zero_batch_shape():
    x = np.ones((1, 3, 4, 1), dtype=np.float32)
    r = _resize(Op.RESIZE_BILINEAR, x, (1.6, 2.5), (), scalar_type=T.FLOAT32)
    assert r.status == ErrorStatus.NONE and r.shapes[0] == [1, 7, 6, 1]  # floor(3*2.5), floor(4*1.6)


def test_quant8_bilinear_truncates_toward_zero():
    x = np.array([0, 1], dtype=np.uint8).reshape(1, 1, 2, 1)
    r = _resize(Op.RESIZE_BILINEAR, x, (4, 1), (False,), t=Q8, qp=(1.0, 0))
    assert r.status == ErrorStatus.NONE
    assert r.outputs[0].ravel().tolist() == [0, 0, 1, 1]  # source 0, 0.5, 1, 1.5 -> 0, 0.5->0, 1, 1


@pytest.mark.parametrize("align,half", [(False, False), (True, False), (False, True)])
@pytest.mark.parametrize("t,lo,hi", [(Q8, 0, 255), (T.TENSOR_QUANT8_ASYMM_SIGNED, -128, 127)])
def test_quant_bilinear_is_the_float32_four_term_sum_bit_for_bit(align, half, t, lo, hi):
    # The reference per pixel in float32 scalars: ((v * wy) * wx) summed in its order, truncated.
    f32 = np.float32
    x = np.random.default_rng(9).integers(lo, hi + 1, (2, 5, 6, 3)).astype(np.uint8 if t == Q8 else np.int8)
    r = _resize(Op.RESIZE_BILINEAR, x, (11, 9), (False, align, half), t=t, qp=(0.5, 3))
    assert r.status == ErrorStatus.NONE

    def axis(o, in_size, out_size):
        scale = f32(in_size - 1) / f32(out_size - 1) if align else f32(in_size) / f32(out_size)
        pos = (f32(o) + f32(0.5)) * scale - f32(0.5) if half else f32(o) * scale
        a, b = max(math.floor(pos), 0), min(math.ceil(pos), in_size - 1)
        return a, b, f32(pos - f32(a))

    for n, oy, ox, c in itertools.product(range(2), range(9), range(11), range(3)):
        (y0, y1, dy), (x0, x1, dx) = axis(oy, 5, 9), axis(ox, 6, 11)
        v = [[f32(x[n, y, xx, c]) for xx in (x0, x1)] for y in (y0, y1)]
        one = f32(1)
        total = v[0][0] * (one - dy) * (one - dx) + v[1][0] * dy * (one - dx)
        total = total + v[0][1] * (one - dy) * dx + v[1][1] * dy * dx
        assert r.outputs[0][n, oy, ox, c] == np.clip(np.trunc(total), lo, hi)


def test_bad_resize_arguments_fail():
    x = np.ones((1, 2, 2, 1), dtype=np.float32)
    for size, flags in (((0, 2), ()), ((2, 2), (False, True, True))):
        r = _resize(Op.RESIZE_BILINEAR, x, size, flags)
        assert r.status in (ErrorStatus.INVALID_ARGUMENT, ErrorStatus.GENERAL_FAILURE)


def test_signature_versions():
    bil, nn = lookup(Op.RESIZE_BILINEAR), lookup(Op.RESIZE_NEAREST_NEIGHBOR)
    assert bil.match([F32, T.INT32, T.INT32], [F32]).version == HalVersion.V1_0
    assert bil.match([F32, T.FLOAT32, T.FLOAT32], [F32]).version == HalVersion.V1_2
    assert bil.match([F32, T.INT32, T.INT32, T.BOOL, T.BOOL], [F32]).version == HalVersion.V1_3
    assert bil.match([T.TENSOR_FLOAT16, T.FLOAT32, T.FLOAT32], [T.TENSOR_FLOAT16]) is None
    assert nn.match([F32, T.INT32, T.INT32], [F32]) is None  # the layout flag is required
    assert nn.match([Q8, T.FLOAT32, T.FLOAT32, T.BOOL], [Q8]).version == HalVersion.V1_2
