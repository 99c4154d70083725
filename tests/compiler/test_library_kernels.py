"""Hand-written kernels that a target has in place of the generated one (compiler/library.py):
float depthwise convolutions that take kernels/depthwise.cl on OpenCL (channels in vectors of 8
or 4; strides, dilations, padding on every side, each fused activation, NaN kept) match the numpy
reference on every device backend, and the layers it does not cover keep the generated kernel."""
from __future__ import annotations

import numpy as np
import pytest

from nngpu.backends import device_backends, targets
from nngpu.compiler.lower import lower_model
from nngpu.compiler.steps import KernelStep, TemplateStep
from nngpu.driver.device import Device
from nngpu.hal import OperandType as T, OperationType as Op
from nngpu.modelutil import as_model_1_3
from nngpu.runtime.interpreter import GraphRunner
from nngpu.testing import output, run_model, scalar, single_op_model, tensor


def depthwise(seed: int, shape, k: int, stride: int, pads, act: int = 0, dilation: int = 1, multiplier: int = 1,
              nan: bool = False):
    rng = np.random.default_rng(seed)
    n, h, w, c = shape
    x = rng.standard_normal(shape, dtype=np.float32)
    if nan:
        x[0, 0, 0, :3] = np.nan
    f = rng.standard_normal((1, k, k, c * multiplier), dtype=np.float32)
    b = rng.standard_normal(c * multiplier, dtype=np.float32)
    left, right, top, bottom = pads
    ins = [tensor(T.TENSOR_FLOAT32, x), tensor(T.TENSOR_FLOAT32, f, const=True), tensor(T.TENSOR_FLOAT32, b, const=True),
           *(scalar(T.INT32, v) for v in (left, right, top, bottom, stride, stride, multiplier, act)),
           scalar(T.BOOL, False), scalar(T.INT32, dilation), scalar(T.INT32, dilation)]
    return single_op_model(Op.DEPTHWISE_CONV_2D, ins, [output(T.TENSOR_FLOAT32, [0, 0, 0, 0])]), x


LIBRARY = {
    "3x3-same-relu6": lambda: depthwise(1, (1, 17, 19, 32), 3, 1, (1, 1, 1, 1), act=3),
    "3x3-stride2-relu": lambda: depthwise(2, (2, 15, 16, 24), 3, 2, (0, 1, 0, 1), act=1),
    "5x5-dilated-relu1": lambda: depthwise(3, (1, 20, 18, 16), 5, 1, (4, 3, 2, 4), act=2, dilation=2),
    "vectors-of-4": lambda: depthwise(4, (1, 9, 11, 12), 3, 1, (1, 1, 1, 1)),
    "nan-relu6": lambda: depthwise(5, (1, 6, 6, 8), 3, 1, (1, 1, 1, 1), act=3, nan=True),
}
GENERATED = {
    "channels-not-in-vectors": lambda: depthwise(5, (1, 8, 8, 5), 3, 1, (1, 1, 1, 1)),   # an odd count
    "multiplier-2": lambda: depthwise(7, (1, 8, 8, 8), 3, 1, (1, 1, 1, 1), multiplier=2),
}


def _steps(model, target: str):
    return lower_model(GraphRunner(as_model_1_3(model)), targets()[target]).steps


@pytest.mark.parametrize("name", LIBRARY)
def test_takes_the_library_kernel_on_opencl_only(name):
    model, _ = LIBRARY[name]()
    assert [type(s) for s in _steps(model, "opencl") if isinstance(s, (KernelStep, TemplateStep))] == [TemplateStep]
    assert not any(isinstance(s, TemplateStep) for s in _steps(model, "cuda"))


@pytest.mark.parametrize("name", GENERATED)
def test_other_layers_keep_the_generated_kernel(name):
    model, _ = GENERATED[name]()
    assert not any(isinstance(s, TemplateStep) for s in _steps(model, "opencl"))


@pytest.mark.parametrize("backend", device_backends())
@pytest.mark.parametrize("name", [*LIBRARY, *GENERATED])
def test_matches_reference(backend, name):
    model, x = {**LIBRARY, **GENERATED}[name]()
    cap = 1 << 22
    ref = run_model(model, [x], [cap], Device("numpy"))
    got = run_model(model, [x], [cap], Device(backend))
    assert got.status == ref.status and got.shapes == ref.shapes
    np.testing.assert_allclose(got.outputs[0], ref.outputs[0], rtol=1e-5, atol=1e-5)
