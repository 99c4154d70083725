"""Random-graph builders of the elementwise and data-movement operations: each draws valid
parameters for the tensors at hand and applies the operation (graphgen_core.Gen.apply)."""
from __future__ import annotations

from typing import Callable

import numpy as np
from hypothesis import strategies as st

from nngpu.hal.types import OperationType
from nngpu.ops.lib.dtypes import quant_range
from nngpu.ops.registry import REGISTRY

from .model_builder import T
from .graphgen_core import (ACT_RANGE, B8, Const, F16, F32, FLOATS, Gen, I32, Omitted, Q8, QUANTS, RUNS, S8,
                            SCALES, SUPPORTED, Shape, Slot, Tensor, divisors, num)


# ---- the operations ---------------------------------------------------------------------------
Op = OperationType
Builder = Callable[[Gen, OperationType], bool]


def types_of(op: OperationType, position: int = 0) -> tuple[int, ...]:
    """The generated types input `position` of `op` has in some signature."""
    seen = set()
    for s in REGISTRY[op].signatures:
        repeat = getattr(s, "in_repeat", None)
        if repeat is not None:
            seen.add(repeat if position == 0 else None)
        elif len(s.inputs) > position:
            seen.add(s.inputs[position])
    return tuple(t for t in SUPPORTED if t in seen)


def broadcastable(a: Tensor, b: Tensor) -> bool:
    try:
        for sa, sb in zip(a.shapes, b.shapes):
            np.broadcast_shapes(sa, sb)
    except ValueError:
        return False
    return True


def same_shapes(a: Tensor, b: Tensor) -> bool:
    return a.shapes == b.shapes


def i32(v: int) -> Const:
    return Const(T.INT32, np.asarray(v, np.int32))


def float_scalar(t: int, v: float) -> Const:
    return Const(T.FLOAT16 if t == F16 else T.FLOAT32, np.asarray(v, np.float16 if t == F16 else np.float32))


def partner(g: Gen, x: Tensor, same_shape: bool = False, nonzero: bool = False) -> Tensor | Const | None:
    """A second operand of x's type: a tensor of the graph, a constant or a new input, of a shape
    broadcasting with x's (or equal to it), nonzero: every |value| ≥ 0.5."""
    def ok(t: Tensor) -> bool:
        shaped = same_shapes(t, x) if same_shape else broadcastable(t, x)
        return shaped and (not nonzero or (t.err <= 0.05 and np.all([np.abs(v).min() >= 0.5 for v in t.values])
                                           and t.mag <= 16))
    kind = g.choice(["graph", "const", "input"])
    if kind == "graph":
        y = g.pick([x.type], ok)
        if y is not None:
            return y
    rank = x.rank if same_shape else g.between(1, x.rank)
    keep = [same_shape or g.coin(0.7) for _ in range(rank)]
    lo, hi = ((1, 4) if x.type == I32 else (0.5, 2.0)) if nonzero else (None, None)
    if kind == "const" and all(x.static(x.rank - rank + d) or not keep[d] for d in range(rank)):
        shape = tuple(d if k else 1 for d, k in zip(x.shapes[0][x.rank - rank:], keep))
        c = g.fresh(x.type, [shape], lo, hi, nonzero)
        return Const(x.type, c.values[0], c.scale, c.zero_point)
    shapes = [tuple(d if k else 1 for d, k in zip(s[x.rank - rank:], keep)) for s in x.shapes]
    return g.fresh(x.type, shapes, lo, hi, nonzero)


def _const_tensor(c: Tensor | Const) -> Tensor:
    """A constant seen as a tensor (its values in every run), for the error bounds."""
    if isinstance(c, Tensor):
        return c
    return Tensor(-1, c.type, (np.asarray(c.value),) * RUNS, c.scale, c.zero_point)


def _binary_exact(op: OperationType, a: Tensor, b: Tensor, act: int, values) -> bool:
    """The float result is the exact one (float64 computes these products and sums exactly)."""
    fn = {Op.ADD: np.add, Op.SUB: np.subtract, Op.MUL: np.multiply}.get(op)
    if fn is None:
        return False
    lo, hi = ACT_RANGE[act]
    return all(np.array_equal(np.clip(fn(va.astype(np.float64), vb.astype(np.float64)), lo, hi), out)
               for va, vb, out in zip(a.values, b.values, values))


def binary(g: Gen, op: OperationType) -> bool:
    """ADD, SUB, MUL, DIV (divisors kept away from 0) with a fused activation."""
    div = op == Op.DIV
    x = g.source(types_of(op))
    if x is None:
        return False
    y = partner(g, x, nonzero=div)
    if y is None:
        return False
    a, b = (x, y) if div or g.coin() else (y, x)
    act = 0 if x.type == I32 else g.between(0, 3)
    scale, zp = g.quant(x.type)
    if op == Op.MUL and x.type in QUANTS:
        product = float(np.float32(a.scale) * np.float32(b.scale))
        scale = g.choice([s for s in SCALES if s > product] or [product * 2])

    def err(values):
        ta, tb = _const_tensor(a), _const_tensor(b)
        if x.type not in FLOATS:
            return [0.0]
        if op in (Op.ADD, Op.SUB):
            prop = ta.err + tb.err
        elif op == Op.MUL:
            prop = ta.mag * tb.err + tb.mag * ta.err
        else:
            low = min(float(np.abs(v).min()) for v in tb.values)
            prop = ta.err / low + ta.mag * tb.err / low ** 2
        exact = _binary_exact(op, ta, tb, act, values[0])
        return [prop + (0.0 if exact else g.rounding(x.type, values[0]))]

    return g.apply(op, [a, b, i32(act)], [(x.type, scale, zp)], err) is not None


def minmax(g: Gen, op: OperationType) -> bool:
    x = g.source(types_of(op))
    y = partner(g, x) if x is not None else None
    if y is None:
        return False
    scale, zp = g.quant(x.type)
    err = lambda values: [max(x.err, _const_tensor(y).err)]  # noqa: E731
    return g.apply(op, [x, y] if g.coin() else [y, x], [(x.type, scale, zp)], err) is not None


def power(g: Gen, op: OperationType) -> bool:
    """POW of a base in [0.25, 8] and an exponent in [-2, 2]."""
    x = g.source(types_of(op), lambda t: t.lo >= 0.25 and t.mag <= 8 and t.err <= 0.01, lo=0.25, hi=4.0)
    if x is None:
        return False
    e = partner(g, x)
    te = _const_tensor(e)
    if te.mag > 2 or te.err > 0.01:
        return False

    def err(values):
        hi = max(x.mag, 1 / x.lo) ** te.mag
        return [te.mag * hi / x.lo * x.err + np.log(max(x.mag, 1 / x.lo)) * hi * te.err
                + g.rounding(x.type, values[0])]

    return g.apply(op, [x, e], [(x.type, 0.0, 0)], err) is not None


# op: (input condition, range of a new input, Lipschitz bound over the input, exact)
UNARY = {
    Op.ABS: (lambda t: True, (-2, 2), lambda t: 1.0, True),
    Op.NEG: (lambda t: True, (-2, 2), lambda t: 1.0, True),
    Op.EXP: (lambda t: t.hi <= (6 if t.type == F32 else 4), (-2, 2), lambda t: float(np.exp(t.hi)), False),
    Op.LOG: (lambda t: t.lo >= 0.25 and t.mag <= 64 and t.err <= 0.1 * t.lo, (0.25, 4), lambda t: 1 / t.lo, False),
    Op.SQRT: (lambda t: t.lo >= 0.25 and t.err <= 0.1 * t.lo, (0.25, 4), lambda t: 0.5 / np.sqrt(t.lo), False),
    Op.RSQRT: (lambda t: t.lo >= 0.25 and t.err <= 0.1 * t.lo, (0.25, 4), lambda t: 0.5 * t.lo ** -1.5, False),
    Op.SIN: (lambda t: t.mag <= 16, (-2, 2), lambda t: 1.0, False),
    Op.FLOOR: (lambda t: clear_of_integers(t), (-2, 2), lambda t: 0.0, True),  # defined below
}


def clear_of_integers(t: Tensor) -> bool:
    """Every value farther than its error bound (twice) from the integers: floor and truncation
    give the reference's result."""
    if t.err == 0:
        return True
    return all(np.abs(v - np.round(v)).min() > 2 * t.err for v in t.values)


def unary(g: Gen, op: OperationType) -> bool:
    ok, (lo, hi), lipschitz, exact = UNARY[op]
    x = g.source(types_of(op), ok, lo=lo, hi=hi)
    if x is None:
        return False
    err = lambda values: [lipschitz(x) * x.err + (0.0 if exact else g.rounding(x.type, values[0]))]  # noqa: E731
    return g.apply(op, [x], [(x.type, x.scale, x.zero_point)], err) is not None


# op: (Lipschitz bound, exact, fixed output quantization by type)
ACTIVATIONS = {
    Op.RELU: (1.0, True, {}), Op.RELU1: (1.0, True, {}), Op.RELU6: (1.0, True, {}),
    Op.LOGISTIC: (0.25, False, {Q8: (1 / 256, 0), S8: (1 / 256, -128)}),
    Op.TANH: (1.0, False, {Q8: (1 / 128, 128), S8: (1 / 128, 0)}),
    Op.HARD_SWISH: (1.5, False, {}),
}


def activation(g: Gen, op: OperationType) -> bool:
    lipschitz, exact, fixed = ACTIVATIONS[op]
    x = g.source(types_of(op))
    if x is None:
        return False
    scale, zp = (x.scale, x.zero_point) if op in (Op.RELU, Op.RELU1, Op.RELU6) else g.quant(x.type)
    if op == Op.HARD_SWISH and x.type in QUANTS:
        scale = g.choice([s for s in SCALES if s >= x.scale / 64])
    scale, zp = fixed.get(x.type, (scale, zp))
    err = lambda values: [lipschitz * x.err + (0.0 if exact else g.rounding(x.type, values[0]))]  # noqa: E731
    return g.apply(op, [x], [(x.type, scale, zp)], err) is not None


def elu(g: Gen, op: OperationType) -> bool:
    x = g.source(types_of(op), lambda t: t.hi <= 8)   # exp(x) of the positive part stays finite
    if x is None:
        return False
    alpha = g.choice([0.5, 1.0, 2.0])
    err = lambda values: [max(1.0, alpha) * x.err + g.rounding(x.type, values[0])]  # noqa: E731
    return g.apply(op, [x, float_scalar(x.type, alpha)], [(x.type, 0.0, 0)], err) is not None


def prelu(g: Gen, op: OperationType) -> bool:
    x = g.source(types_of(op))
    alpha = partner(g, x) if x is not None else None
    if alpha is None:
        return False
    scale, zp = g.quant(x.type)
    ta = _const_tensor(alpha)
    err = lambda values: [max(1.0, ta.mag) * x.err + x.mag * ta.err + g.rounding(x.type, values[0])]  # noqa: E731
    return g.apply(op, [x, alpha], [(x.type, scale, zp)], err) is not None


def compare(g: Gen, op: OperationType) -> bool:
    """Comparisons of inputs that differ by more than their error bounds (or are exact)."""
    x = g.source(types_of(op))
    y = partner(g, x) if x is not None else None
    if y is None:
        return False
    ty = _const_tensor(y)
    if x.err + ty.err > 0 and any(np.abs(a.astype(np.float64) - b).min() <= 2 * (x.err + ty.err)
                                  for a, b in zip(x.values, ty.values)):
        return False
    return g.apply(op, [x, y] if g.coin() else [y, x], [(B8, 0.0, 0)]) is not None


def logical(g: Gen, op: OperationType) -> bool:
    x = g.source([B8])
    if x is None:
        return False
    if op == Op.LOGICAL_NOT:
        return g.apply(op, [x], [(B8, 0.0, 0)]) is not None
    y = partner(g, x)
    return y is not None and g.apply(op, [x, y], [(B8, 0.0, 0)]) is not None


def select(g: Gen, op: OperationType) -> bool:
    a = g.source(types_of(op, 1))
    b = partner(g, a, same_shape=True) if a is not None else None
    if b is None:
        return False
    cond = g.pick([B8], lambda t: same_shapes(t, a)) or g.fresh(B8, a.shapes)
    scale, zp = g.quant(a.type)
    err = lambda values: [max(a.err, _const_tensor(b).err)]  # noqa: E731
    return g.apply(op, [cond, a, b], [(a.type, scale, zp)], err) is not None


def output_like(x: Tensor) -> tuple[int, float, int]:
    return x.type, x.scale, x.zero_point


def _same_err(x: Tensor):
    return lambda values: [x.err] * len(values)


def transpose(g: Gen, op: OperationType) -> bool:
    x = g.source(types_of(op))
    if x is None:
        return False
    if g.coin(0.1):
        perm: Slot = Omitted(I32)
    else:
        perm = g.param(g.per_run(x, lambda s: g.draw(st.permutations(range(len(s))))))
    return g.apply(op, [x, perm], [output_like(x)], _same_err(x)) is not None


def reshape(g: Gen, op: OperationType) -> bool:
    """A new shape of the same rank in every run, sometimes with one -1."""
    x = g.source(types_of(op))
    if x is None:
        return False
    rank = g.between(1, 4)
    stretch = g.between(-1, rank - 1)

    def shape(s: Shape) -> list[int]:
        left, dims = num(s), []
        for _ in range(rank - 1):
            dims.append(g.choice(divisors(left)))
            left //= dims[-1]
        dims = [int(d) for d in g.draw(st.permutations(dims + [left]))]
        if stretch >= 0:
            dims[stretch] = -1
        return dims

    return g.apply(op, [x, g.param(g.per_run(x, shape))], [output_like(x)], _same_err(x)) is not None


def squeeze(g: Gen, op: OperationType) -> bool:
    """Axes of extent 1 in every run (or left out: all of them)."""
    x = g.source(types_of(op), lambda t: any(all(s[a] == 1 for s in t.shapes) for a in range(t.rank)))
    if x is None:
        return False
    ones = [a for a in range(x.rank) if all(s[a] == 1 for s in x.shapes)]
    if not ones or g.coin(0.15):
        axes: Slot = Omitted(I32)
    else:
        count = g.between(1, len(ones))
        axes = g.param([[a - x.rank if g.coin(0.3) else a for a in g.draw(st.permutations(ones))[:count]]
                        for _ in range(RUNS)])
    return g.apply(op, [x, axes], [output_like(x)], _same_err(x)) is not None


def expand_dims(g: Gen, op: OperationType) -> bool:
    x = g.source(types_of(op), lambda t: t.rank <= 3)
    if x is None:
        return False
    axis = g.param(g.per_run(x, lambda s: g.between(-len(s) - 1, len(s))), scalar=True)
    return g.apply(op, [x, axis], [output_like(x)], _same_err(x)) is not None


def concatenation(g: Gen, op: OperationType) -> bool:
    """Two or three inputs agreeing off the axis in every run; quantized ones of any scale."""
    x = g.source(types_of(op))
    if x is None:
        return False
    axis = g.between(0, x.rank - 1)

    def fits(t: Tensor) -> bool:
        return t.rank == x.rank and all(
            a[:axis] == b[:axis] and a[axis + 1:] == b[axis + 1:] for a, b in zip(t.shapes, x.shapes))

    parts: list[Tensor | Const] = [x]
    for _ in range(g.between(1, 2)):
        y = g.pick([x.type], fits) if g.coin() else None
        if y is None:
            extent = [g.between(1, 3)] * RUNS if g.coin() else [g.between(1, 3) for _ in range(RUNS)]
            shapes = [s[:axis] + (e,) + s[axis + 1:] for s, e in zip(x.shapes, extent)]
            y = g.fresh(x.type, shapes)
            if len(set(shapes)) == 1 and g.coin():
                y = Const(x.type, y.values[0], y.scale, y.zero_point)
        parts.append(y)
    parts = [parts[k] for k in g.draw(st.permutations(range(len(parts))))]
    scale, zp = g.quant(x.type)
    err = lambda values: [max(_const_tensor(p).err for p in parts)]  # noqa: E731
    return g.apply(op, [*parts, g.axis_param(axis, x.rank)], [(x.type, scale, zp)], err) is not None


def slice_(g: Gen, op: OperationType) -> bool:
    x = g.source(types_of(op))
    if x is None:
        return False

    def box(s: Shape) -> tuple[list[int], list[int]]:
        begin = [g.between(0, d - 1) for d in s]
        size = [-1 if g.coin(0.2) else g.between(1, d - b) for d, b in zip(s, begin)]
        return begin, size

    boxes = g.per_run(x, box)
    begin, size = g.param([b for b, _ in boxes]), g.param([s for _, s in boxes])
    return g.apply(op, [x, begin, size], [output_like(x)], _same_err(x)) is not None


def strided_slice(g: Gen, op: OperationType) -> bool:
    """begin / end (plain, negative, out of range or masked) and strides giving at least one
    element per axis; shrinking only axes with one element in every run."""
    x = g.source(types_of(op))
    if x is None:
        return False
    begin_mask, end_mask = g.between(0, (1 << x.rank) - 1), g.between(0, (1 << x.rank) - 1)

    def ranges(s: Shape) -> tuple[list[int], list[int], list[int], list[int]]:
        begin, end, strides, counts = [], [], [], []
        for axis, d in enumerate(s):
            stride = g.choice([1, 1, 2, 3, -1, -2])
            if stride > 0:
                b = 0 if begin_mask >> axis & 1 else g.between(0, d - 1)
                e = d if end_mask >> axis & 1 else g.between(b + 1, d)
                begin.append(g.choice([b, b - d]))
                end.append(g.choice([d, d + 2] if e == d else [e, e - d]))
            else:
                b = d - 1 if begin_mask >> axis & 1 else g.between(0, d - 1)
                e = -1 if end_mask >> axis & 1 else g.between(-1, b - 1)
                begin.append(g.choice([b, b - d]))
                end.append(-d - 2 if e == -1 else g.choice([e, e - d]))
            strides.append(stride)
            counts.append(-(-(e - b) // stride))
        return begin, end, strides, counts

    per_run = g.per_run(x, ranges)
    shrink = 0
    for axis in range(x.rank):
        one = all(r[3][axis] == 1 and r[2][axis] > 0 for r in per_run)
        if one and not (begin_mask | end_mask) >> axis & 1 and g.coin(0.5):
            shrink |= 1 << axis
    begin, end, strides = (g.param([r[k] for r in per_run]) for k in range(3))
    slots = [x, begin, end, strides, i32(begin_mask), i32(end_mask), i32(shrink)]
    return g.apply(op, slots, [output_like(x)], _same_err(x)) is not None


def pad(g: Gen, op: OperationType) -> bool:
    x = g.source(types_of(op))
    if x is None:
        return False
    paddings = g.param(g.per_run(x, lambda s: [[g.between(0, 2), g.between(0, 2)] for _ in s]))
    slots: list[Slot] = [x, paddings]
    if op == Op.PAD_V2:
        if x.type in QUANTS:
            slots.append(i32(g.between(*quant_range(x.type))))
        else:
            slots.append(float_scalar(x.type, g.choice([0.0, -1.5, 2.25])))
    return g.apply(op, slots, [output_like(x)], _same_err(x)) is not None


def tile(g: Gen, op: OperationType) -> bool:
    x = g.source(types_of(op))
    if x is None:
        return False
    multiples = g.param(g.per_run(x, lambda s: [g.choice([1, 1, 2, 3]) for _ in s]))
    return g.apply(op, [x, multiples], [output_like(x)], _same_err(x)) is not None


def gather(g: Gen, op: OperationType) -> bool:
    x = g.source(types_of(op))
    if x is None:
        return False
    axis = g.between(0, x.rank - 1)
    idx_shape = tuple(g.between(1, 3) for _ in range(g.between(1, max(1, min(2, 5 - x.rank)))))
    indices = g.param(g.per_run(x, lambda s: np.reshape([g.between(0, s[axis] - 1) for _ in range(num(idx_shape))],
                                                       idx_shape)))
    return g.apply(op, [x, g.axis_param(axis, x.rank), indices], [output_like(x)], _same_err(x)) is not None


def split(g: Gen, op: OperationType) -> bool:
    x = g.source(types_of(op))
    if x is None:
        return False
    axis = g.between(0, x.rank - 1)
    counts = [k for k in range(2, 5) if all(s[axis] % k == 0 for s in x.shapes)]
    if not counts:
        return False
    k = g.choice(counts)
    return g.apply(op, [x, g.axis_param(axis, x.rank), i32(k)], [output_like(x)] * k, _same_err(x)) is not None


def channel_shuffle(g: Gen, op: OperationType) -> bool:
    x = g.source(types_of(op))
    if x is None:
        return False
    axis = g.between(0, x.rank - 1)
    groups = [k for k in range(1, 5) if all(s[axis] % k == 0 for s in x.shapes)]
    slots = [x, i32(g.choice(groups)), g.axis_param(axis, x.rank)]
    return g.apply(op, slots, [output_like(x)], _same_err(x)) is not None
