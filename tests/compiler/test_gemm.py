"""Convolutions and fully connected layers large enough to take the im2col + GEMM path match
the numpy reference on every device backend."""
from __future__ import annotations

import numpy as np
import pytest

from nngpu.backends import device_backends
from nngpu.compiler.steps import GemmStep, KernelStep
from nngpu.compiler.lower import lower_model
from nngpu.driver.device import Device
from nngpu.runtime.interpreter import GraphRunner
from nngpu.hal import OperandType as T, OperationType as Op
from nngpu.modelutil import as_model_1_3
from nngpu.testing import output, run_model, scalar, single_op_model, tensor
from nngpu.backends.cuda import TARGET as CUDA
from nngpu.backends.opencl import TARGET as OPENCL

rng = np.random.default_rng(3)


def conv(shape, cout, k, stride, padding, act=1, relaxed=False):
    n, h, w, c = shape
    x = rng.standard_normal(shape, dtype=np.float32)
    f = rng.standard_normal((cout, k, k, c), dtype=np.float32) * 0.2
    b = rng.standard_normal(cout, dtype=np.float32)
    ins = [tensor(T.TENSOR_FLOAT32, x), tensor(T.TENSOR_FLOAT32, f, const=True), tensor(T.TENSOR_FLOAT32, b, const=True),
           scalar(T.INT32, padding), scalar(T.INT32, stride), scalar(T.INT32, stride), scalar(T.INT32, act)]
    return single_op_model(Op.CONV_2D, ins, [output(T.TENSOR_FLOAT32, [0, 0, 0, 0])], relaxed), x


def fully_connected(batch, k, units, relaxed=False):
    x = rng.standard_normal((batch, k), dtype=np.float32)
    w = rng.standard_normal((units, k), dtype=np.float32) * 0.1
    b = rng.standard_normal(units, dtype=np.float32)
    ins = [tensor(T.TENSOR_FLOAT32, x), tensor(T.TENSOR_FLOAT32, w, const=True), tensor(T.TENSOR_FLOAT32, b, const=True),
           scalar(T.INT32, 3)]
    model = single_op_model(Op.FULLY_CONNECTED, ins, [output(T.TENSOR_FLOAT32, [batch, units])], relaxed)
    return model, x


CASES = {
    "conv3x3-same": lambda: conv((1, 28, 28, 32), 64, 3, 1, 1),
    "conv3x3-valid-stride2": lambda: conv((2, 29, 29, 16), 48, 3, 2, 2, act=0),
    "conv1x1": lambda: conv((1, 32, 32, 64), 64, 1, 1, 2),
    # M = 2025 and N = 20: rows past the last whole block and columns past the last whole vector
    "conv1x1-ragged": lambda: conv((1, 45, 45, 64), 20, 1, 1, 2),
    "fully-connected": lambda: fully_connected(64, 512, 256),
    "conv3x3-ragged": lambda: conv((1, 37, 37, 5), 37, 3, 1, 1),
    # K >= 512: the weights read in place as B transposed, or on a CPU device packed (a small
    # copy); M, N past the last whole 4 x 4 block
    "conv3x3-k576": lambda: conv((1, 13, 15, 64), 37, 3, 1, 1),
    # K >= 512 and weights past a CPU device's packing budget: read in place there too
    "fully-connected-in-place": lambda: fully_connected(16, 1024, 301),
    "fully-connected-ragged": lambda: fully_connected(7, 1030, 301),
}


@pytest.mark.parametrize("name", CASES)
def test_takes_the_gemm_path(name):
    model, _ = CASES[name]()
    spec = lower_model(GraphRunner(as_model_1_3(model)), OPENCL)
    assert any(isinstance(s, GemmStep) for s in spec.steps)


@pytest.mark.parametrize("target", [OPENCL, CUDA], ids=lambda t: t.name)
@pytest.mark.parametrize("name", CASES)
def test_the_gemm_stores_the_output_with_bias_and_activation(name, target):
    """The GEMM's epilogue writes the layer's output: no kernel after it (kernels/gemm.cl on
    OpenCL, kernels/gemm.cu on CUDA, where cuBLAS would leave them to a kernel of their own)."""
    model, _ = CASES[name]()
    runner = GraphRunner(as_model_1_3(model))
    steps = lower_model(runner, target).steps
    gemm = next(s for s in steps if isinstance(s, GemmStep))
    assert gemm.bounds is not None and gemm.args[-1] == runner.model.main.outputIndexes[0]
    assert steps.index(gemm) == len(steps) - 1 or not isinstance(steps[steps.index(gemm) + 1], KernelStep)


@pytest.mark.parametrize("backend", device_backends())
@pytest.mark.parametrize("name", CASES)
def test_matches_reference(backend, name):
    got, want = _output_and_reference(backend, *CASES[name]())
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def _output_and_reference(backend: str, model, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    cap = 1 << 22
    ref = run_model(model, [x], [cap], Device("numpy"))
    got = run_model(model, [x], [cap], Device(backend))
    assert got.status == ref.status and got.shapes == ref.shapes
    return got.outputs[0], ref.outputs[0]


RELAXED = {"conv3x3-same": lambda: conv((1, 28, 28, 32), 64, 3, 1, 1, relaxed=True),
           "fully-connected": lambda: fully_connected(64, 512, 256, relaxed=True)}


@pytest.mark.parametrize("name", RELAXED)
def test_a_relaxed_model_s_gemms_are_relaxed(name):
    """relaxComputationFloat32toFloat16 reaches the GEMM step (a bare GEMM's cuBLAS call then takes
    float16 inputs: tests/backends/test_cublas_gemm.py); a model not relaxed never."""
    for relaxed, (model, _) in ((True, RELAXED[name]()), (False, CASES[name]())):
        for target in (CUDA, OPENCL):
            steps = lower_model(GraphRunner(as_model_1_3(model)), target).steps
            assert [s.relaxed for s in steps if isinstance(s, GemmStep)] == [relaxed]


@pytest.mark.parametrize("backend", device_backends())
@pytest.mark.parametrize("name", RELAXED)
def test_relaxed_matches_reference_within_float16_precision(backend, name):
    """Within float16's precision whatever a backend makes of the flag (OpenCL on PoCL computes
    float32: no cl_khr_fp16)."""
    model, x = RELAXED[name]()
    got, want = _output_and_reference(backend, model, x)
    k = x.shape[-1] * (9 if name.startswith("conv3x3") else 1)
    np.testing.assert_allclose(got, want, rtol=1e-2, atol=2e-3 * np.sqrt(k))
