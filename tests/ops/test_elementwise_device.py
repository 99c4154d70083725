"""Device kernels of the elementwise families (arithmetic, unary math, activations, comparisons,
QUANTIZE / DEQUANTIZE, CAST) match the numpy reference: float within the corpus tolerances,
int32 and quantized results exactly (their fusion into chains: tests/compiler/test_fusion.py)."""
from __future__ import annotations

import numpy as np
import pytest

from nngpu.hal import OperandType as T
from nngpu.hal import OperationType as Op
from nngpu.testing import tensor

from .device_check import F16, F32, Q8, S8, check_on_device, data, fscalar, i32

rng = np.random.default_rng(5)
I32, B8, PC = T.TENSOR_INT32, T.TENSOR_BOOL8, T.TENSOR_QUANT8_SYMM_PER_CHANNEL
ZP = {Q8: 128, S8: 0}
INT32_EDGES = np.array([-(1 << 31), -(1 << 31) + 1, -7, -1, 0, 1, 7, (1 << 31) - 1], dtype=np.int32)


def fdtype(t) -> type:
    return np.float16 if t == F16 else np.float32


def q(shape, t, scale=0.5, zp=None, const=False, value=None):
    v = data(shape, t) if value is None else value
    return tensor(t, v, scale=scale, zero_point=ZP[t] - 3 if zp is None else zp, const=const)


def every_value(t, shape=(256,)):
    """All 256 stored values of t (as a column, row, ... by `shape`)."""
    lo = 0 if t == Q8 else -128
    return np.arange(lo, lo + 256).astype(np.uint8 if t == Q8 else np.int8).reshape(shape)


def ints(shape, lo=-1000, hi=1000) -> np.ndarray:
    return rng.integers(lo, hi, shape).astype(np.int32)


# ---- float arithmetic, unary math and activations, float32 and float16 ----------------------
@pytest.mark.parametrize("t", [F32, F16])
@pytest.mark.parametrize("op", [Op.ADD, Op.SUB, Op.MUL, Op.DIV])
@pytest.mark.parametrize("act", [0, 1, 2, 3])
def test_float_binary_broadcast_with_activation(t, op, act):
    b = data((3, 1), t) + fdtype(t)(2 if op == Op.DIV else 0)
    check_on_device(op, [tensor(t, data((2, 3, 4), t)), tensor(t, b), i32(act)], t, 3)


@pytest.mark.parametrize("t", [F32, F16])
def test_pow(t):
    base = np.abs(data((2, 5), t)) + fdtype(t)(0.1)
    check_on_device(Op.POW, [tensor(t, base), tensor(t, data((5,), t))], t, 2)


POSITIVE = {Op.LOG, Op.SQRT, Op.RSQRT}


@pytest.mark.parametrize("t", [F32, F16])
@pytest.mark.parametrize("op", [Op.ABS, Op.EXP, Op.LOG, Op.NEG, Op.SQRT, Op.RSQRT, Op.SIN, Op.FLOOR, Op.RELU,
                                Op.RELU1, Op.RELU6, Op.LOGISTIC, Op.TANH, Op.HARD_SWISH])
def test_float_unary(t, op):
    x = data((3, 7), t, 3.0)
    if op in POSITIVE:
        x = np.abs(x) + fdtype(t)(0.01)
    check_on_device(op, [tensor(t, x)], t, 2)


@pytest.mark.parametrize("t", [F32, F16])
def test_elu_and_prelu(t):
    check_on_device(Op.ELU, [tensor(t, data((4, 5), t, 2.0)), fscalar(t, 0.7)], t, 2)
    check_on_device(Op.PRELU, [tensor(t, data((2, 4, 5), t)), tensor(t, data((5,), t), const=True)], t, 3)


@pytest.mark.parametrize("t", [F32, F16])
@pytest.mark.parametrize("op", [Op.MAXIMUM, Op.MINIMUM])
def test_float_maximum_minimum(t, op):
    a, b = data((2, 1, 3), t), data((4, 3), t)
    a[0, 0, 1], b[2, 2] = np.nan, np.nan   # propagates, as numpy's
    out = check_on_device(op, [tensor(t, a), tensor(t, b)], t, 3)
    assert np.isnan(out[0, :, 1]).all() and np.isnan(out[:, 2, 2]).all() and not np.isnan(out[1, 0, 0])


# ---- int32 arithmetic: wrap-around, floor division, x / 0 = 0 --------------------------------
@pytest.mark.parametrize("op", [Op.ADD, Op.SUB, Op.MUL, Op.DIV])
def test_int32_binary_every_edge_pair(op):
    a = tensor(I32, INT32_EDGES.reshape(8, 1))
    b = tensor(I32, INT32_EDGES.reshape(1, 8))
    check_on_device(op, [a, b, i32(0)], I32, 2)
    check_on_device(op, [tensor(I32, ints((3, 4))), tensor(I32, ints((4,), -9, 9)), i32(0)], I32, 2)


@pytest.mark.parametrize("op", [Op.ABS, Op.NEG])
def test_int32_abs_neg_wrap_at_int32_min(op):
    check_on_device(op, [tensor(I32, INT32_EDGES)], I32, 1)


@pytest.mark.parametrize("op", [Op.MAXIMUM, Op.MINIMUM])
def test_int32_maximum_minimum(op):
    check_on_device(op, [tensor(I32, INT32_EDGES.reshape(8, 1)), tensor(I32, INT32_EDGES)], I32, 2)


# ---- comparisons, logical ops, SELECT ----------------------------------------------------------
COMPARISONS = [Op.EQUAL, Op.NOT_EQUAL, Op.GREATER, Op.GREATER_EQUAL, Op.LESS, Op.LESS_EQUAL]


@pytest.mark.parametrize("op", COMPARISONS)
def test_comparisons_float_int32_bool(op):
    f = np.array([-1.5, 0.0, 2.0, 2.0], np.float32)
    for t, a, b in ((F32, f.reshape(4, 1), f), (F16, f.astype(np.float16), f[::-1].astype(np.float16)),
                    (I32, INT32_EDGES.reshape(8, 1), INT32_EDGES), (B8, np.array([[True], [False]]), np.array([True, False]))):
        check_on_device(op, [tensor(t, a), tensor(t, b)], B8, max(a.ndim, b.ndim))


@pytest.mark.parametrize("t", [Q8, S8])
@pytest.mark.parametrize("op", COMPARISONS)
def test_quant_comparisons_every_pair(t, op):
    a = q((256, 1), t, 0.5, value=every_value(t, (256, 1)))
    b = q((1, 256), t, 0.25, zp=ZP[t] + 7, value=every_value(t, (1, 256)))   # many equal real values
    check_on_device(op, [a, b], B8, 2)


def test_logical_ops():
    a = tensor(B8, rng.random((2, 1, 3)) < 0.5)
    b = tensor(B8, rng.random((4, 3)) < 0.5)
    check_on_device(Op.LOGICAL_AND, [a, b], B8, 3)
    check_on_device(Op.LOGICAL_OR, [a, b], B8, 3)
    check_on_device(Op.LOGICAL_NOT, [a], B8, 3)


@pytest.mark.parametrize("t", [F32, F16, I32])
def test_select(t):
    cond = tensor(B8, rng.random((4, 5)) < 0.5)
    a, b = (tensor(t, ints((4, 5)) if t == I32 else data((4, 5), t)) for _ in range(2))
    check_on_device(Op.SELECT, [cond, a, b], t, 2)


# ---- quantized ADD / SUB / MUL: every pair of stored values --------------------------------
@pytest.mark.parametrize("t", [Q8, S8])
@pytest.mark.parametrize("op", [Op.ADD, Op.SUB, Op.MUL])
@pytest.mark.parametrize("scales, act", [((0.5, 0.25, 1.0), 0), ((0.1, 0.7, 0.05), 1), ((1.3, 0.02, 0.9), 3),
                                         ((0.01, 0.01, 0.0003), 2), ((2.0, 2.0, 5.0), 0), ((0.5, 0.5, 1e-7), 0)])
def test_quant_binary_every_pair(t, op, scales, act):
    s1, s2, so = scales
    if op == Op.MUL and not s1 * s2 < so:
        so = s1 * s2 * 1.7
    a = q((256, 1), t, s1, value=every_value(t, (256, 1)))
    b = q((1, 256), t, s2, zp=ZP[t] + 5, value=every_value(t, (1, 256)))
    check_on_device(op, [a, b, i32(act)], t, 2, scale=so, zero_point=ZP[t] - 1)


@pytest.mark.parametrize("t", [Q8, S8])
def test_quant_binary_broadcast_and_constant_operand(t):
    check_on_device(Op.ADD, [q((2, 3, 4), t, 0.3), q((4,), t, 0.2, const=True), i32(0)], t, 3, scale=0.4,
                    zero_point=7)
    check_on_device(Op.MUL, [q((3, 1), t, 0.3), q((2, 1, 5), t, 0.2), i32(1)], t, 3, scale=0.1, zero_point=2)


@pytest.mark.parametrize("scales", [(0.5, 0.25, 0.5), (0.1, 0.02, 0.3)])
def test_quant_prelu_every_pair(scales):
    s, sa, so = scales
    x = q((256, 1), Q8, s, value=every_value(Q8, (256, 1)))
    alpha = q((1, 256), Q8, sa, zp=50, value=every_value(Q8, (1, 256)))
    check_on_device(Op.PRELU, [x, alpha], Q8, 2, scale=so, zero_point=120)


# ---- quantized ops of one input: clamps and tables of the reference ----------------------------
@pytest.mark.parametrize("t", [Q8, S8])
@pytest.mark.parametrize("op", [Op.RELU, Op.RELU1, Op.RELU6])
def test_quant_relu_family(t, op):
    check_on_device(op, [q((256,), t, 0.05, value=every_value(t))], t, 1, scale=0.05, zero_point=ZP[t] - 3)


@pytest.mark.parametrize("t", [Q8, S8])
@pytest.mark.parametrize("op, out", [(Op.LOGISTIC, (1 / 256, {Q8: 0, S8: -128})),
                                     (Op.TANH, (1 / 128, {Q8: 128, S8: 0}))])
def test_quant_logistic_tanh(t, op, out):
    scale, zps = out
    check_on_device(op, [q((4, 64), t, 0.07, value=every_value(t, (4, 64)))], t, 2, scale=scale, zero_point=zps[t])


@pytest.mark.parametrize("t", [Q8, S8])
def test_quant_hard_swish(t):
    check_on_device(Op.HARD_SWISH, [q((256,), t, 0.04, value=every_value(t))], t, 1, scale=0.03,
                    zero_point=ZP[t] - 20)


@pytest.mark.parametrize("t", [Q8, S8])
@pytest.mark.parametrize("op", [Op.MAXIMUM, Op.MINIMUM])
def test_quant_maximum_minimum(t, op):
    a = q((256, 1), t, 0.3, value=every_value(t, (256, 1)))
    b = q((1, 256), t, 0.07, zp=ZP[t] + 40, value=every_value(t, (1, 256)))
    check_on_device(op, [a, b], t, 2, scale=0.2, zero_point=ZP[t] - 5)


@pytest.mark.parametrize("t", [Q8, S8])
def test_quant_select(t):
    cond = tensor(B8, rng.integers(0, 2, (4, 5)).astype(bool))
    check_on_device(Op.SELECT, [cond, q((4, 5), t, 0.3), q((4, 5), t, 0.1, zp=ZP[t] + 1)], t, 2, scale=0.2,
                    zero_point=ZP[t])


# ---- QUANTIZE / DEQUANTIZE ------------------------------------------------------------------------
@pytest.mark.parametrize("t", [Q8, S8])
@pytest.mark.parametrize("src", [F32, F16])
def test_quantize(t, src):
    scale = 0.1
    halves = (np.arange(-300, 300) + 0.5) * np.float32(scale)           # ties: away from zero
    near = np.nextafter(halves.astype(np.float32), np.float32(np.inf))
    x = np.concatenate([halves, near, rng.standard_normal(400) * 20, [0.0, -0.0, 1e30, -1e30, np.inf, -np.inf, np.nan]])
    with np.errstate(over="ignore"):
        x = x.astype(np.float16 if src == F16 else np.float32)
    check_on_device(Op.QUANTIZE, [tensor(src, x)], t, 1, scale=scale, zero_point=ZP[t] - 7)


@pytest.mark.parametrize("t", [Q8, S8, T.TENSOR_QUANT8_SYMM])
@pytest.mark.parametrize("out", [F32, F16])
def test_dequantize(t, out):
    stored = every_value(S8 if t == T.TENSOR_QUANT8_SYMM else t, (2, 128))
    check_on_device(Op.DEQUANTIZE, [tensor(t, stored, 0.37, 0 if t == T.TENSOR_QUANT8_SYMM else ZP[t] - 3)], out, 2)


@pytest.mark.parametrize("out", [F32, F16])
@pytest.mark.parametrize("channel_dim", [0, 2])
def test_dequantize_per_channel(out, channel_dim):
    shape = (3, 2, 4)
    scales = list(rng.uniform(0.01, 0.5, shape[channel_dim]))
    x = tensor(PC, rng.integers(-128, 128, shape).astype(np.int8), channel_quant=(scales, channel_dim))
    check_on_device(Op.DEQUANTIZE, [x], out, 3)


# ---- CAST: every type pair, saturating and truncating -------------------------------------------
FLOAT_EDGES = [np.nan, np.inf, -np.inf, -3e9, 3e9, 2147483520.0, -2147483648.0, -300.7, -1.5, -0.5, 0.0, 0.7, 2.5,
               254.9, 255.5, 70000.0, 65519.0]


def cast_input(t) -> np.ndarray:
    if t in (F32, F16):
        with np.errstate(over="ignore"):
            return np.array(FLOAT_EDGES, dtype=fdtype(t))
    if t == I32:
        return np.concatenate([INT32_EDGES, [-300, 255, 256, 65504, 65520, 1 << 24, (1 << 24) + 1]]).astype(np.int32)
    return every_value(Q8)


@pytest.mark.parametrize("src", [F16, F32, I32, Q8])
@pytest.mark.parametrize("dst", [F16, F32, I32, Q8])
def test_cast(src, dst):
    x = tensor(src, cast_input(src), 1.0 if src == Q8 else 0.0, 3 if src == Q8 else 0)
    check_on_device(Op.CAST, [x], dst, 1, scale=1.0 if dst == Q8 else 0.0)


@pytest.mark.parametrize("t, value", [(B8, [True, False]), (T.TENSOR_QUANT16_ASYMM, [0, 65535]),
                                      (T.TENSOR_QUANT16_SYMM, [-32768, 32767]), (S8, [-128, 127]),
                                      (T.TENSOR_QUANT8_SYMM, [-128, 127])])
def test_cast_identity_1_3_types(t, value):
    scale = 0.0 if t == B8 else 0.5
    check_on_device(Op.CAST, [tensor(t, value, scale)], t, 1, scale=scale)
