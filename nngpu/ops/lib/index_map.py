"""Device code the data-movement families share (registers nothing).

Most movement operations (TRANSPOSE, SLICE, STRIDED_SLICE, SPLIT, TILE, CHANNEL_SHUFFLE,
BATCH_TO_SPACE_ND, DEPTH_TO_SPACE, SPACE_TO_DEPTH, either layout) read, for each output
element, one input element whose every coordinate is a sum of one term per output axis.
Rather than re-deriving each operation's index rules, `index_map` runs the operation's own
reference on a tensor of flat indices, so the map is the reference's by construction, and fits
each input coordinate to a mixed-radix sum `w0 * (c % r0) + w1 * (c / r0 % r1) + ...` of the
output coordinates (affine, tiled or block-split axes), checking the fit exactly. The other
helpers are the closed forms' shared pieces: constant padding, stored constants, guards."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ...hal.types import OperandType as T
from ...ir import Compute, Coords, Expr, Tensor, const, linear, size_of
from ...ir.tensor import View
from ..node import OpNode
from ..registry import OpContext
from .device import COPYABLE, FLOATS, types_in

# (place, radix, weight): weight * (c / place % radix); radix None for the top digit.
Digit = tuple[int, "int | None", int]
# One input coordinate: its value at the origin and its (output axis, digit) terms.
AxisFit = tuple[int, list[tuple[int, Digit]]]

copyable = types_in(COPYABLE, 0)  # input 0 and every output one copyable type


def require_nonempty(*shapes: Sequence[int]) -> None:
    """ValueError (the host takes the operation) when a tensor is empty: nothing to fit or load."""
    if any(size_of(s) == 0 for s in shapes):
        raise ValueError("an empty tensor")


def source_maps(node: OpNode) -> list[np.ndarray]:
    """Each output element's flat index into input 0, computed by the reference kernel."""
    shape = node.in_shape(0)
    index = np.arange(size_of(shape), dtype=np.int64).reshape(shape)
    ctx = OpContext(node.operation, node.operands, [index, *node.values[1:]], node.relaxed, node.version)
    outs = [np.asarray(o) for o in node.spec.reference(ctx)]
    for k, o in enumerate(outs):
        if o.shape != node.out_shape(k) or o.dtype != np.int64:
            raise ValueError(f"output {k}: the reference gave {o.dtype} {o.shape} for flat indices")
    return outs


def axis_digits(g: np.ndarray) -> list[Digit] | None:
    """g[c] as a mixed-radix sum of c's digits: g[c] == sum(weight * (c // place % radix)), or
    None. Affine maps give one digit, tiled and block-split axes two or three."""
    c = np.arange(len(g), dtype=np.int64)
    digits: list[Digit] = []
    place, predicted = 1, np.zeros(len(g), dtype=np.int64)
    while True:
        weight = int(g[place]) if place < len(g) else 0
        off = np.flatnonzero(predicted + weight * (c // place) != g)
        if not off.size:
            digits.append((place, None, weight))
            return digits
        nxt = int(off[0])  # > place: the digits so far are 0 there
        if nxt % place:
            return None
        digits.append((place, nxt // place, weight))
        predicted = predicted + weight * (c // place % (nxt // place))
        place = nxt


def fit(src: np.ndarray, in_shape: Sequence[int]) -> list[AxisFit] | None:
    """Each input coordinate of the flat source indices `src` as a sum of per-output-axis
    mixed-radix terms, or None when some coordinate is not such a sum."""
    rank = src.ndim
    fits: list[AxisFit] = []
    for coord in np.unravel_index(src, tuple(in_shape)):
        base = int(coord.reshape(-1)[0])
        predicted = np.full(src.shape, base, dtype=np.int64)
        terms: list[tuple[int, Digit]] = []
        for k in range(rank):
            line = [0] * rank
            line[k] = slice(None)
            g = coord[tuple(line)] - base
            digits = axis_digits(g)
            if digits is None:
                return None
            view = [1] * rank
            view[k] = src.shape[k]
            predicted = predicted + g.reshape(view)
            terms += [(k, d) for d in digits if d[2]]
        if not np.array_equal(predicted, coord):
            return None
        fits.append((base, terms))
    return fits


def _digit(c: Expr, place: int, radix: int | None) -> Expr:
    d = c if place == 1 else c / place
    return d if radix is None else d % radix


def mapped(x: Tensor, fits: list[AxisFit], shape: Sequence[int]) -> Compute:
    """The output of `shape` whose element reads x at the fitted coordinates."""
    def at(c: Coords) -> Expr:
        axes = [linear([_digit(c[k], p, r) for k, (p, r, _) in terms], [w for _, (_, _, w) in terms], base)
                for base, terms in fits]
        return x.load(Coords(x.shape, axes))
    return Compute(shape, x.dtype, at)


def index_map(node: OpNode, ins: list[Tensor | None]) -> list[Compute | View]:
    """The device implementation of an operation whose outputs copy input 0 by a separable
    index map (ValueError when the map is not one): a View where an output is input 0's
    elements in order."""
    x = ins[0]
    require_nonempty(x.shape, *[node.out_shape(k) for k in range(node.num_outputs)])
    out: list[Compute | View] = []
    for src in source_maps(node):
        if src.size == x.size and np.array_equal(src.reshape(-1), np.arange(src.size)):
            out.append(View(0))
            continue
        fits = fit(src, x.shape)
        if fits is None:
            raise ValueError("the index map is not separable")
        out.append(mapped(x, fits, src.shape))
    return out


def stored_constant(value, operand_type: int) -> Expr:
    """`value` as the output type stores it: float16 rounded first, so that a fused consumer
    sees what the reference stores; quantized and integer values are stored integers."""
    if operand_type in FLOATS:
        dtype = np.float16 if operand_type == T.TENSOR_FLOAT16 else np.float32
        return const(float(np.asarray(value, dtype=dtype)), "float")
    if operand_type == T.TENSOR_BOOL8:
        return const(bool(value), "bool")
    return const(int(value), "int")


def padded(x: Tensor, pads: Sequence[tuple[int, int]], fill: Expr) -> Compute:
    """x with pads[k] = (before, after) elements of `fill` around axis k."""
    shape = tuple(d + a + b for d, (a, b) in zip(x.shape, pads))

    def at(c: Coords) -> Expr:
        axes = [c[k] - a for k, (a, _) in enumerate(pads)]
        value = x.load(Coords(x.shape, axes))
        outside: Expr | None = None
        for k, ((a, b), d) in enumerate(zip(pads, x.shape)):
            for cond in ([c[k] < a] if a else []) + ([c[k] >= a + d] if b else []):
                outside = cond if outside is None else outside | cond
        return value if outside is None else outside.where(fill, value)

    return Compute(shape, x.dtype, at)

