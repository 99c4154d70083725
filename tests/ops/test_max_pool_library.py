"""The OpenCL backend's hand-written float MAX_POOL_2D (kernels/max_pool.cl, in channel vectors)
gives the numpy reference's bits on every geometry it takes: strides, padding on every side
(windows partly and wholly in it), vectors of 2, 4, 8 and 16 channels, one vector or several
of a pixel a work-item, each fused activation, and NaN among the taps (NaN wins). Each case
also proves the template ran, with its vector width and vectors a work-item."""
from __future__ import annotations

import numpy as np
import pytest

from nngpu.backends import device_backends
from nngpu.hal import OperationType as Op
from nngpu.testing import output, single_op_model, tensor

from .device_check import F32, cpu_templates, data, flag, i32, reference_and_opencl

pytestmark = pytest.mark.skipif("opencl" not in device_backends(), reason="no OpenCL device here")

# name: (H, W, C, KH, KW, pads (left, right, top, bottom), strides (w, h), activation, VW, PV)
CASES = {
    "2x2-s2": (8, 8, 24, 2, 2, (0, 0, 0, 0), (2, 2), 0, 8, 1),
    "3x3-s1-same-relu": (7, 9, 16, 3, 3, (1, 1, 1, 1), (1, 1), 1, 16, 1),
    "3x3-s2-relu6-c4": (9, 6, 4, 3, 3, (0, 1, 0, 1), (2, 2), 3, 4, 1),
    "5x3-wide-padding": (4, 5, 12, 5, 3, (2, 2, 4, 4), (1, 2), 2, 4, 1),
    # as the face detector's: 2 x 16 x 16 pixels of 7 vectors of 4, a pixel a work-item
    "2x2-s2-pixels": (32, 32, 28, 2, 2, (0, 0, 0, 0), (2, 2), 0, 4, 7),
    "2x2-s2-c42-pairs": (8, 8, 42, 2, 2, (0, 0, 0, 0), (2, 2), 0, 2, 1),
    "3x3-s2-c42-relu-3-vectors": (17, 15, 42, 3, 3, (1, 1, 1, 1), (2, 2), 1, 2, 3),
}


@pytest.mark.parametrize("nan", [False, True], ids=["finite", "nan"])
@pytest.mark.parametrize("case", CASES)
def test_the_max_pool_template_gives_the_reference_bits(case, nan):
    h, w, c, kh, kw, pads, strides, act, vw, pv = CASES[case]
    values = data((2, h, w, c), F32)
    if nan:
        values.reshape(-1)[::7] = np.nan
    x = tensor(F32, values)
    inputs = [x, *map(i32, pads), *map(i32, strides), i32(kw), i32(kh), i32(act), flag(False)]
    out = output(F32, [0] * 4)
    model = single_op_model(Op.MAX_POOL_2D, inputs, [out])
    sources = cpu_templates(model, inputs)
    assert any(f"#define VW {vw}\n#define PV {pv}\n" in s and "Float MAX_POOL_2D" in s for s in sources), \
        "the template did not run"
    ref, got = reference_and_opencl(Op.MAX_POOL_2D, inputs, out)
    np.testing.assert_array_equal(got.outputs[0], ref.outputs[0])
