"""The OpenCL backend's bilinear resize template (kernels/resize_bilinear.cl: channel vectors of
one output pixel a work-item) gives the generated kernel's bits: the same resize with the
template and without it (the generated kernel) is the same bit for bit, and within the corpus
tolerance of the reference, upsampling and downsampling, with align_corners and
half_pixel_centers, a batch, and vectors of 4, 8 and 16 channels; each case proves the template
ran. Where it does not apply (channels 4 does not divide, NCHW) the generated kernel runs."""
from __future__ import annotations

import numpy as np
import pytest

from nngpu.backends import device_backends
from nngpu.compiler import lower
from nngpu.driver.device import Device
from nngpu.hal import OperationType as Op
from nngpu.testing import output, run_op, single_op_model, tensor

from .device_check import F32, cpu_templates, data, flag, i32

pytestmark = pytest.mark.skipif("opencl" not in device_backends(), reason="no OpenCL device here")

# name: (input N, H, W, C), (output width, height), (nchw, align_corners, half_pixel_centers), VW or None
CASES = {
    "up-2x-c16": ((1, 8, 12, 16), (24, 16), (False, False, False), 16),
    "up-half-pixel-c24": ((2, 5, 7, 24), (17, 11), (False, False, True), 8),
    "down-align-c4": ((1, 13, 9, 4), (5, 6), (False, True, False), 4),
    "c3-generated": ((1, 6, 6, 3), (11, 9), (False, False, True), None),
    "nchw-generated": ((1, 8, 6, 6), (9, 12), (True, False, False), None),
}


def _case(case):
    shape, (ow, oh), flags, vw = CASES[case]
    inputs = [tensor(F32, data(shape, F32)), i32(ow), i32(oh), *map(flag, flags)]
    return inputs, output(F32, [0] * 4), vw


@pytest.mark.parametrize("case", CASES)
def test_the_resize_template_gives_the_generated_kernels_bits(case, monkeypatch):
    inputs, out, vw = _case(case)
    model = single_op_model(Op.RESIZE_BILINEAR, inputs, [out])
    sources = cpu_templates(model, inputs)
    if vw is None:
        assert not sources, "the template ran where it does not apply"
    else:
        assert any(f"#define VW {vw}\n" in s and "resize_bilinear" in s for s in sources), "the template did not run"
    with_template = run_op(Op.RESIZE_BILINEAR, inputs, [out], device=Device("opencl"), version=13)
    monkeypatch.setattr(lower, "has_template", lambda target, kind: kind != "resize_bilinear" and kind in target.templates)
    assert not cpu_templates(model, inputs)
    generated = run_op(Op.RESIZE_BILINEAR, inputs, [out], device=Device("opencl"), version=13)
    ref = run_op(Op.RESIZE_BILINEAR, inputs, [out], version=13)
    assert with_template.status == generated.status == ref.status == 0
    np.testing.assert_array_equal(with_template.outputs[0].view(np.uint32), generated.outputs[0].view(np.uint32))
    np.testing.assert_allclose(with_template.outputs[0], ref.outputs[0], rtol=1e-5, atol=1e-5)
