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


def _mean(b: ModelBuilder, x: int, c: int) -> int:
    return b.op(Op.MEAN, [x, b.constant(T.TENSOR_INT32, [1, 2]), b.constant(T.INT32, 1)], T.TENSOR_FLOAT32,
                [1, 1, 1, c])


def _layers(b: ModelBuilder, pooled: int, kind: str, hidden: int, c: int):
    """The head's layers on the pooled pixel [1, 1, 1, c]: their output and numpy function.
    mobilenet: CONV(RELU) -> CONV(+3 in the bias, RELU6) -> MUL(1/6); efficientnet:
    CONV -> swish (LOGISTIC, MUL) -> CONV -> LOGISTIC."""
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
    return out, lambda v: layers(v.astype(np.float64).mean(axis=(1, 2))).reshape(shape)


def head(kind: str, hidden: int = 12, mean_is_output: bool = False, c: int = C):
    """x [1, HW, HW, c] -> MEAN -> the head's layers (_layers): the model and its numpy answer."""
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, [1, HW, HW, c])
    pooled = _mean(b, x, c)
    out, want = _layers(b, pooled, kind, hidden, c)
    b.output(out)
    if mean_is_output:
        b.output(pooled)
    return b.build(), want


def _depthwise(b: ModelBuilder, x: int, hw: int, c: int, swish: bool):
    """x [1, hw, hw, c] -> a 3x3 depthwise convolution (SAME, RELU), then HARD_SWISH where
    `swish` (folded into the depthwise kernel's stores): its output and its numpy function."""
    rng = np.random.default_rng(7)
    w = (rng.standard_normal((1, 3, 3, c)) * 0.3).astype(np.float32)
    bias = rng.standard_normal(c).astype(np.float32)
    ins = [x, b.constant(T.TENSOR_FLOAT32, w), b.constant(T.TENSOR_FLOAT32, bias),
           *(b.constant(T.INT32, v) for v in (1, 1, 1, 1, 0 if swish else 1))]
    y = b.op(Op.DEPTHWISE_CONV_2D, ins, T.TENSOR_FLOAT32, [1, hw, hw, c])
    if swish:
        y = b.op(Op.HARD_SWISH, [y], T.TENSOR_FLOAT32, [1, hw, hw, c])

    def reference(v: np.ndarray) -> np.ndarray:
        p = np.pad(v.astype(np.float64), [(0, 0), (1, 1), (1, 1), (0, 0)])
        s = sum(p[:, ky:ky + hw, kx:kx + hw, :] * w[0, ky, kx] for ky in range(3) for kx in range(3)) + bias
        return s * np.clip(s + 3, 0, 6) / 6 if swish else np.maximum(s, 0)
    return y, reference


def pooled_block(kind: str, swish: bool, hw: int = HW, c: int = C):
    """x -> a depthwise convolution (_depthwise) -> the head's layers on its mean -> the
    convolution's output times the head's gate (a squeeze-and-excite block, as in MobileNet v3
    and EfficientNet): the model and its numpy answer."""
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, [1, hw, hw, c])
    y, conv = _depthwise(b, x, hw, c, swish)
    gate, layers = _layers(b, _mean(b, y, c), kind, 12, c)
    b.output(b.op(Op.MUL, [y, gate, b.constant(T.INT32, 0)], T.TENSOR_FLOAT32, [1, hw, hw, c]))

    def want(v: np.ndarray) -> np.ndarray:
        t = conv(v)
        return t * layers(t)
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


def _in_depthwise(steps) -> list[TemplateStep]:
    return [s for s in steps if isinstance(s, TemplateStep) and "EXCITE_HEAD" in s.defines]


@pytest.mark.parametrize("kind", ["mobilenet", "efficientnet"])
@pytest.mark.parametrize("swish", [False, True], ids=["relu", "hard-swish"])
def test_a_head_that_pools_a_depthwise_kernel_runs_in_its_launch(kind, swish):
    """The depthwise kernel writes its output, the head's gate and its count (a constant 0 of its
    own); its folded HARD_SWISH (nn_then) and the head's folded kernels (nn_first, nn_excite) sit
    side by side in its source; two launches are left, the other the MUL by the gate."""
    model, _ = pooled_block(kind, swish)
    spec = lower_model(GraphRunner(model), CPU_TARGET)
    (dw,) = _in_depthwise(spec.steps)
    alone = _heads(_steps(head(kind)[0]))[0]   # the head's operations, without the depthwise ones
    assert not _heads(spec.steps) and dw.kind == "depthwise" and dw.outputs == 3
    assert len(dw.ops) == 1 + swish + len(alone.ops)   # DEPTHWISE_CONV_2D (+ HARD_SWISH), the head's
    assert ("#define THEN\n" in dw.source) == swish and "#define EXCITE\n" in dw.source
    assert ("#define FIRST\n" in dw.source) == (kind == "efficientnet")
    out, gate, count = dw.args[-3:]
    assert spec.tensors[count].storage == "int" and spec.tensors[count].pinned
    assert spec.constants[count].tolist() == [0]
    (mul,) = [s for s in spec.steps if isinstance(s, (KernelStep, TemplateStep, GemmStep)) and s is not dw]
    assert isinstance(mul, KernelStep) and {out, gate} <= set(mul.args[:-1])


def test_a_head_stays_apart_from_a_depthwise_kernel_on_a_gpu():
    assert not _in_depthwise(_steps(pooled_block("mobilenet", True)[0], OPENCL))


@pytest.mark.skipif("opencl" not in device_backends(), reason="no OpenCL device here")
@pytest.mark.parametrize("kind", ["mobilenet", "efficientnet"])
@pytest.mark.parametrize("swish", [False, True], ids=["relu", "hard-swish"])
@pytest.mark.parametrize("hw, c", [(HW, C), (28, 48), (20, 128)])   # 1, 6 and 10 work-groups of 64
def test_the_last_work_group_to_finish_gives_numpys_answer_every_time(kind, swish, hw, c):
    """On the OpenCL device here, three executions of one prepared plan on different inputs each
    give numpy's answer and the unfolded plan's: the head ran in the last work-group after every
    other group had stored its strips, each time (the count back at 0)."""
    model, want = pooled_block(kind, swish, hw, c)
    spec = lower_model(GraphRunner(model), CPU_TARGET)
    (dw,) = _in_depthwise(spec.steps)
    assert dw.grid.threads[0] // dw.grid.group[0] == {HW: 1, 28: 6, 20: 10}[hw]
    backend = create("opencl")
    folded = device_plan(GraphRunner(model), backend)
    unfolded = device_plan(GraphRunner(model), backend, fuse=False)
    rng = np.random.default_rng(hw + c)
    for _ in range(3):
        x = rng.standard_normal([1, hw, hw, c]).astype(np.float32)
        got = np.asarray(folded.execute([x])[0])
        np.testing.assert_allclose(got, np.asarray(unfolded.execute([x])[0]), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got, want(x), rtol=1e-4, atol=1e-5)
