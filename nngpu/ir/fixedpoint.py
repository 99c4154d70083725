"""The reference's fixed-point primitives (nngpu/ops/lib/quant.py) as device helpers, bit-exact:
int32 wrap-around, SaturatingRoundingDoublingHighMul, RoundingDivideByPOT and
MultiplyByQuantizedMultiplier.

Arithmetic is written as the numpy reference does it: 64-bit products, C division truncating
toward zero where the reference truncates, arithmetic right shifts of negative values (what
numpy's >> does), wrap-around on unsigned values so that it is defined C."""
from __future__ import annotations

from .expr import Call, Expr, Helper, as_expr

WRAP32 = Helper("nn_wrap32", "long", """
$qualifier $i64 nn_wrap32($i64 x) {
    $i64 w = ($i64)(($u64)x & 0xFFFFFFFF$UL);
    return w - ((w & 0x80000000$L) << 1);
}""")

SRDHM = Helper("nn_srdhm", "long", """
$qualifier $i64 nn_srdhm($i64 a, $i64 b) {
    if (a == b && a == -2147483647$L - 1) return 2147483647$L;
    $i64 ab = a * b;
    $i64 s = ab + (ab >= 0 ? (1$L << 30) : (1$L - (1$L << 30)));
    return s / (1$L << 31);
}""")

RDBPOT = Helper("nn_rdbpot", "long", """
$qualifier $i64 nn_rdbpot($i64 x, int exponent) {
    $i64 mask = (1$L << exponent) - 1;
    $i64 threshold = (mask >> 1) + (x < 0 ? 1 : 0);
    return (x >> exponent) + ((x & mask) > threshold ? 1 : 0);
}""")

MBQM = Helper("nn_mbqm", "long", """
$qualifier $i64 nn_mbqm($i64 x, $i64 multiplier, int shift) {
    int left = shift > 0 ? shift : 0, right = shift > 0 ? 0 : -shift;
    return nn_rdbpot(nn_srdhm(nn_wrap32(($i64)(($u64)x << left)), multiplier), right);
}""", (WRAP32, SRDHM, RDBPOT))


def _long(x) -> Expr:
    return as_expr(x, "long").cast("long")


def _int(x) -> Expr:
    return as_expr(x, "int").cast("int")


def wrap32(x) -> Expr:
    """x wrapped to int32 (as a 64-bit value)."""
    return Call(WRAP32, [_long(x)])


def srdhm(a, b) -> Expr:
    return Call(SRDHM, [_long(a), _long(b)])


def rdbpot(x, exponent) -> Expr:
    return Call(RDBPOT, [_long(x), _int(exponent)])


def mbqm(x, multiplier, shift) -> Expr:
    """MultiplyByQuantizedMultiplier(x, multiplier, shift): shift > 0 shifts left first, < 0
    right after the multiply."""
    return Call(MBQM, [_long(x), _long(multiplier), _int(shift)])
