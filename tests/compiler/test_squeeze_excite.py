"""compiler/squeeze_excite.py: a squeeze-and-excite head (a MEAN over the pixels, one or two 1x1
convolutions of the pooled pixel) is one kernel on a CPU device (kernels/squeeze_excite.cl):
MobileNet v3's (RELU, then a hard sigmoid as a MUL folded into the second layer) and
EfficientNet's (a swish folded into the first layer, a sigmoid into the second; a second layer
whose K makes no vector in scalars); nothing folds where a value between them is read
elsewhere, where a layer is too large for one thread, or on a GPU.
On the OpenCL device here the folded head gives numpy's answer and the unfolded plan's, an
infinite input included."""
from __future__ import annotations

import numpy as np
import pytest

from nngpu.backends import create, device_backends
from nngpu.backends.opencl import CPU_TARGET, TARGET as OPENCL
from nngpu.compiler.lower import device_plan, lower_model
from nngpu.compiler.squeeze_excite import MOST_WEIGHTS
from nngpu.compiler.steps import GemmStep, KernelStep, TemplateStep
from nngpu.hal import OperationType as Op
from nngpu.runtime.interpreter import GraphRunner

from .model_builder import ModelBuilder, T

HW, C = 7, 48


def _conv1x1(b: ModelBuilder, x: int, cin: int, cout: int, act: int, seed: int):
    """A 1x1 convolution of the pooled pixel: its output and its numpy function."""
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((cout, 1, 1, cin)) * 0.3).astype(np.float32)
    bias = rng.standard_normal(cout).astype(np.float32)
    ins = [x, b.constant(T.TENSOR_FLOAT32, w), b.constant(T.TENSOR_FLOAT32, bias),
           *(b.constant(T.INT32, v) for v in (2, 1, 1, act))]
    y = b.op(Op.CONV_2D, ins, T.TENSOR_FLOAT32, [1, 1, 1, cout])
    clamp = {0: (-np.inf, np.inf), 1: (0, np.inf), 3: (0, 6)}[act]
    return y, lambda v: np.clip(v @ w.reshape(cout, cin).T + bias, *clamp)


def head(kind: str, hidden: int = 12, mean_is_output: bool = False, c: int = C):
    """x [1, HW, HW, c] -> MEAN -> the head's layers: the model and its numpy answer.
    mobilenet: CONV(RELU) -> CONV(+3 in the bias, RELU6) -> MUL(1/6); efficientnet:
    CONV -> swish (LOGISTIC, MUL) -> CONV -> LOGISTIC."""
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, [1, HW, HW, c])
    pooled = b.op(Op.MEAN, [x, b.constant(T.TENSOR_INT32, [1, 2]), b.constant(T.INT32, 1)], T.TENSOR_FLOAT32,
                  [1, 1, 1, c])
    shape = [1, 1, 1, c]
    if kind == "mobilenet":
        h, first = _conv1x1(b, pooled, c, hidden, 1, 1)
        g, second = _conv1x1(b, h, hidden, c, 3, 2)
        out = b.op(Op.MUL, [g, b.constant(T.TENSOR_FLOAT32, [1 / 6]), b.constant(T.INT32, 0)], T.TENSOR_FLOAT32,
                   shape)

        def layers(v):
            return second(first(v)) * np.float32(1 / 6)
    elif kind == "scaled":   # the first layer's folded kernel reads a buffer of its own
        h, first = _conv1x1(b, pooled, c, hidden, 1, 5)
        scale = np.linspace(0.5, 2, hidden).astype(np.float32)
        scaled = b.op(Op.MUL, [h, b.constant(T.TENSOR_FLOAT32, scale.reshape(1, 1, 1, hidden)), b.constant(T.INT32, 0)],
                      T.TENSOR_FLOAT32, [1, 1, 1, hidden])
        out, second = _conv1x1(b, scaled, hidden, c, 1, 6)

        def layers(v):
            return second(first(v) * scale)
    else:
        h, first = _conv1x1(b, pooled, c, hidden, 0, 3)
        gate = b.op(Op.LOGISTIC, [h], T.TENSOR_FLOAT32, [1, 1, 1, hidden])
        swish = b.op(Op.MUL, [h, gate, b.constant(T.INT32, 0)], T.TENSOR_FLOAT32, [1, 1, 1, hidden])
        g, second = _conv1x1(b, swish, hidden, c, 0, 4)
        out = b.op(Op.LOGISTIC, [g], T.TENSOR_FLOAT32, shape)

        def layers(v):
            t = first(v)
            return 1 / (1 + np.exp(-second(t / (1 + np.exp(-t)))))
    b.output(out)
    if mean_is_output:
        b.output(pooled)

    def want(v: np.ndarray) -> np.ndarray:
        return layers(v.astype(np.float64).mean(axis=(1, 2))).reshape(shape)
    return b.build(), want


def _steps(model, target=CPU_TARGET):
    return lower_model(GraphRunner(model), target).steps


def _heads(steps) -> list[TemplateStep]:
    return [s for s in steps if isinstance(s, TemplateStep) and s.kind == "squeeze_excite"]


def test_mobilenets_head_is_one_kernel():
    model, _ = head("mobilenet")
    steps = _steps(model)
    (one,) = _heads(steps)
    assert not [s for s in steps if isinstance(s, (GemmStep, KernelStep))]
    assert len(one.ops) == 4 and one.defines["N1"] == 12 and one.defines["N2"] == C and "nn_excite(" in one.source
    assert one.args[0] == model.main.inputIndexes[0] and one.args[-1] == model.main.outputIndexes[0]


@pytest.mark.parametrize("kind", ["efficientnet", "scaled"])
def test_a_kernel_folded_into_the_first_layer_is_called_before_the_second(kind):
    model, _ = head(kind)
    steps = _steps(model)
    (one,) = _heads(steps)
    assert not [s for s in steps if isinstance(s, (GemmStep, KernelStep))]
    assert one.defines["N2"] == C and "nn_first(" in one.source and "#define FIRST\n" in one.source
    assert len(one.ops) == (6 if kind == "efficientnet" else 4)   # MEAN, CONV_2D, LOGISTIC, MUL, CONV_2D, LOGISTIC
    if kind == "scaled":   # its scale a buffer of the kernel's, after the first layer's bias
        assert "FIRST_PARAMS , __global const float* restrict first_in0" in one.source and len(one.args) == 7


def test_a_second_layer_whose_k_makes_no_vector_takes_it_in_scalars():
    """K = 10 (EfficientNet's 96 -> 4 -> 96 and 240 -> 10 -> 240 are like it): HV = 1."""
    (one,) = _heads(_steps(head("efficientnet", hidden=10)[0]))
    assert one.defines["N2"] == C and one.defines["HV"] == 1


def test_nothing_folds_where_the_mean_is_read_elsewhere_a_layer_is_large_or_on_a_gpu():
    assert not _heads(_steps(head("mobilenet", mean_is_output=True)[0]))
    large = MOST_WEIGHTS // C + 1
    assert not _heads(_steps(head("efficientnet", hidden=large)[0]))
    assert not _heads(_steps(head("mobilenet")[0], OPENCL))


@pytest.mark.skipif("opencl" not in device_backends(), reason="no OpenCL device here")
@pytest.mark.parametrize("kind", ["mobilenet", "efficientnet", "scaled"])
@pytest.mark.parametrize("infinite", [False, True], ids=["finite", "an-infinity"])
@pytest.mark.parametrize("c", [16, C, 128])   # the mean's rows in 8, 2 and 1 sets (MRV): 49 rows, a tail past 48
def test_the_head_gives_numpys_and_the_unfolded_plans_answer(kind, infinite, c):
    model, want = head(kind, c=c)
    (one,) = _heads(_steps(model))
    assert one.defines["MRV"] == {16: 8, C: 2, 128: 1}[c]
    x = np.random.default_rng(5).standard_normal([1, HW, HW, c]).astype(np.float32)
    _the_same(model, want, x, infinite)


@pytest.mark.skipif("opencl" not in device_backends(), reason="no OpenCL device here")
def test_a_second_layer_in_scalars_gives_numpys_answer():
    """10 hidden values: the first layer's last block of 2 past 8, the second layer's K in scalars."""
    model, want = head("efficientnet", hidden=10)
    _the_same(model, want, np.random.default_rng(6).standard_normal([1, HW, HW, C]).astype(np.float32), False)


def _the_same(model, want, x: np.ndarray, infinite: bool) -> None:
    """The folded plan's answer on OpenCL is the unfolded one's and numpy's."""
    if infinite:
        x[0, 3, 4, 5] = np.inf
    backend = create("opencl")
    folded = np.asarray(device_plan(GraphRunner(model), backend).execute([x])[0])
    unfolded = np.asarray(device_plan(GraphRunner(model), backend, fuse=False).execute([x])[0])
    np.testing.assert_allclose(folded, unfolded, rtol=1e-5, atol=1e-6)
    with np.errstate(invalid="ignore", over="ignore"):
        np.testing.assert_allclose(folded, want(x), rtol=1e-5, atol=1e-6)
