"""RESIZE_BILINEAR / RESIZE_NEAREST_NEIGHBOR device kernels match the numpy reference for every
flag combination, both layouts, size by shape and by scale, up- and down-sampling."""
from __future__ import annotations

import pytest

from nngpu.hal import OperationType as Op
from nngpu.testing import tensor
from ..ops.device_check import F16, F32, check_on_device, data, flag, fscalar, i32

FLAGS = [(False, False), (True, False), (False, True)]   # (align_corners, half_pixel_centers)


@pytest.mark.parametrize("op", [Op.RESIZE_BILINEAR, Op.RESIZE_NEAREST_NEIGHBOR])
@pytest.mark.parametrize("align, half", FLAGS)
@pytest.mark.parametrize("nchw", [False, True])
@pytest.mark.parametrize("size", [(7, 5), (2, 3), (3, 3)])   # (out_h, out_w) from a 3x4 image
def test_resize_by_shape(op, align, half, nchw, size):
    shape = (2, 3, 3, 4) if nchw else (2, 3, 4, 3)
    out_h, out_w = size
    x = tensor(F32, data(shape))
    check_on_device(op, [x, i32(out_w), i32(out_h), flag(nchw), flag(align), flag(half)], F32, 4,
                    kind="resize_bilinear" if op == Op.RESIZE_BILINEAR else "resize_nearest")


@pytest.mark.parametrize("op", [Op.RESIZE_BILINEAR, Op.RESIZE_NEAREST_NEIGHBOR])
@pytest.mark.parametrize("t", [F32, F16])
@pytest.mark.parametrize("align, half", FLAGS)
def test_resize_by_scale(op, t, align, half):
    x = tensor(t, data((1, 5, 7, 2), t))
    check_on_device(op, [x, fscalar(t, 1.7), fscalar(t, 0.6), flag(False), flag(align), flag(half)], t, 4)


def test_resize_bilinear_without_optional_flags():
    x = tensor(F32, data((1, 2, 2, 1)))
    check_on_device(Op.RESIZE_BILINEAR, [x, i32(3), i32(3)], F32, 4, kind="resize_bilinear")
