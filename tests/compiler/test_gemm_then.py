"""compiler/gemm_fold.py's fold_elementwise_consumers and compiler/render_epilogue.py: the one
elementwise kernel that reads a GEMM's output folds into the GEMM, which computes it as it
stores (one launch and one stored tensor fewer), only where nothing else reads that output and
the kernel reads it at its own element; on the OpenCL device here the folded plan gives the
unfolded plan's answer."""
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

HW = 16
COUT = 32


def _conv(b: ModelBuilder, x: int, cin: int, act: int = 1) -> tuple[int, np.ndarray, np.ndarray]:
    """A 1x1 convolution of HW * HW x COUT x cin multiply-adds: a GEMM on OpenCL."""
    rng = np.random.default_rng(cin)
    w = (rng.standard_normal((COUT, 1, 1, cin)) * 0.3).astype(np.float32)
    bias = rng.standard_normal(COUT).astype(np.float32)
    ins = [x, b.constant(T.TENSOR_FLOAT32, w), b.constant(T.TENSOR_FLOAT32, bias), b.constant(T.INT32, 2),
           b.constant(T.INT32, 1), b.constant(T.INT32, 1), b.constant(T.INT32, act)]
    return b.op(Op.CONV_2D, ins, T.TENSOR_FLOAT32, [1, HW, HW, COUT]), w, bias


def _conv_reference(x: np.ndarray, w: np.ndarray, bias: np.ndarray, act: int) -> np.ndarray:
    y = x @ w.reshape(COUT, -1).T + bias
    return np.maximum(y, 0) if act == 1 else y


def _swish(x: np.ndarray) -> np.ndarray:
    return x / (1 + np.exp(-x))


def _hard_swish(x: np.ndarray) -> np.ndarray:
    return x * np.clip(x + 3, 0, 6) / 6


def block(consumer: str, also_output: bool = False):
    """x -> CONV_2D -> `consumer`: the model and its numpy answer for an input.
    hard-swish: HARD_SWISH; swish: MUL(y, LOGISTIC(y)); pad-add: RELU(ADD(y, PAD(x))), x with
    fewer channels than y (the MediaPipe face detector's blocks)."""
    b = ModelBuilder()
    shape = [1, HW, HW, COUT]
    cin = 24 if consumer == "pad-add" else COUT
    x = b.input(T.TENSOR_FLOAT32, [1, HW, HW, cin])
    y, w, bias = _conv(b, x, cin, act=0 if consumer == "swish" else 1)
    if consumer == "hard-swish":
        out, then = b.op(Op.HARD_SWISH, [y], T.TENSOR_FLOAT32, shape), _hard_swish
    elif consumer == "swish":
        gate = b.op(Op.LOGISTIC, [y], T.TENSOR_FLOAT32, shape)
        out, then = b.op(Op.MUL, [y, gate, b.constant(T.INT32, 0)], T.TENSOR_FLOAT32, shape), _swish
    else:
        pads = b.constant(T.TENSOR_INT32, [[0, 0], [0, 0], [0, 0], [0, COUT - cin]])
        padded = b.op(Op.PAD, [x, pads], T.TENSOR_FLOAT32, shape)
        out, then = b.op(Op.ADD, [y, padded, b.constant(T.INT32, 1)], T.TENSOR_FLOAT32, shape), None
    b.output(out)
    if also_output:
        b.output(y)
    act = 0 if consumer == "swish" else 1

    def want(v: np.ndarray) -> np.ndarray:
        y = _conv_reference(v, w, bias, act)
        if consumer == "pad-add":
            return np.maximum(y + np.pad(v, [(0, 0)] * 3 + [(0, COUT - cin)]), 0)
        return then(y)
    return b.build(), want, y


def _steps(model, target=OPENCL, fuse=True):
    steps = lower_model(GraphRunner(model), target, fuse=fuse).steps
    return [s for s in steps if isinstance(s, GemmStep)], [s for s in steps if isinstance(s, KernelStep)]


CONSUMERS = ["hard-swish", "swish", "pad-add"]


@pytest.mark.parametrize("target", [OPENCL, CPU_TARGET], ids=["gpu", "cpu"])
@pytest.mark.parametrize("consumer", CONSUMERS)
def test_the_consumer_becomes_the_gemms_epilogue(consumer, target):
    model, _, y = block(consumer)
    (gemm,), kernels = _steps(model, target)
    assert not kernels and gemm.then is not None and len(gemm.ops) > 1
    x, out = model.main.inputIndexes[0], model.main.outputIndexes[0]
    assert gemm.args[-1] == out and y not in gemm.args   # the conv's output is never stored
    assert gemm.args[3:-1] == ([x] if consumer == "pad-add" else [])   # the consumer's other buffer
    assert ("nn_then_v16" in gemm.then) == (target is CPU_TARGET)


def test_a_lane_wise_consumer_is_written_in_vectors_and_a_gather_lane_by_lane():
    (swish,), _ = _steps(block("swish")[0], CPU_TARGET)
    (padded,), _ = _steps(block("pad-add")[0], CPU_TARGET)
    assert "exp(" in swish.then.split("nn_then_v16")[1] and "lane[" not in swish.then
    assert "lane[j] = nn_then(lane[j], i + j, in0)" in padded.then.split("nn_then_v16")[1]


def test_an_output_read_elsewhere_is_stored_and_the_consumer_stays():
    model, _, _ = block("hard-swish", also_output=True)
    (gemm,), kernels = _steps(model)
    assert gemm.then is None and len(kernels) == 1


def test_without_fusion_nothing_folds():
    (gemm,), kernels = _steps(block("hard-swish")[0], fuse=False)
    assert gemm.then is None and len(kernels) == 1


@pytest.mark.skipif("opencl" not in device_backends(), reason="no OpenCL device here")
@pytest.mark.parametrize("consumer", CONSUMERS)
def test_folded_answers_are_the_unfolded_ones(consumer):
    model, want, _ = block(consumer)
    cin = 24 if consumer == "pad-add" else COUT
    x = (np.random.default_rng(7).standard_normal([1, HW, HW, cin]) * 2).astype(np.float32)
    backend = create("opencl")
    folded = np.asarray(device_plan(GraphRunner(model), backend).execute([x])[0])
    unfolded = np.asarray(device_plan(GraphRunner(model), backend, fuse=False).execute([x])[0])
    assert folded.tobytes() == unfolded.tobytes()
    np.testing.assert_allclose(folded, want(x), rtol=1e-5, atol=1e-5)
