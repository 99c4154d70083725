"""The numpy plan's table fusion: MUL(x, LOGISTIC(x)) (a quantized swish), chains of tables and
DEQUANTIZE compose into one lookup in x, with the reference's bits; a table still read elsewhere
stays, and a pair of two tensors (broadcast here) is left alone; a lookup that alone reads a
quantized convolution's output runs inside the convolution."""
from __future__ import annotations

import numpy as np
import pytest

from nngpu.compiler.numpy_bind import numpy_plan
from nngpu.hal.types import FusedActivationFunc as Act
from nngpu.hal.types import OperationType as Op
from nngpu.runtime.interpreter import GraphRunner

from tests.compiler.model_builder import T, ModelBuilder

_TYPES = {T.TENSOR_QUANT8_ASYMM: (0, np.uint8), T.TENSOR_QUANT8_ASYMM_SIGNED: (-128, np.int8)}


def _swish(t: int, shape=(2, 128), logistic_is_output: bool = False, tail: bool = True):
    lo, dtype = _TYPES[t]
    b = ModelBuilder()
    x = b.input(t, shape, 0.06, lo + 120)
    y = b.op(Op.LOGISTIC, [x], t, shape, 1 / 256, lo)
    z = b.op(Op.MUL, [x, y, b.constant(T.INT32, Act.NONE)], t, shape, 0.05, lo + 110)
    if tail:                                          # a further table on the product, then floats
        z = b.op(Op.DEQUANTIZE, [b.op(Op.TANH, [z], t, shape, 1 / 128, lo + 128)], T.TENSOR_FLOAT32, shape)
    b.output(z)
    if logistic_is_output:
        b.output(y)
    every = np.arange(lo, lo + 256).astype(dtype).reshape(2, 128)
    return b.build(), [every]


def _run(model, inputs):
    plan = numpy_plan(GraphRunner(model))
    got = plan.run(inputs)
    want = GraphRunner(model).run(inputs)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.tobytes() == w.tobytes()
    (bound,) = plan.bounds()
    return [model.main.operations[s.k].type for s in bound.steps]


@pytest.mark.parametrize("t", list(_TYPES))
def test_swish_and_its_tail_become_one_lookup(t):
    assert _run(*_swish(t)) == [Op.DEQUANTIZE]


def test_a_table_read_elsewhere_stays():
    ops = _run(*_swish(T.TENSOR_QUANT8_ASYMM, logistic_is_output=True, tail=False))
    assert ops == [Op.LOGISTIC, Op.MUL]


def test_a_pair_of_two_tensors_is_not_fused():
    b = ModelBuilder()
    t = T.TENSOR_QUANT8_ASYMM
    x = b.input(t, (1, 128), 0.06, 120)
    y = b.op(Op.LOGISTIC, [x], t, (1, 128), 1 / 256, 0)
    b.output(b.op(Op.MUL, [b.input(t, (3, 128), 0.06, 120), y, b.constant(T.INT32, Act.RELU)], t, (3, 128), 0.05, 7))
    inputs = [np.arange(128, dtype=np.uint8).reshape(1, 128), np.arange(384).astype(np.uint8).reshape(3, 128)]
    assert _run(b.build(), inputs) == [Op.LOGISTIC, Op.MUL]


@pytest.mark.parametrize("t", list(_TYPES))
def test_dequantize_then_quantize_becomes_one_lookup(t):
    """A uint8 input requantized to int8 through float (as the TFLite importer maps it), over
    every byte; QUANTIZE's float function applied to DEQUANTIZE's table."""
    lo, dtype = _TYPES[t]
    b = ModelBuilder()
    x = b.input(t, (2, 128), 0.07, lo + 99)
    f = b.op(Op.DEQUANTIZE, [x], T.TENSOR_FLOAT32, (2, 128))
    b.output(b.op(Op.QUANTIZE, [f], T.TENSOR_QUANT8_ASYMM_SIGNED, (2, 128), 0.05, -3))
    assert _run(b.build(), [np.arange(lo, lo + 256).astype(dtype).reshape(2, 128)]) == [Op.QUANTIZE]


def test_a_bound_quantize_of_floats_gives_the_reference_bits():
    """QUANTIZE's bound kernel on floats of every kind: ties, saturation, infinities and NaN."""
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, (64,))
    b.output(b.op(Op.QUANTIZE, [x], T.TENSOR_QUANT8_ASYMM, (64,), 0.5, 100))
    values = np.concatenate([np.arange(-30, 30) * 0.25, [np.nan, np.inf, -np.inf, 3e38]]).astype(np.float32)
    assert _run(b.build(), [values]) == [Op.QUANTIZE]


def _conv_then_swish(kind: str, conv_is_output: bool = False, tail: str = "swish"):
    """A quantized convolution (or depthwise) whose output feeds a swish, MUL(c, LOGISTIC(c)),
    or with tail="dequantize16" a DEQUANTIZE to float16."""
    rq = np.random.default_rng([25, len(kind), conv_is_output])
    t = T.TENSOR_QUANT8_ASYMM_SIGNED
    b = ModelBuilder()
    x = b.input(t, (1, 6, 7, 4), 0.05, 3)
    op, f_shape, dim = (Op.CONV_2D, (5, 3, 3, 4), 0) if kind == "conv" else (Op.DEPTHWISE_CONV_2D, (1, 3, 3, 4), 3)
    cout = f_shape[dim]
    f = b.constant(T.TENSOR_QUANT8_SYMM_PER_CHANNEL, rq.integers(-127, 128, f_shape).astype(np.int8),
                   channel_quant=(list(rq.uniform(0.002, 0.02, cout)), dim))
    bias = b.constant(T.TENSOR_INT32, rq.integers(-3000, 3000, cout).astype(np.int32))
    extra = [1] if kind == "depthwise" else []
    scalars = [b.constant(T.INT32, v) for v in (1, 1, 1, 1, 1, 1, *extra, Act.NONE)]
    c = b.op(op, [x, f, bias, *scalars], t, (1, 6, 7, cout), 0.1, -5)
    if tail == "dequantize16":
        b.output(b.op(Op.DEQUANTIZE, [c], T.TENSOR_FLOAT16, (1, 6, 7, cout)))
    else:
        y = b.op(Op.LOGISTIC, [c], t, (1, 6, 7, cout), 1 / 256, -128)
        b.output(b.op(Op.MUL, [c, y, b.constant(T.INT32, Act.NONE)], t, (1, 6, 7, cout), 0.05, -20))
    if conv_is_output:
        b.output(c)
    return b.build(), [rq.integers(-128, 128, (1, 6, 7, 4)).astype(np.int8)]


@pytest.mark.parametrize("kind", ["conv", "depthwise"])
def test_a_lookup_after_a_quantized_convolution_runs_inside_it(kind, cpu_loops):
    assert _run(*_conv_then_swish(kind)) == [Op.CONV_2D if kind == "conv" else Op.DEPTHWISE_CONV_2D]


def test_a_convolution_output_read_elsewhere_keeps_its_lookup(cpu_loops):
    assert _run(*_conv_then_swish("conv", conv_is_output=True)) == [Op.CONV_2D, Op.MUL]



@pytest.mark.parametrize("kind", ["conv", "depthwise"])
def test_a_float16_dequantize_runs_inside_a_quantized_convolution(kind, cpu_loops):
    """A DEQUANTIZE to float16 that alone reads the convolution's output: a table of float16
    entries, written by the convolution as 16-bit words."""
    assert _run(*_conv_then_swish(kind, tail="dequantize16")) == [
        Op.CONV_2D if kind == "conv" else Op.DEPTHWISE_CONV_2D]


def test_a_fused_convolution_that_fails_to_warm_keeps_its_lookup_apart(monkeypatch):
    """The fused kernel runs once at prepare; one that raises there is not fused."""
    from nngpu.ops.lib.conv_kernels import QuantConvKernel
    warm = QuantConvKernel.warm

    def failing(self):
        if self.table is not None:
            raise TypeError("no loop for these types")
        warm(self)

    monkeypatch.setattr(QuantConvKernel, "warm", failing)
    assert _run(*_conv_then_swish("conv")) == [Op.CONV_2D, Op.MUL]
