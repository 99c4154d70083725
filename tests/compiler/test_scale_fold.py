"""compiler/gemm_fold.py's fold_column_scales: a squeeze-and-excite block's MUL of a feature map
by a per-channel gate, read only by the 1x1 convolution after it, folds into that convolution's
GEMM (the GEMM scales A's columns as it reads them: one launch and one stored tensor fewer), and
gives the bits the MUL's own kernel gave, on the OpenCL device here."""
from __future__ import annotations

import numpy as np
import pytest

from nngpu.backends import create, device_backends
from nngpu.backends.opencl import CPU_TARGET, TARGET as OPENCL
from nngpu.compiler.lower import device_plan, lower_model
from nngpu.compiler.steps import GemmStep, KernelStep
from nngpu.hal import OperationType as Op
from nngpu.runtime.interpreter import GraphRunner

from .model_builder import ModelBuilder, T

HW, C, COUT = 14, 32, 48


def excite(gate_first: bool = False, also_output: bool = False, channels: int = C):
    """x -> MUL(x, LOGISTIC(MEAN(x))) -> CONV_2D 1x1 of `channels` input channels: the model, its numpy
    answer and the gated tensor."""
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, [1, HW, HW, channels])
    mean = b.op(Op.MEAN, [x, b.constant(T.TENSOR_INT32, [1, 2]), b.constant(T.INT32, 1)], T.TENSOR_FLOAT32,
                [1, 1, 1, channels])
    gate = b.op(Op.LOGISTIC, [mean], T.TENSOR_FLOAT32, [1, 1, 1, channels])
    gated = b.op(Op.MUL, [gate, x, b.constant(T.INT32, 0)] if gate_first else [x, gate, b.constant(T.INT32, 0)],
                 T.TENSOR_FLOAT32, [1, HW, HW, channels])
    rng = np.random.default_rng(2)
    w = (rng.standard_normal((COUT, 1, 1, channels)) * 0.3).astype(np.float32)
    bias = rng.standard_normal(COUT).astype(np.float32)
    ins = [gated, b.constant(T.TENSOR_FLOAT32, w), b.constant(T.TENSOR_FLOAT32, bias),
           *(b.constant(T.INT32, v) for v in (2, 1, 1, 1))]
    b.output(b.op(Op.CONV_2D, ins, T.TENSOR_FLOAT32, [1, HW, HW, COUT]))
    if also_output:
        b.output(gated)

    def want(v: np.ndarray) -> np.ndarray:
        g = 1 / (1 + np.exp(-v.mean(axis=(1, 2), keepdims=True)))
        return np.maximum((v * g) @ w.reshape(COUT, channels).T + bias, 0)
    return b.build(), want, gated


def _steps(model, target=OPENCL, fuse=True):
    steps = lower_model(GraphRunner(model), target, fuse=fuse).steps
    return [s for s in steps if isinstance(s, GemmStep)], [s for s in steps if isinstance(s, KernelStep)]


@pytest.mark.parametrize("target", [OPENCL, CPU_TARGET], ids=["gpu", "cpu"])
@pytest.mark.parametrize("gate_first", [False, True], ids=["x-first", "gate-first"])
def test_the_gate_becomes_the_gemms_scale(gate_first, target):
    model, _, gated = excite(gate_first)
    (gemm,), kernels = _steps(model, target)
    x = model.main.inputIndexes[0]
    assert gemm.scale_a and gemm.args[0] == x and gated not in gemm.args
    assert not any(Op.MUL in [model.main.operations[k].type for k in s.ops] for s in kernels)
    assert len(gemm.ops) == 2   # the MUL and the convolution


def test_a_gated_tensor_read_elsewhere_is_stored_and_the_mul_stays():
    model, _, gated = excite(also_output=True)
    (gemm,), _ = _steps(model)
    assert not gemm.scale_a and gemm.args[0] == gated


def test_without_fusion_nothing_folds():
    (gemm,), _ = _steps(excite()[0], fuse=False)
    assert not gemm.scale_a


@pytest.mark.skipif("opencl" not in device_backends(), reason="no OpenCL device here")
@pytest.mark.parametrize("gate_first", [False, True], ids=["x-first", "gate-first"])
@pytest.mark.parametrize("channels", [C, 40], ids=["whole-vectors", "a-tail"])
def test_folded_bits_are_the_unfolded_ones(gate_first, channels):
    """K = 32: the CPU GEMM scales A 16 columns at a time; K = 40: 8 more one at a time."""
    model, want, _ = excite(gate_first, channels=channels)
    x = np.random.default_rng(3).standard_normal([1, HW, HW, channels]).astype(np.float32)
    backend = create("opencl")
    folded = np.asarray(device_plan(GraphRunner(model), backend).execute([x])[0])
    unfolded = np.asarray(device_plan(GraphRunner(model), backend, fuse=False).execute([x])[0])
    assert folded.tobytes() == unfolded.tobytes()
    np.testing.assert_allclose(folded, want(x), rtol=1e-5, atol=1e-5)
