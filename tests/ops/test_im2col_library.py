"""The OpenCL backend's im2col template (kernels/im2col.cl: a work-item per row of the patch
matrix) builds the GEMM convolution's patch matrix with the generated kernel's bits: the same
convolution with the template and without it (the generated im2col) gives the same output bit
for bit, on geometries with padding on every side, strides, dilations and a batch; each case
also proves the template ran."""
from __future__ import annotations

import numpy as np
import pytest

from nngpu.backends import device_backends
from nngpu.compiler import lower
from nngpu.compiler.steps import TemplateStep
from nngpu.driver.device import Device
from nngpu.hal import OperationType as Op
from nngpu.testing import output, run_op, single_op_model, tensor

from .device_check import F32, data, flag, i32, segments

pytestmark = pytest.mark.skipif("opencl" not in device_backends(), reason="no OpenCL device here")

# name: (N, H, W, Cin, KH, KW, Cout, pads (left, right, top, bottom), strides (w, h), dilations (w, h))
CASES = {
    # (a stem's 3 input channels take kernels/conv.cl instead: tests/ops/test_conv_library.py)
    "3x3-s2-six-channels": (1, 32, 32, 6, 3, 3, 16, (0, 1, 0, 1), (2, 2), (1, 1)),
    "same-3x3-batch": (2, 12, 10, 8, 3, 3, 24, (1, 1, 1, 1), (1, 1), (1, 1)),
    "5x3-uneven-pads": (1, 14, 11, 5, 5, 3, 12, (2, 0, 1, 3), (1, 2), (1, 1)),
    "dilated": (1, 16, 16, 6, 3, 3, 32, (2, 2, 2, 2), (1, 1), (2, 2)),
}


def _conv(case):
    n, h, w, cin, kh, kw, cout, pads, strides, dilations = CASES[case]
    rng = np.random.default_rng(len(case))
    inputs = [tensor(F32, data((n, h, w, cin), F32)),
              tensor(F32, rng.standard_normal((cout, kh, kw, cin)).astype(np.float32), const=True),
              tensor(F32, rng.standard_normal(cout).astype(np.float32), const=True),
              *map(i32, pads), *map(i32, strides), i32(0), flag(False), *map(i32, dilations)]
    return inputs, output(F32, [0] * 4)


@pytest.mark.parametrize("case", CASES)
def test_the_im2col_template_gives_the_generated_kernels_bits(case, monkeypatch):
    inputs, out = _conv(case)
    model = single_op_model(Op.CONV_2D, inputs, [out])
    assert any(isinstance(s, TemplateStep) and "im2col" in s.source
               for seg in segments(model, inputs, "opencl-cpu") for s in seg.steps), "the template did not run"
    with_template = run_op(Op.CONV_2D, inputs, [out], device=Device("opencl"), version=13)
    monkeypatch.setattr(lower, "has_template", lambda target, kind: kind != "im2col" and kind in target.templates)
    assert not any(isinstance(s, TemplateStep) for seg in segments(model, inputs, "opencl-cpu") for s in seg.steps)
    generated = run_op(Op.CONV_2D, inputs, [out], device=Device("opencl"), version=13)
    ref = run_op(Op.CONV_2D, inputs, [out], version=13)
    assert with_template.status == generated.status == ref.status == 0
    np.testing.assert_array_equal(with_template.outputs[0].view(np.uint32), generated.outputs[0].view(np.uint32))
    np.testing.assert_allclose(with_template.outputs[0], ref.outputs[0], rtol=1e-4, atol=1e-4)
