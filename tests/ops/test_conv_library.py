"""The OpenCL CPU target's hand-written direct float convolution (kernels/conv.cl: a stem's few
input channels, output channels in vectors) matches the numpy reference on every geometry it
takes: strides, dilations, padding on every side, taps past the row on both sides, 1 to 4 input
channels, vectors of 4, 8 and 16 output channels, up to four vectors of them a work-item and each
fused activation (a consumer folded in: tests/compiler/test_then_fold.py). Each case also proves
the template ran, with its vector width; a layer with more input channels keeps im2col and the
GEMM."""
from __future__ import annotations

import numpy as np
import pytest

from nngpu.backends import device_backends
from nngpu.hal import OperationType as Op
from nngpu.ops.conv import DIRECT_MAX_CIN
from nngpu.testing import output, single_op_model, tensor

from .device_check import F32, cpu_templates, data, flag, i32, reference_and_opencl

pytestmark = pytest.mark.skipif("opencl" not in device_backends(), reason="no OpenCL device here")

# name: (H, W, CIN, COUT, KH, KW, pads (left, right, top, bottom), strides (w, h), dilations (w, h), activation,
#        VW, CV)
CASES = {
    "stem-3x3-s2": (17, 18, 3, 16, 3, 3, (0, 1, 0, 1), (2, 2), (1, 1), 3, 16, 1),
    "stem-5x5-s2-relu": (16, 16, 3, 24, 5, 5, (1, 2, 1, 2), (2, 2), (1, 1), 1, 8, 3),
    "two-vectors-of-16": (9, 11, 3, 32, 3, 3, (1, 1, 1, 1), (1, 1), (1, 1), 0, 16, 2),
    "two-blocks-of-4-vectors": (6, 9, 3, 128, 3, 3, (1, 1, 1, 1), (1, 1), (1, 1), 3, 16, 4),
    "one-channel": (7, 13, 1, 4, 3, 3, (1, 1, 1, 1), (1, 1), (1, 1), 2, 4, 1),
    "four-channels-dilated": (8, 10, 4, 12, 3, 3, (2, 2, 2, 2), (1, 1), (2, 2), 0, 4, 3),
    "narrow-row": (5, 2, 2, 8, 3, 3, (1, 1, 1, 1), (1, 1), (1, 1), 0, 8, 1),
    "long-row-unpadded": (5, 23, 3, 8, 3, 3, (0, 0, 0, 0), (1, 1), (1, 1), 3, 8, 1),
    "wide-s3-1x7": (4, 25, 2, 4, 1, 7, (3, 3, 0, 0), (3, 1), (1, 1), 0, 4, 1),
}


def _model(case: str):
    h, w, cin, cout, kh, kw, pads, strides, dilations, act, vw, cv = CASES[case]
    rng = np.random.default_rng(len(case))
    x = tensor(F32, data((2, h, w, cin), F32))
    f = tensor(F32, rng.standard_normal((cout, kh, kw, cin)).astype(np.float32), const=True)
    b = tensor(F32, rng.standard_normal(cout).astype(np.float32), const=True)
    inputs = [x, f, b, *map(i32, pads), *map(i32, strides), i32(act), flag(False), *map(i32, dilations)]
    return inputs, output(F32, [0] * 4), vw, cv


@pytest.mark.parametrize("case", CASES)
def test_the_conv_template_matches_the_reference(case):
    inputs, out, vw, cv = _model(case)
    sources = cpu_templates(single_op_model(Op.CONV_2D, inputs, [out]), inputs)
    assert [s for s in sources if f"#define VW {vw}\n" in s and f"#define CV {cv}\n" in s and "TAP(ky, kx, ic" in s], \
        "the template did not run"
    ref, got = reference_and_opencl(Op.CONV_2D, inputs, out)
    # the same taps in the same order: only contraction into fused multiply-adds may differ
    np.testing.assert_allclose(got.outputs[0], ref.outputs[0], rtol=1e-5, atol=1e-5)


def test_more_input_channels_keep_the_gemm():
    """DIRECT_MAX_CIN + 1 input channels: im2col and the GEMM, as before."""
    cin = DIRECT_MAX_CIN + 1
    rng = np.random.default_rng(2)
    inputs = [tensor(F32, data((1, 12, 12, cin), F32)),
              tensor(F32, rng.standard_normal((16, 3, 3, cin)).astype(np.float32), const=True),
              tensor(F32, np.zeros(16, np.float32), const=True), i32(1), i32(2), i32(2), i32(0)]
    out = output(F32, [0] * 4)
    sources = cpu_templates(single_op_model(Op.CONV_2D, inputs, [out]), inputs)
    assert not [s for s in sources if "TAP(ky, kx, ic" in s] and [s for s in sources if "im2col" in s]
    ref, got = reference_and_opencl(Op.CONV_2D, inputs, out)
    np.testing.assert_allclose(got.outputs[0], ref.outputs[0], rtol=1e-5, atol=1e-5)
