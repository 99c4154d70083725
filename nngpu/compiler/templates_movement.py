"""Data-movement operations as device copies (float32 / float16, and quant8 tensors that keep
their scale and zeroPoint once the renderer has a C type for them).

Most of them (RESHAPE, SQUEEZE, EXPAND_DIMS, TRANSPOSE, SLICE, STRIDED_SLICE, TILE,
DEPTH_TO_SPACE, SPACE_TO_DEPTH, CHANNEL_SHUFFLE, BATCH_TO_SPACE_ND, either layout) map each
output element to one input element by a function that is a sum of one term per output axis.
Rather than re-deriving each op's index rules, the builder runs the op's own reference kernel
on a tensor of flat indices, so the map is the reference's by construction, and fits every
axis to a mixed-radix sum `w0 * (c % r0) + w1 * (c / r0 % r1) + ...` (affine, tiled or
block-split), checking the fit exactly.
CONCATENATION, PAD / PAD_V2, GATHER and SPACE_TO_BATCH_ND have closed forms of their own."""
from __future__ import annotations

import numpy as np

from ..hal.types import OperandType as T
from ..hal.types import OperationType as Op
from ..ops import movement, space
from ..ops._movement_util import norm_axis, zero_value
from ..ops.registry import REGISTRY, OpContext
from .render import Dialect
from .templates import Template, template
from .templates_util import ctype, linear, literal, nonempty, params_known, same_copy_type, storage_round, strides

_SEPARABLE = (Op.RESHAPE, Op.SQUEEZE, Op.EXPAND_DIMS, Op.TRANSPOSE, Op.SLICE, Op.STRIDED_SLICE, Op.TILE,
              Op.DEPTH_TO_SPACE, Op.SPACE_TO_DEPTH, Op.CHANNEL_SHUFFLE, Op.BATCH_TO_SPACE_ND)


def source_map(ctx: OpContext, shapes: dict) -> np.ndarray | None:
    """Each output element's flat index into input 0, computed by the reference kernel."""
    x, y = ctx.operation.inputs[0], ctx.operation.outputs[0]
    index = np.arange(int(np.prod(shapes[x], dtype=np.int64)), dtype=np.int64).reshape(shapes[x])
    sub = OpContext(ctx.operation, ctx.operands, [index, *ctx.values[1:]], ctx.relaxed, ctx.version)
    out = np.asarray(REGISTRY[ctx.operation.type].reference(sub)[0])
    return out if out.shape == tuple(shapes[y]) and out.dtype == np.int64 else None


def axis_digits(g: np.ndarray) -> list[tuple[int, int | None, int]] | None:
    """g[c] as a mixed-radix sum: [(place, radix, weight)] with g[c] == sum(weight * (c // place
    % radix)) (radix None: the top digit, unbounded), or None. Affine maps give one digit, tiled
    and block-split axes (TILE, DEPTH_TO_SPACE in either layout) two or three."""
    c = np.arange(len(g), dtype=np.int64)
    digits: list[tuple[int, int | None, int]] = []
    place, predicted = 1, np.zeros(len(g), dtype=np.int64)
    while True:
        weight = int(g[place]) if place < len(g) else 0
        full = predicted + weight * (c // place)
        off = np.flatnonzero(full != g)
        if not off.size:
            digits.append((place, None, weight))
            return digits
        nxt = int(off[0])
        if nxt % place:
            return None
        digits.append((place, nxt // place, weight))
        predicted = predicted + weight * (c // place % (nxt // place))
        place = nxt


def _digit_terms(c: str, digits) -> list[tuple[str, int]]:
    out = []
    for place, radix, weight in digits:
        d = c if place == 1 else f"{c} / {place}"
        out.append((d if radix is None else f"({d}) % {radix}", weight))
    return out


def separable_index(src: np.ndarray) -> str | None:
    """A C expression of the flat source index in c0..c{rank-1}, or None when the map is not a
    sum of per-axis mixed-radix terms."""
    if np.array_equal(src.reshape(-1), np.arange(src.size)):
        return "i"
    rank = src.ndim
    base = int(src.reshape(-1)[0])
    predicted = np.full(src.shape, base, dtype=np.int64)
    terms = []
    for k in range(rank):
        at = [0] * rank
        at[k] = slice(None)
        g = src[tuple(at)] - base
        digits = axis_digits(g)
        if digits is None:
            return None
        view = [1] * rank
        view[k] = src.shape[k]
        predicted = predicted + g.reshape(view)
        terms += _digit_terms(f"c{k}", digits)
    if not np.array_equal(predicted, src):
        return None
    return linear(terms, base)


def _separable(ctx: OpContext, shapes: dict) -> Template | None:
    x, y = ctx.operation.inputs[0], ctx.operation.outputs[0]
    if not same_copy_type(ctx, [0]) or not params_known(ctx, range(1, ctx.num_inputs)) or not nonempty(shapes, [x, y]):
        return None
    src = source_map(ctx, shapes)
    index = None if src is None else separable_index(src)
    if index is None:
        return None
    t = ctype(ctx, 0)
    return Template("copy", [x], lambda names, d: [f"float acc = {d.load(t, names[0], index)};"])


for _op in _SEPARABLE:
    template(_op)(_separable)


class ConcatLayout:
    """Where each CONCATENATION input's elements sit in the output."""

    def __init__(self, shapes: dict, ins: list[int], out_shape: tuple[int, ...], axis: int):
        self.shapes, self.ins, self.out_shape, self.axis = shapes, ins, out_shape, axis
        self.ends = np.cumsum([shapes[i][axis] for i in ins]).tolist()

    def index(self, k: int) -> str:
        """The C index, in input k, of the output element c0..c{rank-1}."""
        begin = self.ends[k - 1] if k else 0
        coords = [f"c{j}" if j != self.axis or not begin else f"c{j} - {begin}" for j in range(len(self.out_shape))]
        return linear(list(zip(coords, strides(self.shapes[self.ins[k]]))))

    def select(self, loads: list[str]) -> list[str]:
        """C lines running loads[k] for the elements that come from input k."""
        n = len(loads)
        if n == 1:
            return loads
        lines = [f"{'if' if k == 0 else 'else if'} (c{self.axis} < {self.ends[k]}) {loads[k]}" for k in range(n - 1)]
        return lines + [f"else {loads[-1]}"]


def concat_layout(ctx: OpContext, shapes: dict, ins: list[int], y: int, n: int) -> ConcatLayout | None:
    """The layout of a CONCATENATION (axis input n), or None when the shapes disagree."""
    layout = ConcatLayout(shapes, ins, shapes[y], norm_axis(int(ctx.scalar(n)), len(shapes[y])))
    return layout if layout.ends[-1] == shapes[y][layout.axis] else None


@template(Op.CONCATENATION)
def _concatenation(ctx: OpContext, shapes: dict) -> Template | None:
    n = ctx.num_inputs - 1
    ins = list(ctx.operation.inputs[:n])
    y = ctx.operation.outputs[0]
    if not same_copy_type(ctx, range(n)) or not params_known(ctx, [n]) or not nonempty(shapes, [*ins, y]):
        return None
    layout = concat_layout(ctx, shapes, ins, y, n)
    if layout is None:
        return None
    t = ctype(ctx, 0)

    def body(names: list[str], d: Dialect) -> list[str]:
        return ["float acc;", *layout.select([f"acc = {d.load(t, names[k], layout.index(k))};" for k in range(n)])]

    return Template("concatenation", ins, body)


def _pad(ctx: OpContext, shapes: dict) -> Template | None:
    x, y = ctx.operation.inputs[0], ctx.operation.outputs[0]
    if not same_copy_type(ctx, [0]) or not params_known(ctx, range(1, ctx.num_inputs)) or not nonempty(shapes, [x, y]):
        return None
    in_shape = shapes[x]
    pads = movement._paddings(ctx, 1, len(in_shape))
    if [a + n + b for (a, b), n in zip(pads, in_shape)] != list(shapes[y]):
        return None
    dtype = np.int8 if ctx.out_operand(0).type == T.TENSOR_QUANT8_ASYMM_SIGNED else np.uint8
    value = zero_value(ctx) if ctx.num_inputs < 3 else movement._pad_value(ctx, dtype)
    fill = literal(storage_round(float(value), ctx.out_operand(0).type))
    coords = [f"c{k} - {a}" if a else f"c{k}" for k, (a, _) in enumerate(pads)]
    outside = [f"c{k} < {a} || c{k} >= {a + n}" if a else f"c{k} >= {n}"
               for k, ((a, b), n) in enumerate(zip(pads, in_shape)) if a or b]
    index = linear(list(zip(coords, strides(in_shape))))
    t = ctype(ctx, 0)

    def body(names: list[str], d: Dialect) -> list[str]:
        load = d.load(t, names[0], index)
        if not outside:
            return [f"float acc = {load};"]
        return [f"float acc = ({' || '.join(outside)}) ? {fill} : {load};"]

    return Template("pad", [x], body)


template(Op.PAD)(_pad)
template(Op.PAD_V2)(_pad)


@template(Op.GATHER)
def _gather(ctx: OpContext, shapes: dict) -> Template | None:
    """The indices must be constant: out-of-range values then failed the reference at compile time
    (and the index is clamped anyway, so no read leaves the buffer)."""
    x, indices = ctx.operation.inputs[0], ctx.operation.inputs[2]
    y = ctx.operation.outputs[0]
    if not same_copy_type(ctx, [0]) or not params_known(ctx, [1, 2]) or ctx.values[2] is None \
            or not nonempty(shapes, [x, indices, y]):
        return None
    in_shape, idx_shape = shapes[x], shapes[indices]
    axis = norm_axis(int(ctx.scalar(1)), len(in_shape))
    r = len(idx_shape)
    if tuple(shapes[y]) != tuple(in_shape[:axis]) + tuple(idx_shape) + tuple(in_shape[axis + 1:]):
        return None
    sx = strides(in_shape)
    q = linear([(f"c{axis + j}", s) for j, s in enumerate(strides(idx_shape))])
    terms = [(f"c{k}", sx[k]) for k in range(axis)] + [("src", sx[axis])]
    terms += [(f"c{k + r - 1}", sx[k]) for k in range(axis + 1, len(in_shape))]
    t = ctype(ctx, 0)

    def body(names: list[str], d: Dialect) -> list[str]:
        return [f"long src = {d.load('int', names[1], q)};",
                f"src = src < 0 ? 0 : (src >= {in_shape[axis]} ? {in_shape[axis] - 1} : src);",
                f"float acc = {d.load(t, names[0], linear(terms))};"]

    return Template("gather", [x, indices], body)


@template(Op.SPACE_TO_BATCH_ND)
def _space_to_batch(ctx: OpContext, shapes: dict) -> Template | None:
    """Output batch (i * bw + j) * N + b, row r, column q reads the zero-padded input at
    (b, r * bh + i - top, q * bw + j - left); padding reads as the logical zero."""
    x, y = ctx.operation.inputs[0], ctx.operation.outputs[0]
    if not same_copy_type(ctx, [0]) or not params_known(ctx, range(1, ctx.num_inputs)) or not nonempty(shapes, [x, y]):
        return None
    if len(shapes[x]) != 4:
        return None
    nchw = bool(ctx.scalar(3, False))
    bh, bw = space._block(ctx)
    pads = np.asarray(ctx.input(2))
    if pads.shape != (2, 2) or np.any(pads < 0):
        return None
    top, left = int(pads[0][0]), int(pads[1][0])
    n, c, h, w = shapes[x] if nchw else (shapes[x][0], shapes[x][3], shapes[x][1], shapes[x][2])
    oh, ow = (h + top + int(pads[0][1])) // bh, (w + left + int(pads[1][1])) // bw
    if tuple(shapes[y]) != ((n * bh * bw, c, oh, ow) if nchw else (n * bh * bw, oh, ow, c)):
        return None
    ch, row, col = ("c1", "c2", "c3") if nchw else ("c3", "c1", "c2")
    fill = literal(storage_round(zero_value(ctx), ctx.out_operand(0).type))
    t = ctype(ctx, 0)
    at = (f"((b * {c} + {ch}) * {h} + ih) * (long){w} + iw" if nchw
          else f"((b * {h} + ih) * (long){w} + iw) * {c} + {ch}")

    def body(names: list[str], d: Dialect) -> list[str]:
        return [f"long b = c0 % {n}, bi = c0 / {n};",
                f"long ih = {row} * {bh} + bi / {bw} - {top}, iw = {col} * {bw} + bi % {bw} - {left};",
                f"float acc = (ih < 0 || ih >= {h} || iw < 0 || iw >= {w}) ? {fill} : {d.load(t, names[0], at)};"]

    return Template("space_to_batch", [x], body)
