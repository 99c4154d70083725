"""compiler/gemm_fold.py: an ADD of a GEMM's output and a residual folds into the GEMM's epilogue
(one launch and one stored tensor fewer) only where nothing else reads that output, and gives the
bits the ADD's own kernel gave, on the OpenCL device here."""
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

SHAPE = [1, 16, 16, 32]   # a 1x1 convolution of 256 x 32 x 32 multiply-adds: a GEMM on OpenCL
BOUNDS = {0: (-np.inf, np.inf), 1: (0.0, np.inf), 2: (-1.0, 1.0), 3: (0.0, 6.0)}   # by fused activation code


def _conv(b: ModelBuilder, x: int, seed: int, act: int = 0) -> tuple[int, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((32, 1, 1, 32)) * 0.3).astype(np.float32)
    bias = rng.standard_normal(32).astype(np.float32)
    ins = [x, b.constant(T.TENSOR_FLOAT32, w), b.constant(T.TENSOR_FLOAT32, bias), b.constant(T.INT32, 2),
           b.constant(T.INT32, 1), b.constant(T.INT32, 1), b.constant(T.INT32, act)]
    return b.op(Op.CONV_2D, ins, T.TENSOR_FLOAT32, SHAPE), w, bias


def _reference_conv(x: np.ndarray, w: np.ndarray, bias: np.ndarray, act: int) -> np.ndarray:
    return np.clip(x @ w.reshape(32, 32).T + bias, *BOUNDS[act])


def residual_block(act: int, conv_first: bool = True, conv_act: int = 0, also_output: bool = False):
    """x -> CONV_2D -> ADD(., x) with activation `act` (the conv's output on the side given):
    the model and its numpy answer for an input."""
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, SHAPE)
    y, w, bias = _conv(b, x, 1, conv_act)
    s = b.op(Op.ADD, [y, x] if conv_first else [x, y], T.TENSOR_FLOAT32, SHAPE)
    b.operations[-1].inputs.append(b.constant(T.INT32, act))
    b.output(s)
    if also_output:
        b.output(y)
    return b.build(), lambda v: np.clip(_reference_conv(v, w, bias, conv_act) + v, *BOUNDS[act])


def two_branches():
    """ADD(CONV_2D(x), CONV_2D(x)): the sum folds into the GEMM that runs second."""
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, SHAPE)
    (y1, w1, b1), (y2, w2, b2) = _conv(b, x, 1, act=1), _conv(b, x, 2, act=3)
    b.output(b.op(Op.ADD, [y1, y2, b.constant(T.INT32, 0)], T.TENSOR_FLOAT32, SHAPE))
    return b.build(), lambda v: _reference_conv(v, w1, b1, 1) + _reference_conv(v, w2, b2, 3), y1


def _gemms_and_kernels(model, target=OPENCL):
    steps = lower_model(GraphRunner(model), target).steps
    return [s for s in steps if isinstance(s, GemmStep)], [s for s in steps if isinstance(s, KernelStep)]


@pytest.mark.parametrize("target", [OPENCL, CPU_TARGET], ids=["gpu", "cpu"])
@pytest.mark.parametrize("conv_first", [True, False], ids=["conv-first", "conv-second"])
@pytest.mark.parametrize("act", BOUNDS)
def test_the_add_becomes_the_gemms_epilogue(act, conv_first, target):
    model, _ = residual_block(act, conv_first, conv_act=3)
    (gemm,), kernels = _gemms_and_kernels(model, target)
    assert not kernels
    assert gemm.bounds == BOUNDS[3] and gemm.residual == BOUNDS[act] and gemm.ops == [0, 1]
    x, out = model.main.inputIndexes[0], model.main.outputIndexes[0]
    assert gemm.args[3:] == [x, out]   # the residual is the block's input; the sum is stored, the conv's not


def test_an_output_read_elsewhere_is_stored_and_the_add_stays():
    model, _ = residual_block(0, also_output=True)
    (gemm,), kernels = _gemms_and_kernels(model)
    assert gemm.residual is None and len(kernels) == 1


def test_the_sum_of_two_gemms_folds_into_the_later_one():
    model, _, first = two_branches()
    (one, two), kernels = _gemms_and_kernels(model)
    assert not kernels and one.residual is None and one.args[-1] == first
    assert two.residual == BOUNDS[0] and two.args[3] == first


def test_without_fusion_the_add_stays():
    model, _ = residual_block(1)
    steps = lower_model(GraphRunner(model), OPENCL, fuse=False).steps
    assert [type(s) for s in steps if isinstance(s, (GemmStep, KernelStep))] == [GemmStep, KernelStep]


def _run(backend, model, x: np.ndarray, fuse: bool) -> np.ndarray:
    return np.asarray(device_plan(GraphRunner(model), backend, fuse=fuse).execute([x])[0])


@pytest.mark.skipif("opencl" not in device_backends(), reason="no OpenCL device here")
@pytest.mark.parametrize("case", ["relu6-conv-first", "relu1-conv-second", "none", "two-branches"])
def test_folded_bits_are_the_unfolded_ones(case):
    if case == "two-branches":
        model, want, _ = two_branches()
    else:
        act, conv_first = {"relu6-conv-first": (3, True), "relu1-conv-second": (2, False), "none": (0, True)}[case]
        model, want = residual_block(act, conv_first, conv_act=1)
    x = np.random.default_rng(5).standard_normal(SHAPE).astype(np.float32)
    backend = create("opencl")
    folded = _run(backend, model, x, fuse=True)
    assert folded.tobytes() == _run(backend, model, x, fuse=False).tobytes()
    np.testing.assert_allclose(folded, want(x), rtol=1e-5, atol=1e-5)
