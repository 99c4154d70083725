"""Random-graph builders of reductions, windows (convolutions, pools), fully connected, casts and
arg-selection, and `graphs`, the hypothesis strategy of random valid models."""
from __future__ import annotations

from typing import Sequence

import numpy as np
from hypothesis import strategies as st

from nngpu.hal.types import OperationType
from nngpu.ops.registry import REGISTRY

from .model_builder import T
from .graphgen_core import (Const, F16, F32, FLOATS, Gen, Graph, I32, MANTISSA, Q8, QUANTS, S8, SCALES,
                            SUPPORTED, Shape, Slot, Tensor, grid_bits, num)
from .graphgen_ops import (ACTIVATIONS, Builder, Op, UNARY, clear_of_integers, float_scalar, output_like,
                           activation, binary, channel_shuffle, compare, concatenation, elu, expand_dims,
                           gather, i32, logical, minmax, pad, power, prelu, reshape, select, slice_, split,
                           squeeze, strided_slice, tile, transpose, types_of, unary)


def _reduced(shape: Shape, axes: Sequence[int]) -> int:
    return num([shape[a % len(shape)] for a in set(axes)])


def reduce(g: Gen, op: OperationType) -> bool:
    """Axes (negative, repeated) in each run, keep_dims or not; REDUCE_PROD over few values."""
    x = g.source(types_of(op))
    if x is None:
        return False

    count, repeat = g.between(1, x.rank), g.coin(0.1)   # the axes tensor's length is the model's

    def axes(s: Shape) -> list[int]:
        chosen = [a - len(s) if g.coin(0.3) else a for a in g.draw(st.permutations(range(len(s))))[:count]]
        return chosen + chosen[:1] * repeat

    per_run = g.per_run(x, axes)
    counts = [_reduced(s, a) for s, a in zip(x.shapes, per_run)]
    n = max(counts)
    if op == Op.REDUCE_PROD and (n > 6 or x.mag > 2):
        return False
    keep = i32(g.between(0, 1)) if op == Op.MEAN else Const(T.BOOL, np.asarray(g.coin(), np.bool_))

    def err(values):
        if x.type not in FLOATS:
            return [0.0]
        if op in (Op.REDUCE_MAX, Op.REDUCE_MIN):
            return [x.err]
        if op == Op.REDUCE_PROD:
            return [n * x.mag ** (n - 1) * x.err + n * g.rounding(x.type, values[0])]
        bits = grid_bits(x.values)
        total = n * x.mag
        if op == Op.REDUCE_SUM:
            exact = x.err == 0 and bits is not None and total * 2.0 ** bits < 2.0 ** MANTISSA[x.type]
            return [n * x.err + (0.0 if exact else n * g.rounding(x.type, values[0], total))]
        return [x.err + n * g.rounding(x.type, values[0], x.mag)]

    return g.apply(op, [x, g.param(per_run), keep], [output_like(x)], err) is not None


def softmax(g: Gen, op: OperationType) -> bool:
    """SOFTMAX (quantized: the spec's output scale) and LOG_SOFTMAX, beta and sometimes an axis."""
    x = g.source(types_of(op))
    if x is None:
        return False
    beta = g.choice([0.5, 1.0, 2.0])
    scalar_t = F16 if x.type == F16 else F32
    slots: list[Slot] = [x, float_scalar(scalar_t, beta)]
    axis = x.rank - 1
    if op == Op.LOG_SOFTMAX or g.coin(0.7):
        axis = g.between(0, x.rank - 1)
        slots.append(g.axis_param(axis, x.rank))
    out = {Q8: (Q8, 1 / 256, 0), S8: (S8, 1 / 256, -128)}.get(x.type, (x.type, 0.0, 0))
    n = max(s[axis] for s in x.shapes)

    def err(values):
        if x.type not in FLOATS:
            return [0.0]
        extra = max(float(np.abs(v).max()) for v in values[0]) if op == Op.LOG_SOFTMAX else 0.0
        return [2 * beta * x.err + g.rounding(x.type, values[0], n + 4 + extra)]

    return g.apply(op, slots, [out], err) is not None


def _image(g: Gen, op: OperationType, nchw: bool, channels_min: int = 1) -> Tensor | None:
    """A 4-D input with the same channel extent in every run."""
    c_axis = 1 if nchw else 3
    x = g.pick(types_of(op), lambda t: t.rank == 4 and t.static(c_axis))
    if x is None and g.coin(0.7):
        t = g.main if g.main in types_of(op) else g.choice(types_of(op))
        c = g.between(channels_min, 4)
        shapes = g.shapes(4, 1, 6)
        x = g.fresh(t, [s[:c_axis] + (c,) + s[c_axis + 1:] for s in shapes])
    return x


def _window(g: Gen, x: Tensor, nchw: bool, dilation: int = 1) -> tuple[list[Slot], int, int] | None:
    """Padding and strides of a window (its size drawn here, fitting every run): the padding
    scalars (implicit code, or four explicit pads), the strides, and (kh, kw)."""
    spatial = (2, 3) if nchw else (1, 2)
    explicit = g.coin(0.4)
    pads = [g.between(0, 1) for _ in range(4)] if explicit else [0] * 4
    room = [min(s[a] for s in x.shapes) + (pads[2] + pads[3] if a == spatial[0] else pads[0] + pads[1])
            for a in spatial]
    code = g.choice([1, 2])             # SAME pads as needed, VALID never
    if not explicit and code == 1:
        room = [3 * dilation, 3 * dilation]
    sizes = []
    for r in room:
        most = (r - 1) // dilation + 1
        if most < 1:
            return None
        sizes.append(g.between(1, min(3, most)))
    kh, kw = sizes
    if explicit:                        # the padding must be smaller than the window
        pads = [min(p, k - 1) for p, k in zip(pads, (kw, kw, kh, kh))]
        scalars: list[Slot] = [i32(p) for p in pads]
    else:
        scalars = [i32(code)]
    scalars += [i32(g.between(1, 2)), i32(g.between(1, 2))]
    return scalars, kh, kw


def _layout_tail(nchw: bool, dilation: int) -> list[Slot]:
    """The optional layout flag and dilation factors (the 1.2 forms)."""
    tail: list[Slot] = []
    if nchw or dilation > 1:
        tail.append(Const(T.BOOL, np.asarray(nchw, np.bool_)))
    if dilation > 1:
        tail += [i32(dilation), i32(dilation)]
    return tail


def _filter(g: Gen, x: Tensor, shape: Shape, channel_dim: int | None) -> Const:
    """Constant weights: a float grid in [-1, 1], or quantized per tensor or (channel_dim given)
    sometimes per channel."""
    if x.type in FLOATS:
        return Const(x.type, g.data(x.type, shape, -1.0, 1.0))
    if channel_dim is not None and g.coin(0.3):
        scales = [g.choice(SCALES) for _ in range(shape[channel_dim])]
        return Const(T.TENSOR_QUANT8_SYMM_PER_CHANNEL, g.rng.integers(-127, 128, size=shape).astype(np.int8),
                     0.0, 0, (scales, channel_dim))
    scale, zp = g.quant(x.type)
    return Const(x.type, g.data(x.type, shape), scale, zp)


def _bias(g: Gen, x: Tensor, w: Const, n: int) -> Const:
    if x.type in FLOATS:
        return Const(x.type, g.data(x.type, (n,), -1.0, 1.0))
    scale = 0.0 if w.channel_quant else float(np.float32(x.scale) * np.float32(w.scale))
    return Const(I32, g.rng.integers(-64, 65, size=n).astype(np.int32), scale)


def _weighted_err(g: Gen, x: Tensor, w: Const, taps_axes: tuple[int, ...], out_axis: int, bias: Const):
    """Error of sums of products of x with constant weights, then a clamping activation."""
    if x.type not in FLOATS:
        return lambda values: [0.0]
    w_abs = np.abs(w.value.astype(np.float64))
    per_out = np.moveaxis(w_abs, out_axis, 0).reshape(w_abs.shape[out_axis], -1).sum(axis=1)
    total = float(per_out.max())
    taps = num([w.value.shape[a] for a in taps_axes])
    scale = (taps + 1) * (x.mag * total + float(np.abs(bias.value).max()))
    return lambda values: [total * x.err + g.rounding(x.type, values[0], scale)]


def convolution(g: Gen, op: OperationType) -> bool:
    """CONV_2D and DEPTHWISE_CONV_2D with constant filters, either layout, sometimes dilated."""
    depthwise = op == Op.DEPTHWISE_CONV_2D
    nchw = g.coin(0.2)
    dilation = 2 if g.coin(0.1) else 1
    x = _image(g, op, nchw)
    if x is None:
        return False
    window = _window(g, x, nchw, dilation)
    if window is None:
        return False
    scalars, kh, kw = window
    c = x.shapes[0][1 if nchw else 3]
    multiplier = g.between(1, 2)
    out_c = c * multiplier if depthwise else g.between(1, 4)
    shape = (1, kh, kw, out_c) if depthwise else (out_c, kh, kw, c)
    w = _filter(g, x, shape, 3 if depthwise else 0)
    bias = _bias(g, x, w, out_c)
    if depthwise:
        scalars.insert(len(scalars), i32(multiplier))
    act = i32(g.between(0, 3))
    scale, zp = g.quant(x.type)
    slots = [x, w, bias, *scalars, act, *_layout_tail(nchw, dilation)]
    err = _weighted_err(g, x, w, (1, 2) if depthwise else (1, 2, 3), 3 if depthwise else 0, bias)
    return g.apply(op, slots, [(x.type, scale, zp)], err) is not None


def pool(g: Gen, op: OperationType) -> bool:
    nchw = g.coin(0.2)
    x = _image(g, op, nchw)
    if x is None:
        return False
    window = _window(g, x, nchw)
    if window is None:
        return False
    scalars, kh, kw = window
    act = i32(g.between(0, 3))
    slots = [x, *scalars, i32(kw), i32(kh), act, *_layout_tail(nchw, 1)]

    def err(values):
        if x.type not in FLOATS:
            return [0.0]
        if op == Op.MAX_POOL_2D:
            return [x.err]
        return [x.err + g.rounding(x.type, values[0], (kh * kw + 2) * x.mag)]

    return g.apply(op, slots, [output_like(x)], err) is not None


def fully_connected(g: Gen, op: OperationType) -> bool:
    x = g.source(types_of(op), lambda t: 2 <= t.rank and t.static(t.rank - 1))
    if x is None or not 2 <= x.rank <= 4:
        return False
    units, size = g.between(1, 6), x.shapes[0][-1]
    w = _filter(g, x, (units, size), None)
    bias = _bias(g, x, w, units)
    scale, zp = g.quant(x.type)
    err = _weighted_err(g, x, w, (1,), 0, bias)
    return g.apply(op, [x, w, bias, i32(g.between(0, 3))], [(x.type, scale, zp)], err) is not None


def cast(g: Gen, op: OperationType) -> bool:
    """CAST to a type the signatures allow; to integers only from values clear of integers."""
    x = g.source(types_of(op))
    if x is None:
        return False
    targets = [s.outputs[0] for s in REGISTRY[op].signatures if s.inputs[0] == x.type and s.outputs[0] in SUPPORTED]
    t = g.choice(targets)
    if t in (I32, Q8) and x.type in FLOATS and not clear_of_integers(x):
        return False
    scale, zp = g.quant(t)
    err = lambda values: [x.err + (g.rounding(t, values[0]) if (x.type, t) == (F32, F16) else 0.0)]  # noqa: E731
    return g.apply(op, [x], [(t, scale, zp)], err) is not None


def quantize(g: Gen, op: OperationType) -> bool:
    """QUANTIZE of values whose x / scale is clear of the rounding steps (halves)."""
    x = g.source(types_of(op))
    if x is None:
        return False
    t = g.choice([Q8, S8])
    scale, zp = g.quant(t)
    if x.err and any(np.abs(np.abs(np.mod(v / scale, 1.0)) - 0.5).min() <= 2 * x.err / scale for v in x.values):
        return False
    return g.apply(op, [x], [(t, scale, zp)]) is not None


def dequantize(g: Gen, op: OperationType) -> bool:
    x = g.source([t for t in types_of(op) if t in QUANTS])
    if x is None:
        return False
    t = g.choice(FLOATS)
    return g.apply(op, [x], [(t, 0.0, 0)], lambda values: [g.rounding(t, values[0])]) is not None


def argminmax(g: Gen, op: OperationType) -> bool:
    """ARGMAX / ARGMIN of exact values (ties then resolve as in the reference)."""
    x = g.source(types_of(op), lambda t: t.err == 0)
    if x is None:
        return False
    return g.apply(op, [x, g.axis_param(g.between(0, x.rank - 1), x.rank)], [(I32, 0.0, 0)]) is not None


# (builder, weight): float32 elementwise work and shape-changing operations most often
MENU: dict[OperationType, tuple[Builder, int]] = {
    Op.ADD: (binary, 6), Op.SUB: (binary, 4), Op.MUL: (binary, 5), Op.DIV: (binary, 2),
    Op.MAXIMUM: (minmax, 2), Op.MINIMUM: (minmax, 2), Op.POW: (power, 1),
    **{op: (unary, 1) for op in UNARY},
    **{op: (activation, 2) for op in ACTIVATIONS}, Op.ELU: (elu, 1), Op.PRELU: (prelu, 1),
    **{op: (compare, 1) for op in (Op.EQUAL, Op.NOT_EQUAL, Op.GREATER, Op.GREATER_EQUAL, Op.LESS, Op.LESS_EQUAL)},
    Op.LOGICAL_AND: (logical, 1), Op.LOGICAL_OR: (logical, 1), Op.LOGICAL_NOT: (logical, 1), Op.SELECT: (select, 2),
    Op.TRANSPOSE: (transpose, 2), Op.RESHAPE: (reshape, 3), Op.SQUEEZE: (squeeze, 2), Op.EXPAND_DIMS: (expand_dims, 2),
    Op.CONCATENATION: (concatenation, 2), Op.SLICE: (slice_, 3), Op.STRIDED_SLICE: (strided_slice, 3),
    Op.PAD: (pad, 2), Op.PAD_V2: (pad, 1), Op.TILE: (tile, 3), Op.GATHER: (gather, 2), Op.SPLIT: (split, 1),
    Op.CHANNEL_SHUFFLE: (channel_shuffle, 1),
    **{op: (reduce, 1) for op in (Op.MEAN, Op.REDUCE_SUM, Op.REDUCE_MAX, Op.REDUCE_MIN, Op.REDUCE_PROD,
                                  Op.REDUCE_ANY, Op.REDUCE_ALL)},
    Op.SOFTMAX: (softmax, 2), Op.LOG_SOFTMAX: (softmax, 1),
    Op.CONV_2D: (convolution, 2), Op.DEPTHWISE_CONV_2D: (convolution, 1),
    Op.AVERAGE_POOL_2D: (pool, 1), Op.MAX_POOL_2D: (pool, 1), Op.L2_POOL_2D: (pool, 1),
    Op.FULLY_CONNECTED: (fully_connected, 2),
    Op.CAST: (cast, 1), Op.QUANTIZE: (quantize, 1), Op.DEQUANTIZE: (dequantize, 1),
    Op.ARGMAX: (argminmax, 1), Op.ARGMIN: (argminmax, 1),
}
_OPS = list(MENU)
_WEIGHTS = np.array([MENU[op][1] for op in _OPS], np.float64) / sum(w for _, w in MENU.values())


@st.composite
def graphs(draw, max_ops: int = 8) -> Graph:
    """A random valid model of 2..max_ops operations (not counting the int32 arithmetic that
    computes shape parameters) over small tensors, with RUNS input value sets, its reference
    outputs and tolerances."""
    g = Gen(draw)
    g.adopt(g.fresh(g.main, g.shapes()))
    target = draw(st.integers(2, max_ops))
    for _ in range(8 * target):
        if g.ops >= target:
            break
        op = _OPS[g.rng.choice(len(_OPS), p=_WEIGHTS)]   # hypothesis would favour the first ones
        MENU[op][0](g, op)
    if g.ops == 0:   # every draw was rejected: x + x always works
        x = g.pool[0]
        g.apply(Op.ADD, [x, x, i32(0)], [output_like(x)], lambda values: [2 * x.err])
    return g.finish()
