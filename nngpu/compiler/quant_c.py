"""C statements of the reference's fixed-point primitives (nngpu/ops/quant.py), for the quantized
templates: SaturatingRoundingDoublingHighMul, RoundingDivideByPOT, MultiplyByQuantizedMultiplier,
int32 wrap-around and clamps.

The kernel source has no room for helper functions (a template contributes statements only), so
each primitive is emitted as a braced block of statements assigning an existing 64-bit variable.
Arithmetic is written exactly as the numpy reference: int64 products, C division truncating
toward zero where the reference truncates, arithmetic right shifts of negative values (what
numpy's >> does), wrap-around done on unsigned values so it is defined C."""
from __future__ import annotations

from .render import Dialect

INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1


def i64(d: Dialect) -> str:
    """The 64-bit signed type: `long` is 64-bit in OpenCL C, `long long` everywhere in CUDA."""
    return "long long" if d.name == "cuda" else "long"


def u64(d: Dialect) -> str:
    return "unsigned long long" if d.name == "cuda" else "ulong"


def lit(n: int, d: Dialect) -> str:
    """A 64-bit integer literal (INT64-safe for the most negative int32)."""
    suffix = "LL" if d.name == "cuda" else "L"
    if n == INT32_MIN:
        return f"({INT32_MIN + 1}{suffix} - 1{suffix})"
    return f"{n}{suffix}" if n >= 0 else f"({n}{suffix})"


def _val(v: int | str, d: Dialect) -> str:
    return lit(v, d) if isinstance(v, int) else f"(({i64(d)})({v}))"


def wrap32(out: str, x: str, d: Dialect, left: int | str = 0) -> list[str]:
    """out = wrap_int32(x * 2^left): the low 32 bits, sign-extended (unsigned shift: no UB)."""
    shifted = f"(({u64(d)})({x}))" if left == 0 else f"(({u64(d)})({x}) << ({left}))"
    return [f"{out} = ({i64(d)})({shifted} & 0xFFFFFFFFUL);",
            f"{out} -= ({out} & {lit(1 << 31, d)}) << 1;"]


def srdhm(out: str, a: str, b: int | str, d: Dialect) -> list[str]:
    """out = SaturatingRoundingDoublingHighMul(a, b), a and b int32 values held in 64 bits."""
    L = i64(d)
    bv = _val(b, d)
    lines = ["{", f"  {L} q_ab = ({a}) * {bv};",
             f"  {L} q_s = q_ab + (q_ab >= 0 ? {lit(1 << 30, d)} : {lit(1 - (1 << 30), d)});",
             f"  {out} = q_s / {lit(1 << 31, d)};"]  # C division truncates toward zero, as the reference
    if not isinstance(b, int) or b == INT32_MIN:
        lines.append(f"  if (({a}) == {lit(INT32_MIN, d)} && {bv} == {lit(INT32_MIN, d)}) {out} = {lit(INT32_MAX, d)};")
    lines.append("}")
    return lines


def rdbpot(out: str, x: str, exponent: int | str, d: Dialect) -> list[str]:
    """out = RoundingDivideByPOT(x, exponent) (out may be x)."""
    if exponent == 0:
        return [] if out == x else [f"{out} = {x};"]
    L = i64(d)
    return ["{", f"  {L} q_x = {x}; {L} q_mask = ((({L})1) << ({exponent})) - 1;",
            f"  {L} q_thr = (q_mask >> 1) + (q_x < 0 ? 1 : 0);",
            f"  {out} = (q_x >> ({exponent})) + ((q_x & q_mask) > q_thr ? 1 : 0);", "}"]


def mbqm(out: str, x: str, multiplier: int | str, shift: int | str, d: Dialect) -> list[str]:
    """out = MultiplyByQuantizedMultiplier(x, multiplier, shift) (shift > 0: left shift, < 0:
    right shift), `out` an existing 64-bit variable. Python ints are baked in; strings are C
    expressions read at run time (per-channel tables)."""
    L = i64(d)
    if isinstance(shift, int):
        left, right = max(shift, 0), max(-shift, 0)
        if left > 31 or right > 62:
            raise ValueError(f"shift {shift} out of the reference's range")
        lines = ["{", f"  {L} q_w;"]
    else:
        left, right = "q_left", "q_right"
        lines = ["{", f"  {L} q_w; int q_sh = (int)({shift});",
                 "  int q_left = q_sh > 0 ? q_sh : 0, q_right = q_sh > 0 ? 0 : -q_sh;"]
    lines += ["  " + s for s in wrap32("q_w", x, d, left)]
    lines += ["  " + s for s in srdhm("q_w", "q_w", multiplier, d)]
    lines += ["  " + s for s in rdbpot(out, "q_w", right, d)]
    return lines + ["}"]


def clamp(v: str, lo: int | str, hi: int | str) -> str:
    return f"(({v}) < ({lo}) ? ({lo}) : (({v}) > ({hi}) ? ({hi}) : ({v})))"
