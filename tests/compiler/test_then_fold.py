"""compiler/gemm_fold.py's fold_elementwise_consumers and compiler/render_epilogue.py: the one
elementwise kernel that reads a GEMM's or a depthwise template's output folds into it, which
computes it as it stores (one launch and one stored tensor fewer), only where nothing else
reads that output and the kernel reads it at its own element; on the OpenCL device here the
folded plan gives the unfolded plan's answer."""
from __future__ import annotations

from typing import Callable

import numpy as np
import pytest

from nngpu.backends import create, device_backends
from nngpu.backends.opencl import CPU_TARGET, TARGET as OPENCL
from nngpu.compiler.lower import device_plan, lower_model
from nngpu.compiler.steps import GemmStep, KernelStep, TemplateStep
from nngpu.hal import OperationType as Op
from nngpu.runtime.interpreter import GraphRunner

from .model_builder import ModelBuilder, T

HW = 16
COUT = 32
PADDED = 24   # pad-add's second input: channels


def _conv(b: ModelBuilder, x: int, cin: int, act: int) -> tuple[int, Callable]:
    """A 1x1 convolution of HW * HW x COUT x cin multiply-adds (a GEMM on OpenCL): its output
    and its numpy function."""
    rng = np.random.default_rng(cin)
    w = (rng.standard_normal((COUT, 1, 1, cin)) * 0.3).astype(np.float32)
    bias = rng.standard_normal(COUT).astype(np.float32)
    ins = [x, b.constant(T.TENSOR_FLOAT32, w), b.constant(T.TENSOR_FLOAT32, bias), b.constant(T.INT32, 2),
           b.constant(T.INT32, 1), b.constant(T.INT32, 1), b.constant(T.INT32, act)]
    y = b.op(Op.CONV_2D, ins, T.TENSOR_FLOAT32, [1, HW, HW, COUT])
    return y, lambda v: _act(v @ w.reshape(COUT, -1).T + bias, act)


def _depthwise(b: ModelBuilder, x: int, act: int) -> tuple[int, Callable]:
    """A 3x3 depthwise convolution with SAME padding (the depthwise template on OpenCL)."""
    rng = np.random.default_rng(3)
    w = (rng.standard_normal((1, 3, 3, COUT)) * 0.3).astype(np.float32)
    bias = rng.standard_normal(COUT).astype(np.float32)
    ins = [x, b.constant(T.TENSOR_FLOAT32, w), b.constant(T.TENSOR_FLOAT32, bias), b.constant(T.INT32, 1),
           b.constant(T.INT32, 1), b.constant(T.INT32, 1), b.constant(T.INT32, 1), b.constant(T.INT32, act)]
    y = b.op(Op.DEPTHWISE_CONV_2D, ins, T.TENSOR_FLOAT32, [1, HW, HW, COUT])

    def reference(v: np.ndarray) -> np.ndarray:
        p = np.pad(v, [(0, 0), (1, 1), (1, 1), (0, 0)])
        taps = [p[:, ky:ky + HW, kx:kx + HW, :] * w[0, ky, kx] for ky in range(3) for kx in range(3)]
        return _act(sum(taps) + bias, act)
    return y, reference


def _act(y: np.ndarray, act: int) -> np.ndarray:
    return np.maximum(y, 0) if act == 1 else y


def block(consumer: str, producer: str = "conv", also_output: bool = False):
    """x -> `producer` (a 1x1 CONV_2D or a DEPTHWISE_CONV_2D) -> `consumer`: the model and its
    numpy answer for its inputs. hard-swish: HARD_SWISH; swish: MUL(y, LOGISTIC(y)); pad-add:
    RELU(ADD(y, PAD(z))), z with fewer channels than y (the MediaPipe face detector's blocks)."""
    b = ModelBuilder()
    shape = [1, HW, HW, COUT]
    x = b.input(T.TENSOR_FLOAT32, shape)
    act = 0 if consumer == "swish" else 1
    y, produce = _conv(b, x, COUT, act) if producer == "conv" else _depthwise(b, x, act)
    if consumer == "hard-swish":
        out = b.op(Op.HARD_SWISH, [y], T.TENSOR_FLOAT32, shape)
    elif consumer == "swish":
        gate = b.op(Op.LOGISTIC, [y], T.TENSOR_FLOAT32, shape)
        out = b.op(Op.MUL, [y, gate, b.constant(T.INT32, 0)], T.TENSOR_FLOAT32, shape)
    else:
        z = b.input(T.TENSOR_FLOAT32, [1, HW, HW, PADDED])
        pads = b.constant(T.TENSOR_INT32, [[0, 0], [0, 0], [0, 0], [0, COUT - PADDED]])
        padded = b.op(Op.PAD, [z, pads], T.TENSOR_FLOAT32, shape)
        out = b.op(Op.ADD, [y, padded, b.constant(T.INT32, 1)], T.TENSOR_FLOAT32, shape)
    b.output(out)
    if also_output:
        b.output(y)

    def want(*inputs: np.ndarray) -> np.ndarray:
        v = produce(inputs[0])
        if consumer == "hard-swish":
            return v * np.clip(v + 3, 0, 6) / 6
        if consumer == "swish":
            return v / (1 + np.exp(-v))
        return np.maximum(v + np.pad(inputs[1], [(0, 0)] * 3 + [(0, COUT - PADDED)]), 0)
    return b.build(), want, y


def _steps(model, target=OPENCL, fuse=True):
    steps = lower_model(GraphRunner(model), target, fuse=fuse).steps
    return [s for s in steps if isinstance(s, (GemmStep, TemplateStep))], [s for s in steps if isinstance(s, KernelStep)]


CONSUMERS = ["hard-swish", "swish", "pad-add"]
PRODUCERS = ["conv", "depthwise"]


def _then(step) -> str:
    """The folded kernel's C source in a GEMM's or a template's step ("" without one)."""
    if isinstance(step, GemmStep):
        return step.then or ""
    return step.source[:step.source.index("#define NAME")]   # what came before the template's own defines


@pytest.mark.parametrize("target", [OPENCL, CPU_TARGET], ids=["gpu", "cpu"])
@pytest.mark.parametrize("producer", PRODUCERS)
@pytest.mark.parametrize("consumer", CONSUMERS)
def test_the_consumer_becomes_the_producers_epilogue(consumer, producer, target):
    model, _, y = block(consumer, producer)
    (step,), kernels = _steps(model, target)
    assert not kernels and _then(step) and len(step.ops) > 1
    inputs, out = model.main.inputIndexes, model.main.outputIndexes[0]
    assert step.args[-1] == out and y not in step.args   # the producer's output is never stored
    assert step.args[3:-1] == inputs[1:]   # the consumer's other buffer (pad-add's z) after the producer's
    # GEMMs store vectors only on CPU devices; the depthwise template on every OpenCL device
    assert ("nn_then_v16" in _then(step)) == (target is CPU_TARGET or producer == "depthwise")


@pytest.mark.parametrize("producer", PRODUCERS)
def test_a_lane_wise_consumer_is_written_in_vectors_and_a_pad_along_its_rows(producer):
    """pad-add reads z at r * 24 + c: in vectors of the row (compiler/render_column_then.py),
    the vector across column 24 lane by lane."""
    (swish,), _ = _steps(block("swish", producer)[0], CPU_TARGET)
    (padded,), _ = _steps(block("pad-add", producer)[0], CPU_TARGET)
    assert "exp(" in _then(swish).split("nn_then_v16")[1] and "lane[" not in _then(swish)
    v16 = _then(padded).split("nn_then_v16")[1]
    assert "vload16(0, in0 + " in v16 and "lane[j] = nn_then(lane[j], i + j, r, c + j, in0)" in v16


@pytest.mark.parametrize("producer", PRODUCERS)
def test_the_gather_takes_its_coordinates_from_the_row_and_column(producer):
    """pad-add's PAD reads z at (pixel, channel) of the element: with rows of COUT channels, the
    pixel is the row and the channel the column, so no division of the index is left."""
    (padded,), _ = _steps(block("pad-add", producer)[0], CPU_TARGET)
    scalar = _then(padded).split("nn_then_v4")[0]
    assert "nn_then(float y, int i, int r, int c" in scalar
    assert "i /" not in scalar and "i %" not in scalar and f"(c >= {PADDED})" in scalar


@pytest.mark.parametrize("producer", PRODUCERS)
def test_an_output_read_elsewhere_is_stored_and_the_consumer_stays(producer):
    model, _, _ = block("hard-swish", producer, also_output=True)
    (step,), kernels = _steps(model)
    assert not _then(step) and len(kernels) == 1


@pytest.mark.parametrize("producer", PRODUCERS)
def test_without_fusion_nothing_folds(producer):
    (step,), kernels = _steps(block("hard-swish", producer)[0], fuse=False)
    assert not _then(step) and len(kernels) == 1


@pytest.mark.skipif("opencl" not in device_backends(), reason="no OpenCL device here")
@pytest.mark.parametrize("producer", PRODUCERS)
@pytest.mark.parametrize("consumer", CONSUMERS)
def test_folded_answers_are_the_unfolded_ones(consumer, producer):
    model, want, _ = block(consumer, producer)
    rng = np.random.default_rng(7)
    inputs = [(rng.standard_normal([1, HW, HW, COUT]) * 2).astype(np.float32)]
    if consumer == "pad-add":
        inputs.append(rng.standard_normal([1, HW, HW, PADDED]).astype(np.float32))
    backend = create("opencl")
    folded = np.asarray(device_plan(GraphRunner(model), backend).execute(inputs)[0])
    unfolded = np.asarray(device_plan(GraphRunner(model), backend, fuse=False).execute(inputs)[0])
    assert folded.tobytes() == unfolded.tobytes()
    np.testing.assert_allclose(folded, want(*inputs), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("target, ldb", [(OPENCL, None), (CPU_TARGET, 32)], ids=["gpu", "cpu"])
def test_packed_weights_are_padded_to_whole_vectors_on_a_cpu(target, ldb):
    """28 output channels (the face detector's first block): a CPU device's GEMM reads B packed
    as [K, 32], zeros past 28; a GPU's as [K, 28]."""
    cout = 28
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, [1, HW, HW, COUT])
    w = np.random.default_rng(1).standard_normal((cout, 1, 1, COUT)).astype(np.float32)
    ins = [x, b.constant(T.TENSOR_FLOAT32, w), b.constant(T.TENSOR_FLOAT32, np.zeros(cout, np.float32)),
           *(b.constant(T.INT32, v) for v in (2, 1, 1, 0))]
    b.output(b.op(Op.CONV_2D, ins, T.TENSOR_FLOAT32, [1, HW, HW, cout]))
    spec = lower_model(GraphRunner(b.build()), target)
    (gemm,) = [s for s in spec.steps if isinstance(s, GemmStep)]
    assert gemm.ldb == ldb and gemm.n == cout and not gemm.b_transposed
    packed = spec.constants[gemm.args[1]]
    assert packed.shape == (COUT, ldb or cout)
    np.testing.assert_array_equal(packed[:, :cout], w.reshape(cout, COUT).T)
    assert not packed[:, cout:].any()


def _squeeze_excite_layer():
    """A squeeze-and-excite block's 1x1 convolution of one pixel, 240 -> 64 channels (15,360
    multiply-adds), RELU fused, then a HARD_SWISH: the model and its numpy answer."""
    cin, cout = 240, 64
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, [1, 1, 1, cin])
    rng = np.random.default_rng(5)
    w = (rng.standard_normal((cout, 1, 1, cin)) * 0.1).astype(np.float32)
    bias = rng.standard_normal(cout).astype(np.float32)
    ins = [x, b.constant(T.TENSOR_FLOAT32, w), b.constant(T.TENSOR_FLOAT32, bias),
           *(b.constant(T.INT32, v) for v in (2, 1, 1, 1))]
    y = b.op(Op.CONV_2D, ins, T.TENSOR_FLOAT32, [1, 1, 1, cout])
    b.output(b.op(Op.HARD_SWISH, [y], T.TENSOR_FLOAT32, [1, 1, 1, cout]))

    def want(v: np.ndarray) -> np.ndarray:
        t = np.maximum(v.reshape(1, cin) @ w.reshape(cout, cin).T + bias, 0)
        return (t * np.clip(t + 3, 0, 6) / 6).reshape(1, 1, 1, cout)
    return b.build(), want


def test_a_squeeze_excite_layer_is_a_gemm_on_a_cpu_device():
    """From 2^12 multiply-adds on a CPU device (its GEMM's vectors beat the generated loop per
    output 3-4x there), with the HARD_SWISH folded in; a GPU's threshold stays 2^16."""
    model, _ = _squeeze_excite_layer()
    (gemm,), kernels = _steps(model, CPU_TARGET)
    assert isinstance(gemm, GemmStep) and gemm.then and not kernels
    assert _steps(model, OPENCL)[0] == []


@pytest.mark.skipif("opencl" not in device_backends(), reason="no OpenCL device here")
def test_a_squeeze_excite_gemm_matches_numpy():
    model, want = _squeeze_excite_layer()
    x = np.random.default_rng(6).standard_normal([1, 1, 1, 240]).astype(np.float32)
    got = np.asarray(device_plan(GraphRunner(model), create("opencl")).execute([x])[0])
    np.testing.assert_allclose(got, want(x), rtol=1e-5, atol=1e-5)


def _stem_then_hard_swish():
    """A 3x3 stride-2 convolution of 3 channels to COUT (the direct conv template on a CPU
    device), then a HARD_SWISH (MobileNet v3's stem): the model and its numpy answer."""
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, [1, HW, HW, 3])
    rng = np.random.default_rng(8)
    w = (rng.standard_normal((COUT, 3, 3, 3)) * 0.3).astype(np.float32)
    bias = rng.standard_normal(COUT).astype(np.float32)
    ins = [x, b.constant(T.TENSOR_FLOAT32, w), b.constant(T.TENSOR_FLOAT32, bias),
           *(b.constant(T.INT32, v) for v in (1, 2, 2, 0))]
    half = HW // 2
    y = b.op(Op.CONV_2D, ins, T.TENSOR_FLOAT32, [1, half, half, COUT])
    b.output(b.op(Op.HARD_SWISH, [y], T.TENSOR_FLOAT32, [1, half, half, COUT]))

    def want(v: np.ndarray) -> np.ndarray:
        p = np.pad(v, [(0, 0), (0, 1), (0, 1), (0, 0)])   # SAME at stride 2 of an even size: after
        taps = [p[:, ky:ky + HW:2, kx:kx + HW:2, :] @ w[:, ky, kx, :].T for ky in range(3) for kx in range(3)]
        t = sum(taps) + bias
        return t * np.clip(t + 3, 0, 6) / 6
    return b.build(), want


def test_the_stem_template_takes_its_consumer():
    (step,), kernels = _steps(_stem_then_hard_swish()[0], CPU_TARGET)
    assert isinstance(step, TemplateStep) and "TAP(ky, kx, ic" in step.source and not kernels
    assert "nn_then_v16" in _then(step) and len(step.ops) == 2


@pytest.mark.skipif("opencl" not in device_backends(), reason="no OpenCL device here")
def test_the_stem_with_its_consumer_matches_numpy():
    model, want = _stem_then_hard_swish()
    x = np.random.default_rng(9).standard_normal([1, HW, HW, 3]).astype(np.float32)
    backend = create("opencl")
    folded = np.asarray(device_plan(GraphRunner(model), backend).execute([x])[0])
    unfolded = np.asarray(device_plan(GraphRunner(model), backend, fuse=False).execute([x])[0])
    assert folded.tobytes() == unfolded.tobytes()
    np.testing.assert_allclose(folded, want(x), rtol=1e-5, atol=1e-5)
