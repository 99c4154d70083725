"""Single-operator int8 TFLite models for comparing nngpu with TFLite's reference kernels: each
builder takes a seeded generator and returns (the .tflite bytes, its inputs). Scales and zero
points are drawn too, within what TFLite's int8 kernels accept (symmetric weights, LOGISTIC and
SOFTMAX outputs at 1/256 and -128)."""
from __future__ import annotations

from typing import Callable

import numpy as np

from .tflbuild import INT8, INT32, TFLModel, opt

Built = tuple[bytes, list[np.ndarray]]


def _scale(rng: np.random.Generator, lo: float = 0.005, hi: float = 0.1) -> float:
    return float(np.exp(rng.uniform(np.log(lo), np.log(hi))))


def _zp(rng: np.random.Generator) -> int:
    return int(rng.integers(-128, 128))


def _x(rng: np.random.Generator, shape: list[int]) -> np.ndarray:
    return rng.integers(-128, 128, shape).astype(np.int8)


def _act(rng: np.random.Generator) -> int:
    return int(rng.choice([0, 1, 3]))   # NONE, RELU, RELU6


def conv_2d(rng: np.random.Generator) -> Built:
    """Per-channel int8 CONV_2D, SAME or VALID, stride 1 or 2, with bias and an activation."""
    m = TFLModel()
    cin, cout, k = int(rng.integers(1, 5)), int(rng.integers(1, 6)), int(rng.choice([1, 3]))
    sx, padding, stride = _scale(rng), int(rng.integers(0, 2)), int(rng.integers(1, 3))
    ws = [_scale(rng, 0.002, 0.05) for _ in range(cout)]
    h = 6
    out = (h + stride - 1) // stride if padding == 0 else (h - k) // stride + 1
    x = m.tensor("x", [1, h, h, cin], INT8, scale=sx, zero_point=_zp(rng))
    w = m.const("w", rng.integers(-127, 128, (cout, k, k, cin)), INT8, scale=ws, zero_point=[0] * cout, qdim=0)
    b = m.const("b", rng.integers(-2000, 2000, cout), INT32, scale=[sx * s for s in ws], zero_point=[0] * cout)
    y = m.tensor("y", [1, out, out, cout], INT8, scale=_scale(rng, 0.02, 0.3), zero_point=_zp(rng))
    act = _act(rng)
    m.op("CONV_2D", [x, w, b], [y], "Conv2DOptions",
         lambda bld: opt(bld, "Conv2DOptions", Padding=padding, StrideW=stride, StrideH=stride,
                         FusedActivationFunction=act, DilationWFactor=1, DilationHFactor=1))
    return m.build([x], [y]), [_x(rng, [1, h, h, cin])]


def depthwise_conv_2d(rng: np.random.Generator) -> Built:
    m = TFLModel()
    cin, mult, k = int(rng.integers(1, 5)), int(rng.integers(1, 3)), 3
    cout = cin * mult
    sx, padding, stride = _scale(rng), int(rng.integers(0, 2)), int(rng.integers(1, 3))
    ws = [_scale(rng, 0.002, 0.05) for _ in range(cout)]
    h = 6
    out = (h + stride - 1) // stride if padding == 0 else (h - k) // stride + 1
    x = m.tensor("x", [1, h, h, cin], INT8, scale=sx, zero_point=_zp(rng))
    w = m.const("w", rng.integers(-127, 128, (1, k, k, cout)), INT8, scale=ws, zero_point=[0] * cout, qdim=3)
    b = m.const("b", rng.integers(-2000, 2000, cout), INT32, scale=[sx * s for s in ws], zero_point=[0] * cout, qdim=0)
    y = m.tensor("y", [1, out, out, cout], INT8, scale=_scale(rng, 0.02, 0.3), zero_point=_zp(rng))
    act = _act(rng)
    m.op("DEPTHWISE_CONV_2D", [x, w, b], [y], "DepthwiseConv2DOptions",
         lambda bld: opt(bld, "DepthwiseConv2DOptions", Padding=padding, StrideW=stride, StrideH=stride,
                         DepthMultiplier=mult, FusedActivationFunction=act, DilationWFactor=1, DilationHFactor=1))
    return m.build([x], [y]), [_x(rng, [1, h, h, cin])]


def fully_connected(rng: np.random.Generator) -> Built:
    m = TFLModel()
    n, cin, cout = int(rng.integers(1, 4)), int(rng.integers(1, 17)), int(rng.integers(1, 9))
    sx, sw = _scale(rng), _scale(rng, 0.002, 0.05)
    x = m.tensor("x", [n, cin], INT8, scale=sx, zero_point=_zp(rng))
    w = m.const("w", rng.integers(-127, 128, (cout, cin)), INT8, scale=sw, zero_point=0)
    b = m.const("b", rng.integers(-2000, 2000, cout), INT32, scale=sx * sw, zero_point=0)
    y = m.tensor("y", [n, cout], INT8, scale=_scale(rng, 0.02, 0.3), zero_point=_zp(rng))
    act = _act(rng)
    m.op("FULLY_CONNECTED", [x, w, b], [y], "FullyConnectedOptions",
         lambda bld: opt(bld, "FullyConnectedOptions", FusedActivationFunction=act))
    return m.build([x], [y]), [_x(rng, [n, cin])]


def average_pool_2d(rng: np.random.Generator) -> Built:
    m = TFLModel()
    c, k, stride, padding = int(rng.integers(1, 4)), int(rng.integers(2, 4)), int(rng.integers(1, 3)), int(rng.integers(0, 2))
    h = 7
    out = (h + stride - 1) // stride if padding == 0 else (h - k) // stride + 1
    s, z = _scale(rng), _zp(rng)
    x = m.tensor("x", [1, h, h, c], INT8, scale=s, zero_point=z)
    y = m.tensor("y", [1, out, out, c], INT8, scale=s, zero_point=z)   # TFLite pools keep the scale
    act = _act(rng)
    m.op("AVERAGE_POOL_2D", [x], [y], "Pool2DOptions",
         lambda bld: opt(bld, "Pool2DOptions", Padding=padding, StrideW=stride, StrideH=stride, FilterWidth=k,
                         FilterHeight=k, FusedActivationFunction=act))
    return m.build([x], [y]), [_x(rng, [1, h, h, c])]


def mean(rng: np.random.Generator) -> Built:
    m = TFLModel()
    shape = [1, 5, 4, int(rng.integers(1, 6))]
    same = bool(rng.integers(0, 2))
    sx, zx = _scale(rng), _zp(rng)
    x = m.tensor("x", shape, INT8, scale=sx, zero_point=zx)
    y = m.tensor("y", [1, 1, 1, shape[3]], INT8, scale=sx if same else _scale(rng), zero_point=zx if same else _zp(rng))
    m.op("MEAN", [x, m.const("axes", np.array([1, 2], np.int32), INT32)], [y], "ReducerOptions",
         lambda bld: opt(bld, "ReducerOptions", KeepDims=True))
    return m.build([x], [y]), [_x(rng, shape)]


def _binary(code: str, options: str) -> Callable[[np.random.Generator], Built]:
    def build(rng: np.random.Generator) -> Built:
        m = TFLModel()
        shape = [2, 3, int(rng.integers(1, 6))]
        b_shape = shape if rng.integers(0, 2) else [shape[-1]]   # broadcast a vector too
        a = m.tensor("a", shape, INT8, scale=_scale(rng), zero_point=_zp(rng))
        b = m.tensor("b", b_shape, INT8, scale=_scale(rng), zero_point=_zp(rng))
        y = m.tensor("y", shape, INT8, scale=_scale(rng, 0.01, 0.2), zero_point=_zp(rng))
        act = _act(rng)
        m.op(code, [a, b], [y], options, lambda bld: opt(bld, options, FusedActivationFunction=act))
        return m.build([a, b], [y]), [_x(rng, shape), _x(rng, b_shape)]
    return build


def _unary(code: str, out_scale: float | None = None, out_zp: int | None = None,
           options: str | None = None, **fields) -> Callable[[np.random.Generator], Built]:
    def build(rng: np.random.Generator) -> Built:
        m = TFLModel()
        shape = [2, int(rng.integers(1, 40))]
        x = m.tensor("x", shape, INT8, scale=_scale(rng, 0.01, 0.2), zero_point=_zp(rng))
        y = m.tensor("y", shape, INT8, scale=out_scale or _scale(rng, 0.005, 0.1),
                     zero_point=_zp(rng) if out_zp is None else out_zp)
        m.op(code, [x], [y], options, (lambda bld: opt(bld, options, **fields)) if options else None)
        return m.build([x], [y]), [_x(rng, shape)]
    return build


BUILDERS: dict[str, Callable[[np.random.Generator], Built]] = {
    "CONV_2D": conv_2d,
    "DEPTHWISE_CONV_2D": depthwise_conv_2d,
    "FULLY_CONNECTED": fully_connected,
    "AVERAGE_POOL_2D": average_pool_2d,
    "MEAN": mean,
    "ADD": _binary("ADD", "AddOptions"),
    "MUL": _binary("MUL", "MulOptions"),
    "HARD_SWISH": _unary("HARD_SWISH"),
    "LOGISTIC": _unary("LOGISTIC", 1 / 256, -128),
    "SOFTMAX": _unary("SOFTMAX", 1 / 256, -128, "SoftmaxOptions", Beta=1.0),
    "QUANTIZE": _unary("QUANTIZE"),   # int8 to int8 at another scale: the requantize table
}
