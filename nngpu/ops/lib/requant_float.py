"""Requantization of exact float accumulators in float64, bit-exact with the int64 reference.

The reference's MultiplyByQuantizedMultiplier(x, M, shift) is, for shift <= 0 (right shift e):
    h = SaturatingRoundingDoublingHighMul(x, M) = floor((x*M + 2^30) / 2^31)      (round half up)
    r = RoundingDivideByPOT(h, e)                                            (round half away)
and the two roundings fold into one floor:
    r = floor(x*m + b)            when h >= 0,   m = M * 2^-(31+e),  b = 1/2 + 2^-(1+e)
    r = floor(x*m + b - 2^-e)     when h < 0, that is when x*m + b < 1/2
(e = 0: r = floor(x*m + 1/2)). A left shift (shift > 0) only scales m. With x = acc + bias the
bias folds into the offset, and so does the output zero point (an integer moves a floor by
itself). Every term is a multiple of 2^-(31+e) (2^-31 for a left shift): while each value and
sum stays below 2^53 of those units, float64 holds it exactly and the result is the
reference's, bit for bit. A long right shift makes the units too fine; then two floors, h as
above and RoundingDivideByPOT as floor(h * 2^-e + 1/2 [- 2^-e]), keep exact over a wide range.
Those ranges, and x fitting int32 unwrapped, are proven from constant weights or checked per
channel on each call's accumulators; past them the int64 path runs.

When h < 0, r <= 0 either way; if the clamp's lower end is at or above the zero point (a fused
RELU or RELU6), both are clamped alike and the correction for h < 0 is skipped.

The gain is passes over memory: five to nine float64 passes on blocks that stay in cache,
against some 25 int64 ones over the whole tensor."""
from __future__ import annotations

import numpy as np

from . import jit
from .byte_tables import as_words
from .quant import multiply_by_quantized_multiplier, wrap_int32

# Elements per block of the passes: 256 KiB of float64, which stays in a core's L2.
_BLOCK = 32768
# The per-channel terms of the passes, tiled per block shape.
_TERMS = ("m", "offset", "m_high", "high_offset", "scale", "step")


class FloatRequantizer:
    """Per-channel (channels last) requantization of integer-valued float accumulators plus a
    per-channel int32 bias, then the output zero point and the activation's clamp [lo, hi]."""

    def __init__(self, mults: np.ndarray, shifts: np.ndarray, zero_point: int, lo: int, hi: int,
                 bias: np.ndarray | None = None, bound: float | np.ndarray | None = None):
        """bound: a proven bound on |accumulator| + |bias| (from constant weights), one or per
        channel, which spares each call its check when it is within an exact range."""
        self.mults = np.asarray(mults, dtype=np.int64).reshape(-1)
        self.shifts = np.asarray(shifts, dtype=np.int64).reshape(-1)
        self.bias = np.zeros(1) if bias is None else np.asarray(bias, dtype=np.float64).reshape(-1)
        self.zero_point, self.lo, self.hi = int(zero_point), int(lo), int(hi)
        # The clamped results are stored as bytes of value + lift (>= 0), so that the float to
        # integer conversion, which truncates, floors; int8 bytes then get their sign bit back.
        self.lift = 128 if -128 <= lo and hi <= 127 and lo < 0 else 0
        base = self.zero_point + self.lift      # an integer: it moves the floor by itself
        left = np.maximum(self.shifts, 0)
        right = np.maximum(-self.shifts, 0)
        # One floor: t = acc*m + offset.
        self.m = np.ldexp(self.mults.astype(np.float64), left - 31 - right)
        self.offset = np.where(right > 0, 0.5 + np.ldexp(1.0, -1 - right), 0.5) + self.bias * self.m + base
        # Two floors, for long right shifts: h = floor(acc*m_high + high_offset), then
        # t = h * 2^-e + 1/2 + base; each stays exact over a far wider range.
        self.m_high = np.ldexp(self.mults.astype(np.float64), left - 31)
        self.high_offset = 0.5 + self.bias * self.m_high
        self.scale = np.ldexp(1.0, -right)
        self.step = np.where(right > 0, np.ldexp(1.0, -right), 0.0)
        self.negative_below = 0.5 + base
        self.corrects = bool((self.step > 0).any()) and self.lo < self.zero_point
        # Per channel, the largest |acc|, |bias| and |acc + bias| for which every term stays
        # below 2^53 units (2^-(31+e), the offset's integer part included, for one floor; 2^-31
        # for the first of two floors) and the int32 sum needs no wrap. 0: never (a negative
        # multiplier).
        scaled = np.ldexp(np.maximum(self.mults, 1).astype(np.float64), left)
        fits = float(((1 << 31) >> int(left.max(initial=0))) - 1)
        room = 2.0 ** 53 - np.ldexp(1.0, 30 + right) * (4 + 2 * abs(base))
        self.limit_one = np.minimum(np.maximum(room, 0) / scaled, fits)
        self.limit_two = np.minimum((2.0 ** 53 - 2.0 ** 31) / scaled, fits)
        if (self.mults < 0).any() or (right > 40).any():
            self.limit_one = self.limit_two = np.zeros(1)
        self.max_one, self.max_two = float(self.limit_one.min()), float(self.limit_two.min())
        # Proven from `bound`, channel by channel: False one floor, True two, None check each call.
        self._proven: bool | None = None
        if bound is not None:
            if (np.asarray(bound, np.float64) <= self.limit_one).all():
                self._proven = False
            elif (np.asarray(bound, np.float64) <= self.limit_two).all():
                self._proven = True
        self._tiles: dict[tuple[int, int], dict[str, np.ndarray]] = {}
        self._per_channel: dict[int, np.ndarray] = {}

    @property
    def checked(self) -> bool:
        """Whether each call checks its accumulators' range (no proven bound within range)."""
        return self._proven is None

    def __call__(self, acc: np.ndarray, out: np.ndarray, table: np.ndarray | None = None) -> np.ndarray:
        """acc: integer-valued float32 or float64 accumulators, read only; out: the output, or
        with a 256-entry table (a fused 8-bit lookup), table[stored byte of the output]."""
        if acc.size == 0:
            return out
        two = self._floors(acc)
        loops = jit.kernels()
        if loops is not None and two is not None and out.flags.c_contiguous:
            self._compiled(loops, acc, out, two, table)
            return out
        if table is not None:
            values = self(acc, np.empty(out.shape, np.int16))
            np.take(table, np.bitwise_and(values, 0xFF), out=out)
            return out
        if two is None:
            return self._int64(acc, out)
        if not (acc.flags.c_contiguous and out.flags.c_contiguous):
            terms = {k: getattr(self, k) for k in _TERMS}
            self._block(acc.astype(np.float64), out, terms, two)
            return out
        channels = acc.shape[-1] if acc.ndim else 1
        flat_acc, flat_out = acc.reshape(-1, channels), out.reshape(-1, channels)
        rows = min(max(1, _BLOCK // channels), flat_acc.shape[0])
        t, terms = np.empty((rows, channels)), self._tiled(rows, channels)
        for r in range(0, flat_acc.shape[0], rows):       # blocks that stay in cache
            block = flat_acc[r:r + rows]
            k = block.shape[0]
            np.copyto(t[:k], block)
            self._block(t[:k], flat_out[r:r + rows], {n: v[:k] for n, v in terms.items()}, two)
        return out

    def fused_terms(self, channels: int) -> tuple[np.ndarray, np.ndarray]:
        """The compiled loops' form of this requantizer for `channels` channels: the per-channel
        terms [len(TERMS), channels] and the limits (below, low, high, lift), float64."""
        terms = self._per_channel.get(channels)
        if terms is None:
            rows = {k: getattr(self, k) for k in jit.TERMS}
            rows["step"] = self.step if self.corrects else np.zeros(1)
            terms = np.stack([np.broadcast_to(rows[k], channels) for k in jit.TERMS]).astype(np.float64)
            self._per_channel = {channels: terms}
        limits = np.array([self.negative_below, self.lo + self.lift, self.hi + self.lift, self.lift], np.float64)
        return terms, limits

    @property
    def proven_two_floors(self) -> bool | None:
        """With a proven bound, whether it takes two floors; None without one (each call checks)."""
        return self._proven

    def _floors(self, acc: np.ndarray) -> bool | None:
        """Whether these accumulators take two floors (False: one), or None: the int64 path."""
        if self._proven is not None:
            return self._proven
        need = self._need(acc)
        if (need <= self.limit_one).all():
            return False
        return True if (need <= self.limit_two).all() else None

    def _compiled(self, loops, acc: np.ndarray, out: np.ndarray, two: bool, table: np.ndarray | None) -> None:
        """The same passes as _block, fused into one compiled loop over the whole array."""
        channels = acc.shape[-1] if acc.ndim else 1
        terms, limits = self.fused_terms(channels)
        rows = out.reshape(-1, channels)
        if table is not None:                 # entries copied as words: any type (float16 too)
            table, rows = as_words(table, rows)
        loops.requantize(acc.reshape(-1, channels), terms, limits, two, table, rows)

    def _need(self, acc: np.ndarray) -> np.ndarray:
        """Per channel, the largest of |acc|, |bias| and |acc + bias| over this call's values."""
        rows = acc.reshape(-1, acc.shape[-1]) if acc.ndim else acc.reshape(1, 1)
        loops = jit.kernels()
        if loops is not None:
            need = np.empty(rows.shape[1])
            loops.channel_need(rows, self.fused_terms(rows.shape[1])[0][jit.TERMS.index("bias")], need)
            return need
        low, high = rows.min(axis=0).astype(np.float64), rows.max(axis=0).astype(np.float64)
        need = np.maximum(np.maximum(np.abs(low), np.abs(high)),
                          np.maximum(np.abs(low + self.bias), np.abs(high + self.bias)))
        return np.maximum(need, np.abs(self.bias))

    def _tiled(self, rows: int, channels: int) -> dict[str, np.ndarray]:
        """The per-channel terms tiled to a block's shape: plain elementwise passes run faster
        than ones that broadcast a short channel vector."""
        if (rows, channels) not in self._tiles:
            self._tiles = {(rows, channels): {k: np.ascontiguousarray(np.broadcast_to(getattr(self, k), (rows, channels)))
                                              for k in _TERMS}}
        return self._tiles[(rows, channels)]

    def _block(self, t: np.ndarray, out: np.ndarray, terms: dict[str, np.ndarray], two: bool) -> None:
        """t: float64 accumulators, overwritten."""
        if two:
            np.multiply(t, terms["m_high"], out=t)
            np.add(t, terms["high_offset"], out=t)
            np.floor(t, out=t)
            np.multiply(t, terms["scale"], out=t)
            np.add(t, self.negative_below, out=t)
        else:
            np.multiply(t, terms["m"], out=t)
            np.add(t, terms["offset"], out=t)
        if self.corrects:       # t -= step where t is below: as arithmetic, not a branch per element
            below = np.less(t, self.negative_below, out=np.empty_like(t), casting="unsafe")
            np.multiply(below, terms["step"], out=below)
            np.subtract(t, below, out=t)
        low, high = self.lo + self.lift, self.hi + self.lift
        if low >= 0 and out.dtype in (np.uint8, np.int8):
            np.clip(t, low, high, out=t)                  # then truncation is floor
            stored = out.view(np.uint8)
            np.copyto(stored, t, casting="unsafe")
            if self.lift:
                np.bitwise_xor(stored, 0x80, out=stored)
            return
        np.floor(t, out=t)
        np.clip(t, low, high, out=t)
        np.subtract(t, self.lift, out=out, casting="unsafe")

    def _int64(self, acc: np.ndarray, out: np.ndarray) -> np.ndarray:
        total = wrap_int32(np.rint(acc).astype(np.int64) + self.bias.astype(np.int64))
        y = multiply_by_quantized_multiplier(total, self.mults, self.shifts) + self.zero_point
        np.copyto(out, np.clip(y, self.lo, self.hi), casting="unsafe")
        return out
