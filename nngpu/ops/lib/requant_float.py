"""Requantization of exact float64 accumulators in float64, bit-exact with the int64 reference.

The reference's MultiplyByQuantizedMultiplier(x, M, shift) is, for shift <= 0 (right shift e):
    h = SaturatingRoundingDoublingHighMul(x, M) = floor((x*M + 2^30) / 2^31)      (round half up)
    r = RoundingDivideByPOT(h, e)                                            (round half away)
and the two roundings fold into one floor:
    r = floor(x*m + b)            when h >= 0,   m = M * 2^-(31+e),  b = 1/2 + 2^-(1+e)
    r = floor(x*m + b - 2^-e)     when h < 0, that is when x*m < -2^-(1+e)
(e = 0: r = floor(x*m + 1/2)). A left shift (shift > 0) only scales m. Every term is a multiple
of 2^-(31+e) (2^-31 for a left shift), so while |x*M*2^left| < 2^52 float64 holds each value and
sum exactly and the result is the reference's, bit for bit. That bound, and x fitting int32
unwrapped, is proven from constant weights or checked on each call's accumulators; past it the
int64 path runs.

The gain is passes over memory: about 7 float64 passes in place, against some 25 int64 ones."""
from __future__ import annotations

import numpy as np

from .quant import multiply_by_quantized_multiplier, wrap_int32

_EXACT = float(1 << 52)
# Elements per block of the passes: 256 KiB of float64, which stays in a core's L2.
_BLOCK = 32768


class FloatRequantizer:
    """Per-channel (channels last) requantization of float64 integer accumulators, then the
    output zero point and the activation's clamp [lo, hi]."""

    def __init__(self, mults: np.ndarray, shifts: np.ndarray, zero_point: int, lo: int, hi: int,
                 bound: float | None = None):
        """bound: a proven bound on |accumulator| (from constant weights), which spares each call
        its check when it is within the exact range."""
        self.mults = np.asarray(mults, dtype=np.int64).reshape(-1)
        self.shifts = np.asarray(shifts, dtype=np.int64).reshape(-1)
        self.zero_point, self.lo, self.hi = int(zero_point), int(lo), int(hi)
        left = np.maximum(self.shifts, 0)
        right = np.maximum(-self.shifts, 0)
        self.m = np.ldexp(self.mults.astype(np.float64), left - 31 - right)
        self.b = np.where(right > 0, 0.5 + np.ldexp(1.0, -1 - right), 0.5)
        self.step = np.where(right > 0, np.ldexp(1.0, -right), 0.0)
        self.threshold = -np.ldexp(1.0, -1 - right)
        # The largest |x| for which every channel's terms stay exact and x << left fits int32;
        # 0 (never the float path) for a negative multiplier or a shift too long to stay exact.
        scaled = float(np.max(np.ldexp(self.mults.astype(np.float64), left), initial=1.0))
        self.max_abs = min(_EXACT / max(scaled, 1.0), float(((1 << 31) >> int(left.max(initial=0))) - 1))
        if (self.mults < 0).any() or (right > 20).any():
            self.max_abs = 0.0
        self.checked = bound is None or bound > self.max_abs

    def __call__(self, acc: np.ndarray, out: np.ndarray) -> np.ndarray:
        """acc: float64 accumulators (bias included), overwritten; out: the output buffer."""
        if acc.size == 0:
            return out
        if self.checked and max(-float(acc.min()), float(acc.max())) > self.max_abs:
            return self._int64(acc, out)
        if not (acc.flags.c_contiguous and out.flags.c_contiguous):
            self._rows(acc, out)
            return out
        channels = self.m.size if self.m.size > 1 else acc.shape[-1] if acc.ndim else 1
        flat_acc, flat_out = acc.reshape(-1, channels), out.reshape(-1, channels)
        rows = max(1, _BLOCK // channels)
        for r in range(0, flat_acc.shape[0], rows):       # blocks that stay in cache
            self._rows(flat_acc[r:r + rows], flat_out[r:r + rows])
        return out

    def _rows(self, acc: np.ndarray, out: np.ndarray) -> None:
        np.multiply(acc, self.m, out=acc)
        negative = acc < self.threshold
        np.add(acc, self.b, out=acc)
        np.subtract(acc, self.step, out=acc, where=negative)
        np.floor(acc, out=acc)
        np.clip(acc, self.lo - self.zero_point, self.hi - self.zero_point, out=acc)
        np.add(acc, self.zero_point, out=out, casting="unsafe")

    def _int64(self, acc: np.ndarray, out: np.ndarray) -> np.ndarray:
        total = wrap_int32(np.rint(acc).astype(np.int64))
        y = multiply_by_quantized_multiplier(total, self.mults, self.shifts) + self.zero_point
        np.copyto(out, np.clip(y, self.lo, self.hi), casting="unsafe")
        return out
