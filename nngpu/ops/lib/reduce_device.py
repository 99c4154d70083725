"""Device pieces the reduction, normalization, selection and resize families share (registers
no op): loops over reduced axes and over one axis's slice, the accumulators of the reductions,
and fixed-point / float helpers for bit-exact quantized kernels.

Per-axis normalizations store each slice's statistics once (slice_stats + node.materialize) and
compute every element from them, so their work is linear in the slice (longer slices than
MAX_REDUCED stay on the host; ir/work.py measures it). The renderer computes a Reduce where the
kernel first uses it, so a value that a later loop reads must be used outside that loop first:
the builders write such a use first, or store the value with `node.materialize` (softmax's
slice maximum, ARGMAX's extreme, the means of INSTANCE_NORMALIZATION)."""
from __future__ import annotations

import math
from typing import Sequence

from ...ir import Acc, Const, Coords, Expr, Helper, Loop, Reduce, Tensor, Var, reduce_sum
from ...ir.expr import Call, as_expr
from ...ir.fixedpoint import RDBPOT, SRDHM, WRAP32
from ..node import OpNode

MAX_SLICE = 1 << 16      # longer slices for a per-element loop along the axis (LRN's window): host
MAX_REDUCED = 1 << 20    # the same for the elements one reduction output (one slice's statistic) reads


# ---- loops ---------------------------------------------------------------------------------
def reduced_slice(in_shape: Sequence[int], axes: Sequence[int], keep: bool, out: Coords) -> tuple[list[Loop], Coords]:
    """Loops over the reduced `axes` of an input of `in_shape` for output element `out`, and the
    input coordinates inside them (kept axes are `out`'s, in order, or at their own place with
    keep_dims)."""
    loops: list[Loop] = []
    coords: list[Expr] = []
    kept = 0
    for k, n in enumerate(in_shape):
        if k in axes:
            v = Var(f"r{k}", "long")
            loops.append(Loop(v, int(n)))
            coords.append(v)
        else:
            coords.append(out[k] if keep else out[kept])
            kept += 1
    return loops, Coords(in_shape, coords)


def axis_loop(at: Coords, axis: int, start: Expr | int = 0, stop: Expr | int | None = None,
              name: str = "j") -> tuple[Loop, Coords, Var]:
    """A loop along `axis` of the slice through `at` (from `start` to `stop`, the whole axis by
    default): the loop, the coordinates of its element and the loop counter."""
    j = Var(name, "int")
    loop = Loop(j, at.shape[axis] if stop is None else stop, start)
    return loop, at.replace(axis, j), j


def slice_stats(node: OpNode, axis: int):
    """For statistics stored once per slice along `axis` (node.materialize): their shape (the
    axis reduced to 1), and a statistic's coordinates -> its slice's first input element."""
    shape = node.in_shape(0)
    stats_shape = tuple(1 if k == axis else int(d) for k, d in enumerate(shape))

    def first(c: Coords) -> Coords:
        return Coords(shape, [Const(0, "long") if k == axis else c[k] for k in range(len(shape))])
    return stats_shape, first


def slice_axis(node: OpNode, position: int, limit: int = MAX_SLICE) -> int:
    """The axis (input `position`, -1 when omitted) of a per-axis operation on input 0, as a
    non-negative index; ValueError (host) when invalid, for empty input or slices past `limit`
    (MAX_REDUCED for operations that read a slice once, for its statistics)."""
    shape = node.in_shape(0)
    axis = int(node.scalar(position, -1))
    if not -len(shape) <= axis < len(shape) or 0 in shape or shape[axis] > limit:
        raise ValueError(f"axis {axis} of shape {shape}")
    return axis % len(shape)


def reduced_count(node: OpNode, axes: Sequence[int]) -> int:
    """How many input elements one output of a reduction over `axes` reads (ValueError past
    MAX_REDUCED or for empty tensors)."""
    shape = node.in_shape(0)
    count = math.prod(int(shape[a]) for a in axes)
    if 0 in shape or 0 in node.out_shape(0) or count > MAX_REDUCED:
        raise ValueError(f"reduction of {count} elements in shape {shape}")
    return count


# ---- accumulators --------------------------------------------------------------------------
def maximum(a: Expr, v: Expr) -> Expr:
    """max(a, v), a NaN v winning (np.max propagates NaN)."""
    beats = v > a if v.dtype != "float" else v.ne(v) | (v > a)
    return beats.where(v, a)


def minimum(a: Expr, v: Expr) -> Expr:
    beats = v < a if v.dtype != "float" else v.ne(v) | (v < a)
    return beats.where(v, a)


def extreme(loops: list[Loop], v: Expr, largest: bool) -> Expr:
    """The largest (smallest) `v` over `loops`, NaN winning (-inf / INT32_MIN + 1 when empty)."""
    top = math.inf if v.dtype == "float" else (1 << 31) - 1
    return Reduce(loops, [Acc(as_expr(-top if largest else top, v.dtype), v, maximum if largest else minimum,
                              associative=True)])


def float_sum(loops: list[Loop], v: Expr) -> Expr:
    """A compensated float sum: its error stays below the reference's pairwise summation."""
    return reduce_sum(loops, v, kahan=True)


def slice_extreme(x: Tensor, at: Coords, axis: int, largest: bool = True) -> Expr:
    """The maximum (minimum) of x along `axis` through `at`, NaN winning."""
    loop, c, _ = axis_loop(at, axis, name="m")
    return extreme([loop], x.load(c), largest)


def first_index(x: Tensor, at: Coords, axis: int, best: Expr) -> Expr:
    """The first index along `axis` through `at` where x equals `best` (a NaN `best` matches
    the first NaN, as np.argmax / np.argmin report it). `best` should be loop-invariant
    already (a stored value): an expression the loop is the first to use is computed in it."""
    loop, c, j = axis_loop(at, axis, name="a")
    v = x.load(c)
    match = v.eq(best)
    if v.dtype == "float":
        match = match | (best.ne(best) & v.ne(v))
    n = at.shape[axis]
    return Reduce([loop], [Acc(Const(n, "int"), match.where(j, n), lambda a, b: (b < a).where(b, a))])


# ---- helpers -------------------------------------------------------------------------------
CLZ32 = Helper("nn_clz32", "int", """
$qualifier int nn_clz32($i64 x) {
    $u64 u = ($u64)x & 0xFFFFFFFF$UL;
    int n = 32;
    while (u != 0) { u >>= 1; --n; }
    return n;
}""")

SAT_SHL = Helper("nn_sat_shl", "long", """
$qualifier $i64 nn_sat_shl($i64 x, int n) {
    $i64 y = x * (1$L << n);
    return y > 2147483647$L ? 2147483647$L : (y < -2147483647$L - 1 ? -2147483647$L - 1 : y);
}""")

# gemmlowp one_over_one_plus_x_for_x_in_0_1 (ops/fixedpoint.py): Newton-Raphson 1 / (1 + x).
ONE_OVER_ONE_PLUS_X = Helper("nn_one_over_one_plus_x", "long", """
$qualifier $i64 nn_one_over_one_plus_x($i64 a) {
    $i64 s = a + 2147483647$L;
    $i64 halved = s >= 0 ? (s + 1) / 2 : -((1 - s) / 2);
    $i64 x = nn_wrap32(1515870810$L + nn_srdhm(halved, -1010580540$L));
    for (int k = 0; k < 3; ++k) {
        $i64 one_minus = nn_wrap32((1$L << 29) - nn_srdhm(halved, x));
        x = nn_wrap32(x + nn_sat_shl(nn_srdhm(x, one_minus), 2));
    }
    return nn_sat_shl(x, 1);
}""", (WRAP32, SRDHM, SAT_SHL))

# GetInvSqrtQuantizedMultiplierExp(n, -1) (normalization.inv_sqrt_multiplier): the multiplier
# (part 0) or the shift (part 1, <= 0) of 1 / sqrt(n).
INV_SQRT = Helper("nn_inv_sqrt", "long", """
$qualifier $i64 nn_inv_sqrt($i64 n, int part) {
    if (n <= 1) return part ? 0 : 2147483647$L;
    $i64 x = n;
    int shift = 11;
    for (int k = 0; k < 2; ++k) if (x >= (1$L << 29)) { x /= 4; ++shift; }
    int pairs = (nn_clz32(x) - 1) / 2 - 1;
    shift -= pairs;
    if (part) return shift < 0 ? 0 : -shift;
    x <<= 2 * pairs;
    $i64 half_input = nn_rdbpot(x >> 1, 1);
    $i64 r = 1$L << 28;
    for (int k = 0; k < 5; ++k) {
        $i64 r3 = nn_sat_shl(nn_srdhm(nn_srdhm(r, r), r), 6);
        r = nn_sat_shl(nn_wrap32(nn_srdhm(3$L << 27, r) - nn_srdhm(half_input, r3)), 3);
    }
    r = nn_srdhm(r, 1518500250$L);
    return shift < 0 ? nn_wrap32(($i64)(($u64)r << -shift)) : r;
}""", (WRAP32, SRDHM, RDBPOT, SAT_SHL, CLZ32))

# A float32 product no compiler may fuse into a multiply-add (NVRTC contracts across
# statements by default; OpenCL only within one expression, which a call ends).
MUL_RN = Helper("nn_mul_rn", "float", """
$qualifier float nn_mul_rn(float a, float b) {
#ifdef __CUDACC__
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}""")


def _long(x) -> Expr:
    return as_expr(x, "long").cast("long")


def clz32(x) -> Expr:
    """CountLeadingZeros of x as uint32 (32 for 0)."""
    return Call(CLZ32, [_long(x)])


def one_over_one_plus_x(a) -> Expr:
    return Call(ONE_OVER_ONE_PLUS_X, [_long(a)])


def inv_sqrt(n) -> tuple[Expr, Expr]:
    """(multiplier, shift) with 1 / sqrt(n) ≈ multiplier * 2^(shift - 31), as the reference."""
    n = _long(n)
    return Call(INV_SQRT, [n, Const(0, "int")]), Call(INV_SQRT, [n, Const(1, "int")])


def mul_rn(a: Expr | float, b: Expr | float) -> Expr:
    """a * b in float32, rounded once (never contracted)."""
    return Call(MUL_RN, [as_expr(a, "float").cast("float"), as_expr(b, "float").cast("float")])

