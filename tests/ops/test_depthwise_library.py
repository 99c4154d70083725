"""The OpenCL backend's hand-written float depthwise kernel (kernels/depthwise.cl, in channel
vectors) matches the numpy reference on every geometry it takes: strides, dilations, padding on
every side, taps past the row on both sides, vectors of 2, 4, 8 and 16 channels, and each fused
activation. Each case also proves the template ran, with the vector width it was meant to have."""
from __future__ import annotations

import numpy as np
import pytest

from nngpu.backends import device_backends
from nngpu.hal import OperationType as Op
from nngpu.ops.conv import depthwise_pixels
from nngpu.testing import output, single_op_model, tensor

from .device_check import F32, cpu_templates, data, flag, i32, reference_and_opencl

pytestmark = pytest.mark.skipif("opencl" not in device_backends(), reason="no OpenCL device here")

# name: (H, W, C, KH, KW, pads (left, right, top, bottom), strides (w, h), dilations (w, h), activation, VW)
CASES = {
    "3x3-s1-same": (9, 11, 8, 3, 3, (1, 1, 1, 1), (1, 1), (1, 1), 0, 8),
    "3x3-s2-relu6": (9, 9, 16, 3, 3, (0, 1, 0, 1), (2, 2), (1, 1), 3, 16),
    "5x5-s1-relu-c4": (7, 6, 4, 5, 5, (2, 2, 2, 2), (1, 1), (1, 1), 1, 4),
    "3x3-dilated": (8, 10, 12, 3, 3, (2, 2, 2, 2), (1, 1), (2, 2), 2, 4),
    "narrow-row": (5, 2, 8, 3, 3, (1, 1, 1, 1), (1, 1), (1, 1), 0, 8),
    "wide-dilated-s2": (6, 13, 8, 3, 5, (4, 4, 1, 1), (2, 1), (3, 1), 0, 8),
    "wide-dilated-s4": (4, 25, 4, 1, 7, (0, 0, 0, 0), (4, 1), (2, 1), 0, 4),
    # rows longer than a strip (depthwise_pixels): strips of 4 where no divisor from 8 down to 4
    # divides the row (the last one partial), else strips that divide it; a row of up to 16 whole
    "long-row-s1": (6, 23, 16, 3, 3, (1, 1, 1, 1), (1, 1), (1, 1), 0, 16),
    "strips-of-8": (4, 24, 8, 3, 3, (1, 1, 1, 1), (1, 1), (1, 1), 0, 8),
    "strips-of-5-5x5": (3, 20, 16, 5, 5, (2, 2, 2, 2), (1, 1), (1, 1), 3, 16),
    "long-row-5x5-s2": (9, 30, 8, 5, 5, (2, 2, 2, 2), (2, 2), (1, 1), 1, 8),
    "long-row-unpadded": (5, 21, 4, 3, 3, (0, 0, 0, 0), (1, 1), (1, 1), 3, 4),
    "pairs-c42": (8, 9, 42, 3, 3, (1, 1, 1, 1), (1, 1), (1, 1), 1, 2),   # the face detector's 42 channels
    "pairs-c6-s2": (7, 11, 6, 3, 3, (0, 1, 0, 1), (2, 2), (1, 1), 0, 2),
}


@pytest.mark.parametrize("case", CASES)
def test_the_depthwise_template_matches_the_reference(case):
    h, w, c, kh, kw, pads, strides, dilations, act, vw = CASES[case]
    rng = np.random.default_rng(len(case))
    x = tensor(F32, data((2, h, w, c), F32))
    f = tensor(F32, rng.standard_normal((1, kh, kw, c)).astype(np.float32), const=True)
    b = tensor(F32, rng.standard_normal(c).astype(np.float32), const=True)
    inputs = [x, f, b, *map(i32, pads), *map(i32, strides), i32(1), i32(act), flag(False), *map(i32, dilations)]
    out = output(F32, [0] * 4)
    model = single_op_model(Op.DEPTHWISE_CONV_2D, inputs, [out])
    sources = cpu_templates(model, inputs)
    ow = (w + pads[0] + pads[1] - (kw - 1) * dilations[0] - 1) // strides[0] + 1
    pix = depthwise_pixels(ow, vw)
    assert any(f"#define VW {vw}\n#define PIX {pix}\n" in s and "FILTER(ky, kx)" in s for s in sources), \
        "the template did not run"
    ref, got = reference_and_opencl(Op.DEPTHWISE_CONV_2D, inputs, out)
    # the same taps in the same order: only contraction into fused multiply-adds may differ
    np.testing.assert_allclose(got.outputs[0], ref.outputs[0], rtol=1e-5, atol=1e-5)
