"""The numpy plan's bound window kernels (`bind` of the convolutions, pooling, RESIZE_BILINEAR,
PAD and the reductions): they compute into the plan's output buffers with exactly the reference's bits; other
cases stay on the reference."""
from __future__ import annotations

import numpy as np
import pytest

from nngpu.runtime.interpreter import GraphRunner
from nngpu.compiler.numpy_bind import numpy_plan
from nngpu.hal.types import FusedActivationFunc as Act
from nngpu.hal.types import OperationType as Op
from nngpu.ops.lib import conv_kernels

from tests.compiler.model_builder import T, ModelBuilder

F32, I32 = T.TENSOR_FLOAT32, T.INT32
rng = np.random.default_rng(21)


def _single(op: Op, x_type: int, x_shape, out_shape, scalars, scale: float = 0.0, zero_point: int = 0):
    """One operation on one input tensor and constant `scalars` ((type, value) pairs)."""
    b = ModelBuilder()
    x = b.input(x_type, x_shape, scale, zero_point)
    b.output(b.op(op, [x] + [b.constant(t, v) for t, v in scalars], x_type, out_shape, scale, zero_point))
    if x_type == F32:
        return b.build(), [rng.standard_normal(x_shape).astype(np.float32)]
    return b.build(), [rng.integers(0, 256, x_shape).astype(np.uint8)]


def _model(op: Op, x_shape, f_shape, out_shape, scalars, f_const: bool = True):
    b = ModelBuilder()
    x = b.input(F32, x_shape)
    cout = f_shape[3] if op == Op.DEPTHWISE_CONV_2D else f_shape[0]
    fv = rng.standard_normal(f_shape).astype(np.float32)
    f = b.constant(F32, fv) if f_const else b.input(F32, f_shape)
    bias = b.constant(F32, rng.standard_normal(cout).astype(np.float32))
    ins = [x, f, bias] + [b.constant(t, v) for t, v in scalars]
    b.output(b.op(op, ins, F32, out_shape))
    inputs = [rng.standard_normal(x_shape).astype(np.float32)] + ([] if f_const else [fv])
    return b.build(), inputs


def _explicit(pads, strides, act, *extra):
    """(left, right, top, bottom), (w, h) as scalar operands, then `extra` INT32 scalars."""
    return [(I32, v) for v in (*pads, *strides, *extra, act)]


CASES = {
    "conv-1x1": (Op.CONV_2D, (1, 5, 6, 8), (4, 1, 1, 8), (1, 5, 6, 4), _explicit((0, 0, 0, 0), (1, 1), Act.RELU)),
    "conv-3x3-s2-pads": (Op.CONV_2D, (2, 7, 9, 3), (5, 3, 3, 3), (2, 4, 4, 5),
                         _explicit((1, 0, 1, 1), (2, 2), Act.RELU6)),
    "grouped-conv": (Op.GROUPED_CONV_2D, (1, 5, 6, 6), (4, 3, 3, 3), (1, 5, 6, 4),
                     _explicit((1, 1, 1, 1), (1, 1), Act.NONE, 2) + [(T.BOOL, False)]),
    "depthwise-rows-s1": (Op.DEPTHWISE_CONV_2D, (1, 6, 7, 4), (1, 3, 3, 8), (1, 6, 7, 8),
                          _explicit((1, 1, 1, 1), (1, 1), Act.NONE, 2)),
    "depthwise-phases-s2": (Op.DEPTHWISE_CONV_2D, (1, 9, 9, 5), (1, 3, 3, 5), (1, 4, 4, 5),
                            _explicit((0, 0, 0, 0), (2, 2), Act.RELU, 1)),
    "depthwise-window-s2": (Op.DEPTHWISE_CONV_2D, (1, 9, 9, 70), (1, 3, 3, 70), (1, 5, 5, 70),
                            _explicit((1, 1, 1, 1), (2, 2), Act.RELU1, 1)),
    "depthwise-dilated": (Op.DEPTHWISE_CONV_2D, (1, 7, 8, 3), (1, 3, 3, 6), (1, 7, 6, 6),
                          _explicit((1, 1, 2, 2), (1, 1), Act.NONE, 2) + [(T.BOOL, False), (I32, 2), (I32, 2)]),
    "conv-dilated": (Op.CONV_2D, (1, 7, 8, 3), (4, 3, 3, 3), (1, 4, 2, 4),
                     _explicit((0, 0, 1, 0), (2, 1), Act.RELU) + [(T.BOOL, False), (I32, 2), (I32, 2)]),
}


POOL = _explicit((1, 0, 1, 1), (2, 2), Act.RELU, 3, 3)        # pads, strides, filter 3x3, RELU
SINGLE = {
    "average-pool": (Op.AVERAGE_POOL_2D, F32, (1, 7, 8, 3), (1, 4, 4, 3), POOL),
    "max-pool": (Op.MAX_POOL_2D, F32, (2, 7, 8, 3), (2, 4, 4, 3), POOL),
    "global-average-pool": (Op.AVERAGE_POOL_2D, F32, (1, 5, 6, 4), (1, 1, 1, 4),
                            _explicit((0, 0, 0, 0), (1, 1), Act.NONE, 6, 5)),
    "resize-bilinear-half-pixel": (Op.RESIZE_BILINEAR, F32, (1, 4, 5, 3), (1, 8, 9, 3),
                                   [(I32, 9), (I32, 8), (T.BOOL, False), (T.BOOL, False), (T.BOOL, True)]),
    "resize-bilinear-align": (Op.RESIZE_BILINEAR, F32, (1, 4, 5, 3), (1, 7, 3, 3),
                              [(I32, 3), (I32, 7), (T.BOOL, False), (T.BOOL, True), (T.BOOL, False)]),
    "pad": (Op.PAD, F32, (1, 3, 4, 2), (1, 5, 5, 5), [(T.TENSOR_INT32, [[0, 0], [1, 1], [0, 1], [1, 2]])]),
    "pad-quant8-zero-point": (Op.PAD, T.TENSOR_QUANT8_ASYMM, (1, 3, 4, 2), (2, 3, 6, 2),
                              [(T.TENSOR_INT32, [[1, 0], [0, 0], [2, 0], [0, 0]])], 0.5, 7),
    "mean-spatial": (Op.MEAN, F32, (2, 5, 6, 4), (2, 1, 1, 4), [(T.TENSOR_INT32, [1, -2]), (I32, 1)]),
    "mean-quant8": (Op.MEAN, T.TENSOR_QUANT8_ASYMM, (2, 5, 6, 4), (2, 4), [(T.TENSOR_INT32, [2, 1, 2]), (I32, 0)],
                    0.5, 7),
    "reduce-max": (Op.REDUCE_MAX, F32, (3, 4, 5), (3, 1, 5), [(T.TENSOR_INT32, [1]), (T.BOOL, True)]),
}


def _check_bound(model, inputs) -> None:
    plan = numpy_plan(GraphRunner(model))
    (bound,) = plan.bounds()
    assert bound.steps[0].kernel is not None, "the operation should be bound"
    want = GraphRunner(model).run(inputs)
    for _ in range(2):  # the second execution reuses the first one's output buffer
        got = plan.run(inputs)
        assert got[0].dtype == want[0].dtype and got[0].tobytes() == want[0].tobytes()


@pytest.mark.parametrize("name", CASES)
def test_bound_convolution_gives_the_reference_bits(name):
    _check_bound(*_model(*CASES[name]))


@pytest.mark.parametrize("name", SINGLE)
def test_bound_pool_resize_pad_give_the_reference_bits(name):
    _check_bound(*_single(*SINGLE[name]))


def _quant_model(op: Op, x_shape, f_shape, out_shape, scalars, kind: str):
    """The CASES model quantized: uint8 ("asymm"), int8 ("signed") or int8 with a per-channel
    filter ("per-channel"), with zero points, so that padding and removal are exercised."""
    rq = np.random.default_rng([22, len(kind), *x_shape])
    t = T.TENSOR_QUANT8_ASYMM if kind == "asymm" else T.TENSOR_QUANT8_ASYMM_SIGNED
    lo, dtype = (0, np.uint8) if kind == "asymm" else (-128, np.int8)
    b = ModelBuilder()
    x = b.input(t, x_shape, 0.05, lo + 100)
    cout, dim = (f_shape[3], 3) if op == Op.DEPTHWISE_CONV_2D else (f_shape[0], 0)
    if kind == "per-channel":
        scales = list(rq.uniform(0.002, 0.02, cout))
        f = b.constant(T.TENSOR_QUANT8_SYMM_PER_CHANNEL, rq.integers(-127, 128, f_shape).astype(np.int8),
                       channel_quant=(scales, dim))
        bias = b.constant(T.TENSOR_INT32, rq.integers(-3000, 3000, cout).astype(np.int32))
    else:
        f = b.constant(t, rq.integers(lo, lo + 256, f_shape).astype(dtype), 0.01, lo + 120)
        bias = b.constant(T.TENSOR_INT32, rq.integers(-3000, 3000, cout).astype(np.int32), 0.05 * 0.01)
    ins = [x, f, bias] + [b.constant(tt, v) for tt, v in scalars]
    b.output(b.op(op, ins, t, out_shape, 0.3, lo + 128 + 3))
    return b.build(), [rq.integers(lo, lo + 256, x_shape).astype(dtype)]


@pytest.mark.parametrize("kind", ["asymm", "signed", "per-channel"])
@pytest.mark.parametrize("name", CASES)
def test_bound_quantized_convolution_gives_the_reference_bits(name, kind, cpu_loops):
    _check_bound(*_quant_model(*CASES[name], kind))


@pytest.mark.parametrize("t", [T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED])
def test_bound_quantized_fully_connected_gives_the_reference_bits(t, cpu_loops):
    rq = np.random.default_rng([23, int(t)])
    lo, dtype = (0, np.uint8) if t == T.TENSOR_QUANT8_ASYMM else (-128, np.int8)
    b = ModelBuilder()
    x = b.input(t, (3, 2, 10), 0.04, lo + 90)
    w = b.constant(t, rq.integers(lo, lo + 256, (7, 20)).astype(dtype), 0.02, lo + 130)
    bias = b.constant(T.TENSOR_INT32, rq.integers(-2000, 2000, 7).astype(np.int32), 0.04 * 0.02)
    b.output(b.op(Op.FULLY_CONNECTED, [x, w, bias, b.constant(I32, Act.RELU6)], t, (3, 7), 0.1, lo + 5))
    _check_bound(b.build(), [rq.integers(lo, lo + 256, (3, 2, 10)).astype(dtype)])


def test_filter_given_at_execution_runs_the_reference():
    op, x_shape, f_shape, out_shape, scalars = CASES["conv-1x1"]
    model, inputs = _model(op, x_shape, f_shape, out_shape, scalars, f_const=False)
    plan = numpy_plan(GraphRunner(model))
    (bound,) = plan.bounds()
    assert bound.steps[0].kernel is None
    np.testing.assert_array_equal(plan.run(inputs)[0], GraphRunner(model).run(inputs)[0])


_Q8_TYPES = {T.TENSOR_QUANT8_ASYMM: (0, np.uint8), T.TENSOR_QUANT8_ASYMM_SIGNED: (-128, np.int8)}


@pytest.mark.parametrize("t", list(_Q8_TYPES))
@pytest.mark.parametrize("op", [Op.LOGISTIC, Op.TANH, Op.HARD_SWISH])
def test_bound_quantized_activation_table_gives_the_reference_bits(op, t):
    """The 256-entry table, indexed by the stored byte (int8 too), over every input value."""
    lo, dtype = _Q8_TYPES[t]
    out_scale, out_zp = {Op.LOGISTIC: (1 / 256, lo), Op.TANH: (1 / 128, lo + 128), Op.HARD_SWISH: (0.03, lo + 40)}[op]
    b = ModelBuilder()
    x = b.input(t, (4, 64), 0.05, lo + 110)
    b.output(b.op(op, [x], t, (4, 64), out_scale, out_zp))
    _check_bound(b.build(), [np.arange(lo, lo + 256).reshape(4, 64).astype(dtype)])


@pytest.mark.parametrize("t", list(_Q8_TYPES))
@pytest.mark.parametrize("op", [Op.ADD, Op.SUB, Op.MUL])
def test_bound_quantized_binary_pair_table_gives_the_reference_bits(op, t):
    """The 65,536-entry pair table, with broadcasting either way, over every input pair."""
    lo, dtype = _Q8_TYPES[t]
    every = np.arange(lo, lo + 256).astype(dtype)
    for a_shape, b_shape, a, bv in [((256, 1), (1, 256), every.reshape(256, 1), every.reshape(1, 256)),
                                    ((1, 256), (256, 256), every.reshape(1, 256), np.tile(every, (256, 1)).T)]:
        b = ModelBuilder()
        x1, x2 = b.input(t, a_shape, 0.07, lo + 100), b.input(t, b_shape, 0.02, lo + 30)
        b.output(b.op(op, [x1, x2, b.constant(I32, Act.RELU)], t, (256, 256), 0.2, lo + 60))
        _check_bound(b.build(), [a, bv])


def test_quantized_convolution_computes_in_float32_only_while_sums_are_exact(monkeypatch, cpu_loops):
    """A filter whose sums can pass 2^24 runs the GEMM in float64, and still exactly."""
    from nngpu.ops import conv
    chosen = []

    def recorded(*args):
        layer = conv_kernels.bound_quant_layer(*args)
        chosen.append(layer[0].dtype)
        return layer

    monkeypatch.setattr(conv, "bound_quant_layer", recorded)
    for taps, want in [(3, np.float32), (300, np.float64)]:
        b = ModelBuilder()
        x = b.input(T.TENSOR_QUANT8_ASYMM, (1, 4, 4, taps), 0.05, 0)
        f = b.constant(T.TENSOR_QUANT8_ASYMM, np.full((2, 3, 3, taps), 255, np.uint8), 0.01, 0)
        bias = b.constant(T.TENSOR_INT32, np.array([5, -7], np.int32), 0.05 * 0.01)
        pads = _explicit((1, 1, 1, 1), (1, 1), Act.NONE)
        b.output(b.op(Op.CONV_2D, [x, f, bias] + [b.constant(tt, v) for tt, v in pads],
                      T.TENSOR_QUANT8_ASYMM, (1, 4, 4, 2), 2000.0, 3))
        _check_bound(b.build(), [np.full((1, 4, 4, taps), 255, np.uint8)])
        assert chosen[-1] == want


def test_quantized_depthwise_with_a_bias_past_the_proven_range_still_gives_the_reference_bits(cpu_loops):
    """A bias near 2^29: no bound is proven at prepare, so each call checks its accumulators
    (the compiled depthwise then writes accumulators first) and takes the int64 path."""
    rq = np.random.default_rng(24)
    t = T.TENSOR_QUANT8_ASYMM_SIGNED
    b = ModelBuilder()
    x = b.input(t, (1, 6, 5, 4), 0.05, 3)
    f = b.constant(T.TENSOR_QUANT8_SYMM_PER_CHANNEL, rq.integers(-127, 128, (1, 3, 3, 4)).astype(np.int8),
                   channel_quant=(list(rq.uniform(0.002, 0.02, 4)), 3))
    bias = b.constant(T.TENSOR_INT32, np.array([1 << 29, -(1 << 29), 5, 1 << 28], np.int32))
    pads = _explicit((1, 1, 1, 1), (1, 1), Act.NONE, 1)
    b.output(b.op(Op.DEPTHWISE_CONV_2D, [x, f, bias] + [b.constant(tt, v) for tt, v in pads], t, (1, 6, 5, 4),
                  2e5, -7))
    _check_bound(b.build(), [rq.integers(-128, 128, (1, 6, 5, 4)).astype(np.int8)])
