"""QUANTIZED_LSTM (HAL 1.3): one step of the fully integer LSTM, bit-exact with the reference
integer kernel ("8x8_16": int8 activations and weights, int16 gates and cell state).

Each gate is two int8 matmuls (input, recurrent) rescaled to its intermediate int16 scale and
accumulated with int16 saturation, plus optional peephole and integer layer normalization, then
the gemmlowp int16 sigmoid (Q3.12 in) or tanh. The int16 cell state has 15 + log2(scale)
integer bits; the int8 hidden state has the given scale and zero point and is optionally
projected to the output.

Where the reference drops or misreads data it clearly means to use, the TFLite kernel it was
ported from is followed: the gate bias is added to the matmul when there is no layer norm, input
and forget peepholes read the previous cell state, peephole weights span numUnits, and the
projection clip is in output units.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from ..hal.types import OperandLifeTime, OperationType
from ..hal.types import OperandType as T
from .lib.fixedpoint_int16 import fx_logistic, fx_tanh
from .lib.quant import (
    multiply_by_quantized_multiplier,
    quantize_multiplier,
    round_half_away,
    rounding_divide_by_pot,
    saturating_rounding_doubling_high_mul,
    wrap_int32,
)
from .registry import HalVersion, OpContext, OpError, OpSpec, register, sig

# ---- operand layout ------------------------------------------------------------------------
INPUT = 0
IN_W = (1, 2, 3, 4)           # input-to-{input, forget, cell, output} weights
REC_W = (5, 6, 7, 8)          # recurrent-to-...
PEEP_W = (9, 10, 11)          # cell-to-{input, forget, output}
BIAS = (12, 13, 14, 15)
PROJ_W, PROJ_B = 16, 17
PREV_OUT, PREV_CELL = 18, 19
LN_W = (20, 21, 22, 23)
CELL_CLIP, PROJ_CLIP = 24, 25
INTER_SCALE = (26, 27, 28, 29)
HIDDEN_ZP, HIDDEN_SCALE = 30, 31
NUM_INPUTS = 32

# gate index into the 4-tuples above
G_IN, G_FORGET, G_CELL, G_OUT = range(4)
PEEP_OF_GATE = {G_IN: 0, G_FORGET: 1, G_OUT: 2}

REQUIRED = (INPUT, 2, 3, 4, 6, 7, 8, 13, 14, 15, PREV_OUT, PREV_CELL) + INTER_SCALE + (HIDDEN_ZP, HIDDEN_SCALE)
OPTIONAL = (1, 5, 9, 10, 11, 12, PROJ_W, PROJ_B, 20, 21, 22, 23)

I16_MIN, I16_MAX = -32768, 32767
INT32_MAX = (1 << 31) - 1


# ---- presence rules (the reference's prepare) ----------------------------------------------

def _presence_error(has) -> str | None:
    """Why this set of present optional inputs is not a valid configuration, or None."""
    cifg = not has(1)
    if has(1) != has(5):
        return "input-to-input and recurrent-to-input weights must be given together"
    peep = [has(i) for i in PEEP_W]
    if not ((peep[0] or cifg) and peep[1] and peep[2]) and any(peep):
        return "peephole weights must be all given or all omitted"
    if has(12) == cifg:
        return "the input gate bias must be given exactly when CIFG is not used"
    ln = [has(i) for i in LN_W]
    if cifg:
        if ln[0]:
            return "input layer norm weights given with CIFG"
        if any(ln[1:]) and not all(ln[1:]):
            return "layer norm weights must be all given or all omitted"
    elif any(ln) and not all(ln):
        return "layer norm weights must be all given or all omitted"
    return None


def _validate(ctx: OpContext) -> None:
    """Prepare-time rules: required inputs present, the cell scale and the constant scalars
    usable; some completion of the optional inputs that are model inputs (present or not only
    at execution) must be a valid configuration."""
    for i in REQUIRED:
        if ctx.is_omitted(i):
            raise OpError(f"required input {i} is omitted")
    _cell_shift(ctx)
    for i in INTER_SCALE + (HIDDEN_SCALE,):
        if ctx.values[i] is not None:
            _positive_scalar(ctx, i, f"input {i}")
    if ctx.values[HIDDEN_ZP] is not None:
        _hidden_zero_point(ctx)
    known: dict[int, bool] = {}
    unknown = []
    for i in OPTIONAL:
        if ctx.is_omitted(i):
            known[i] = False
        elif ctx.in_operand(i).lifetime == OperandLifeTime.SUBGRAPH_INPUT:
            unknown.append(i)
        else:
            known[i] = True
    first = None
    for bits in itertools.product((False, True), repeat=len(unknown)):
        state = {**known, **dict(zip(unknown, bits))}
        err = _presence_error(state.__getitem__)
        if err is None:
            return
        first = first or err
    raise OpError(first)


# ---- integer primitives of the reference ---------------------------------------------------

def _f32(x) -> np.float32:
    return np.float32(x)


def _multiplier(real: float, what: str) -> tuple[int, int]:
    """QuantizeMultiplier, refusing scales the int32 arithmetic cannot represent."""
    if not math.isfinite(real) or real < 0:
        raise OpError(f"{what}: effective scale {real} is not a finite non-negative number")
    m, shift = quantize_multiplier(float(real))
    if shift > 30:
        raise OpError(f"{what}: effective scale {real} is too large")
    return m, shift


def _mbqm(x, mult: tuple[int, int]):
    return multiply_by_quantized_multiplier(x, mult[0], mult[1])


def _effective_bias(weights: np.ndarray, zero_point: int, bias: np.ndarray | None) -> np.ndarray:
    """PrecomputeZeroPointTimesWeightWithBias: bias + zero_point * row sums, in int32."""
    rows = weights.astype(np.int64).sum(axis=1)
    base = np.zeros(weights.shape[0], np.int64) if bias is None else bias.astype(np.int64)
    return wrap_int32(base + wrap_int32(rows * zero_point))


def _mat_acc(x: np.ndarray, weights: np.ndarray, eff_bias: np.ndarray, mult: tuple[int, int],
             acc: np.ndarray, out_zp: int, lo: int, hi: int) -> np.ndarray:
    """MatrixBatchVectorMultiplyAccumulate: acc + rescale(bias + x W^T) + zp, saturated."""
    # int8 products summed in float64 are exact for any realistic inner size (< 2^38)
    dot = (x.astype(np.float64) @ weights.astype(np.float64).T).astype(np.int64)
    raw = wrap_int32(eff_bias[None, :] + dot)
    return np.clip(_mbqm(raw, mult) + out_zp + acc, lo, hi)


def _sat_shl(x, exponent: int):
    """gemmlowp SaturatingRoundingMultiplyByPOT for int32 with a positive exponent."""
    threshold = (1 << (31 - exponent)) - 1
    res = wrap_int32(np.asarray(x, dtype=np.int64) << exponent)
    res = np.where(x > threshold, INT32_MAX, res)
    return np.where(x < -threshold, -INT32_MAX - 1, res)


def _inv_sqrt(value: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """GetInvSqrtQuantizedMultiplierExp(value, reverse_shift=-1) per element: (multiplier, shift)
    with the shift as MultiplyByQuantizedMultiplier takes it (negative: right)."""
    v = np.asarray(value, dtype=np.int64)
    small = v <= 1
    v = np.where(small, 2, v)
    shift = np.full(v.shape, 11, np.int64)
    big = v >= (1 << 29)  # v < 2^31, so one division by 4 suffices
    v = np.where(big, v // 4, v)
    shift = shift + big
    clz = 32 - np.frexp(v.astype(np.float64))[1].astype(np.int64)  # exact bit length of v
    pairs = (clz - 1) // 2 - 1
    shift = shift - pairs
    v = v << (2 * pairs)
    # Newton-Raphson for 1/sqrt in Q3.28 (int32 fixed point, 3 integer bits)
    half_input = rounding_divide_by_pot(v >> 1, 1)
    half_three = (1 << 28) + (1 << 27)
    x = np.full(v.shape, 1 << 28, np.int64)
    for _ in range(5):
        x3 = _sat_shl(saturating_rounding_doubling_high_mul(saturating_rounding_doubling_high_mul(x, x), x), 6)
        diff = wrap_int32(saturating_rounding_doubling_high_mul(half_three, x)
                          - saturating_rounding_doubling_high_mul(half_input, x3))
        x = _sat_shl(diff, 3)
    x = saturating_rounding_doubling_high_mul(x, 1518500250)  # * sqrt(2)/2
    neg = shift < 0
    x = np.where(neg, wrap_int32(x << np.where(neg, -shift, 0)), x)
    shift = np.where(neg, 0, shift)
    return np.where(small, INT32_MAX, x), np.where(small, 0, -shift)


def _layer_norm(gate: np.ndarray, weights: np.ndarray, bias: np.ndarray, mult: tuple[int, int],
                guard: int) -> np.ndarray:
    """ApplyLayerNorm: integer mean/variance per batch row, scaled by the weights plus bias."""
    batch, n = gate.shape
    if batch == 0 or n == 0:
        return gate
    s = gate.sum(axis=1)
    sq = (gate * gate).sum(axis=1)
    mean = _tdiv(s * 1024, n)
    variance = sq * ((1 << 20) // n) - mean * mean
    var2 = _tdiv(variance, 1 << 20)
    var2 = np.where(var2 < 1, guard, var2)
    inv_a, inv_b = _inv_sqrt(var2)
    shifted = 1024 * gate - mean[:, None]
    rescaled = multiply_by_quantized_multiplier(shifted, inv_a[:, None], inv_b[:, None])
    val3 = wrap_int32(rescaled * weights.astype(np.int64) + bias.astype(np.int64))  # int32 in the C
    val4 = _tdiv(np.where(val3 > 0, val3 + 512, val3 - 512), 1024)
    val5 = multiply_by_quantized_multiplier(val4, mult[0], mult[1] + 12)
    return np.clip(val5, I16_MIN, I16_MAX)


def _tdiv(a, d: int):
    """C integer division (truncates toward zero)."""
    a = np.asarray(a, dtype=np.int64)
    q = np.abs(a) // d
    return np.where(a < 0, -q, q)


def _wrap16(x):
    return ((np.asarray(x, dtype=np.int64) + 32768) & 0xFFFF) - 32768


def _checked_log2(x: float) -> int | None:
    """CheckedLog2: log2(x) when x is (within 1e-3 in the exponent) a power of two."""
    if not x > 0 or not math.isfinite(x):
        return None
    lg = math.log(x) / math.log(2.0)
    r = int(round_half_away(lg))
    return r if abs(lg - r) < 1e-3 else None


# ---- the cell ------------------------------------------------------------------------------

@dataclass
class Gate:
    w_in: np.ndarray
    w_rec: np.ndarray
    bias_in: np.ndarray       # effective bias of the input matmul
    bias_rec: np.ndarray
    m_in: tuple[int, int]
    m_rec: tuple[int, int]
    peep: np.ndarray | None = None
    m_peep: tuple[int, int] | None = None
    ln: np.ndarray | None = None
    ln_bias: np.ndarray | None = None
    m_ln: tuple[int, int] | None = None
    ln_guard: int = 1

    def preactivation(self, x: np.ndarray, h: np.ndarray, cell: np.ndarray) -> np.ndarray:
        g = np.zeros((x.shape[0], self.w_in.shape[0]), np.int64)
        g = _mat_acc(x, self.w_in, self.bias_in, self.m_in, g, 0, I16_MIN, I16_MAX)
        g = _mat_acc(h, self.w_rec, self.bias_rec, self.m_rec, g, 0, I16_MIN, I16_MAX)
        if self.peep is not None:
            prod = _mbqm(self.peep.astype(np.int64)[None, :] * cell, self.m_peep)
            g = np.clip(prod + g, I16_MIN, I16_MAX)
        if self.ln is not None:
            g = _layer_norm(g, self.ln, self.ln_bias, self.m_ln, self.ln_guard)
        return g


def _sigmoid(v: np.ndarray) -> np.ndarray:
    """The gate sigmoid: Q3.12 in, Q0.15 out."""
    return fx_logistic(v, 3)


def _opt(ctx: OpContext, i: int) -> np.ndarray | None:
    return ctx.input(i) if ctx.has_input(i) else None


def _scale(ctx: OpContext, i: int) -> np.float32:
    return _f32(ctx.in_operand(i).scale)


def _positive_scalar(ctx: OpContext, i: int, what: str) -> np.float32:
    v = _f32(ctx.scalar(i))
    if not (v > 0 and math.isfinite(v)):
        raise OpError(f"{what} must be positive, got {v}")
    return v


def _cell_shift(ctx: OpContext) -> int:
    """log2 of the cell state scale; the reference needs 2^-15 ... 2^-9 (tanh of 0..6 integer
    bits)."""
    shift = _checked_log2(float(_scale(ctx, PREV_CELL)))
    if shift is None or not -15 <= shift <= -9:
        raise OpError("cell state scale must be a power of two between 2^-15 and 2^-9")
    return shift


def _hidden_zero_point(ctx: OpContext) -> int:
    zp = int(ctx.scalar(HIDDEN_ZP))
    if not -128 <= zp <= 127:
        raise OpError("hidden state zero point must fit int8")
    return zp


def _check_shapes(node: OpContext) -> tuple[int, int, int]:
    """The reference's prepare: presence rules and shapes. Returns (batch, numUnits,
    outputSize)."""
    for i in REQUIRED:
        if not node.given(i):
            raise OpError(f"required input {i} has no value")
    err = _presence_error(lambda i: node.given(i))
    if err:
        raise OpError(err)
    x, w_out = node.in_shape(INPUT), node.in_shape(REC_W[G_OUT])
    if len(x) != 2 or len(w_out) != 2:
        raise OpError("input and recurrent weights must be 2-D")
    (batch, n_input), (n_cell, n_output) = x, w_out
    expected = {PROJ_W: (n_output, n_cell), PROJ_B: (n_output,), PREV_OUT: (batch, n_output),
                PREV_CELL: (batch, n_cell)}
    for g in range(4):
        expected |= {IN_W[g]: (n_cell, n_input), REC_W[g]: (n_cell, n_output), BIAS[g]: (n_cell,),
                     LN_W[g]: (n_cell,)}
    expected |= {i: (n_cell,) for i in PEEP_W}
    for i, shape in expected.items():
        if node.given(i) and node.in_shape(i) != shape:
            raise OpError(f"input {i} has shape {list(node.in_shape(i))}, expected {list(shape)}")
    if not node.given(PROJ_W) and n_output != n_cell:
        raise OpError("without projection the output size must equal the number of units")
    return batch, n_cell, n_output


def _shape(node: OpContext) -> list[tuple[int, ...]]:
    """output state [batch, outputSize], cell state [batch, numUnits], output."""
    batch, n_cell, n_output = _check_shapes(node)
    return [(batch, n_output), (batch, n_cell), (batch, n_output)]


def _gate(ctx: OpContext, g: int, inter: np.float32, cell_shift: int) -> Gate:
    """One gate's weights with its effective biases and multipliers."""
    in_scale, in_zp = _scale(ctx, INPUT), ctx.in_operand(INPUT).zeroPoint
    out_scale, out_zp = _scale(ctx, PREV_OUT), ctx.in_operand(PREV_OUT).zeroPoint
    w_in, w_rec = ctx.input(IN_W[g]), ctx.input(REC_W[g])
    ln = _opt(ctx, LN_W[g])
    bias = ctx.input(BIAS[g])
    # products and quotients of float scales are float32 in the reference
    gate = Gate(w_in, w_rec,
                _effective_bias(w_in, -in_zp, None if ln is not None else bias),
                _effective_bias(w_rec, -out_zp, None),
                _multiplier(float(_scale(ctx, IN_W[g]) * in_scale / inter), f"input-to-gate {g}"),
                _multiplier(float(_scale(ctx, REC_W[g]) * out_scale / inter), f"recurrent-to-gate {g}"))
    if g in PEEP_OF_GATE and ctx.has_input(PEEP_W[PEEP_OF_GATE[g]]):
        k = PEEP_W[PEEP_OF_GATE[g]]
        gate.peep = ctx.input(k)
        # 2^cellShift is a double there, so the quotient is too, stored as float
        gate.m_peep = _multiplier(float(_f32(2.0 ** cell_shift * float(_scale(ctx, k)) / float(inter))),
                                  f"cell-to-gate {g}")
    if ln is not None:
        ln_scale = _scale(ctx, LN_W[g])
        gate.ln, gate.ln_bias = ln, bias
        gate.m_ln = _multiplier(float(ln_scale), f"layer norm {g}")
        # min, not max, as in the reference (and TFLite of its time): the guard is 0 or 1,
        # and both mean "use 1" to GetInvSqrtQuantizedMultiplierExp
        gate.ln_guard = min(1, int(_f32(10000) * ln_scale))
    return gate


def _clip_bound(clip: float, scale: np.float32, limit: int) -> int:
    """A clip threshold in quantized units (float32 quotient, truncated); 0: no clipping."""
    if not clip > 0:
        return 0
    return int(min(max(_f32(clip) / scale, -float(limit + 1)), float(limit)))


def _reference(ctx: OpContext) -> list[np.ndarray]:
    batch, n_cell, n_output = _check_shapes(ctx)
    cifg = not ctx.has_input(IN_W[G_IN])
    cell_shift = _cell_shift(ctx)
    inter = [_positive_scalar(ctx, INTER_SCALE[g], f"intermediate scale {g}") for g in range(4)]
    hidden_scale = _positive_scalar(ctx, HIDDEN_SCALE, "hidden state scale")
    hidden_zp = _hidden_zero_point(ctx)
    gates = {g: _gate(ctx, g, inter[g], cell_shift) for g in ((G_FORGET, G_CELL, G_OUT) if cifg else range(4))}
    out_scale, out_zp = _scale(ctx, PREV_OUT), ctx.in_operand(PREV_OUT).zeroPoint
    x, h, c = (ctx.input(i).astype(np.int64) for i in (INPUT, PREV_OUT, PREV_CELL))

    f = _sigmoid(gates[G_FORGET].preactivation(x, h, c))
    g_cell = fx_tanh(gates[G_CELL].preactivation(x, h, c), 3)
    i = I16_MAX - f if cifg else _sigmoid(gates[G_IN].preactivation(x, h, c))
    # f * c_prev keeps the cell scale; i * g (Q0.15 * Q0.15) is rescaled to it
    fc = _wrap16(rounding_divide_by_pot(f * c, 15))
    ig = _wrap16(rounding_divide_by_pot(i * g_cell, 30 + cell_shift))
    cell = np.clip(fc + ig, I16_MIN, I16_MAX)
    q_clip = _clip_bound(float(ctx.scalar(CELL_CLIP, 0.0)), _scale(ctx, PREV_CELL), I16_MAX)
    if q_clip > 0:
        cell = np.clip(cell, -q_clip, q_clip)

    o = _sigmoid(gates[G_OUT].preactivation(x, h, cell))  # the output peephole sees the new cell
    t = fx_tanh(cell, 15 + cell_shift)
    m_hidden = _multiplier(float(_f32(2.0 ** -15 / float(hidden_scale) * 2.0 ** -15)), "hidden state")
    # the reference subtracts the hidden zero point here and adds zp * row sums back in the
    # projection, so the hidden int8 value means scale * (q + zp)
    out = np.clip(_mbqm(o * t, m_hidden) - hidden_zp, -128, 127)

    proj_w = _opt(ctx, PROJ_W)
    if proj_w is not None:
        m_proj = _multiplier(float(_scale(ctx, PROJ_W) * hidden_scale / out_scale), "projection")
        eff = _effective_bias(proj_w, hidden_zp, _opt(ctx, PROJ_B))
        out = _mat_acc(out, proj_w, eff, m_proj, np.zeros((batch, n_output), np.int64), out_zp, -128, 127)
        q_clip = _clip_bound(float(ctx.scalar(PROJ_CLIP, 0.0)), out_scale, 127)
        if q_clip > 0:
            out = np.clip(out, -q_clip, q_clip)
    out = out.astype(np.int8)
    return [out, cell.astype(np.int16), out.copy()]


S8, Q8S, Q16, I32, F32 = (T.TENSOR_QUANT8_ASYMM_SIGNED, T.TENSOR_QUANT8_SYMM, T.TENSOR_QUANT16_SYMM,
                          T.TENSOR_INT32, T.FLOAT32)
_INPUT_TYPES = [S8] + [Q8S] * 8 + [Q16] * 3 + [I32] * 4 + [Q8S, I32, S8, Q16] + [Q16] * 4 \
    + [F32] * 6 + [T.INT32, F32]
assert len(_INPUT_TYPES) == NUM_INPUTS

register(OpSpec(OperationType.QUANTIZED_LSTM,
                [sig(_INPUT_TYPES, [S8, Q16, S8], HalVersion.V1_3)],
                _reference, validate=_validate, shape=_shape))
