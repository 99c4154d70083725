"""Helpers the mapper families share: option decoding, zero biases, and the quantized
lowerings NNAPI has no single operation for.

Requantization (a quantized tensor to another scale / zero point / 8-bit type) is bit-exact
with TFLite's QUANTIZE kernel (checked on all 256 inputs, tests/tflite/test_lowering.py):
- a type switch at one scale (uint8 <-> int8, zero point moved) is DEQUANTIZE + QUANTIZE: the
  float32 value k * s divided by s rounds back to the integer k, so no rounding step is added;
- any other requantization of an 8-bit tensor is a function of 256 values: a table computed at
  import with TFLite's integer arithmetic, applied with GATHER (the table indexed by the raw
  input, which CAST gives for uint8; int8 is first moved to uint8 by the type switch above).
The same tables lower int8 / uint8 operations NNAPI has only for float (EXP, LOG, RSQRT, ...),
computed as TFLite's own lookup-table kernels compute them (dequantize, op in float32, round)."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...hal.types import OperandType, OperationType
from ...ops.lib.quant import multiply_by_quantized_multiplier, quantize_multiplier
from ..context import OpCtx

Op = OperationType
T = OperandType
Q8, Q8S = T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED
QUANT8 = (Q8, Q8S)
Mapper = Callable[[OpCtx], None]


def registry() -> tuple[dict[str, Mapper], Callable]:
    """A family's MAPPERS dict and the @mapper(*names) decorator that fills it."""
    table: dict[str, Mapper] = {}

    def mapper(*names: str):
        def deco(fn: Mapper) -> Mapper:
            for n in names:
                table[n] = fn
            return fn
        return deco
    return table, mapper


def padding(tfl_padding: int) -> int:
    # tflite.Padding SAME=0 / VALID=1 -> NNAPI PaddingCode SAME=1 / VALID=2
    return {0: 1, 1: 2}[tfl_padding]


def act(c: OpCtx) -> int:
    o = c.opts
    return int(o.FusedActivationFunction()) if o is not None and hasattr(o, "FusedActivationFunction") else 0


def axis(a: int, rank: int) -> int:
    return a + rank if a < 0 else a


def bias(c: OpCtx, k: int | None, channels: int, x: int, w: int) -> int:
    """Bias operand k, or a zero bias of the type NNAPI requires when TFLite left it out."""
    xo, wo = c.b.operands[x], c.b.operands[w]
    if k is not None and c.has(k):
        return c.inp(k, as_float=xo.type == T.TENSOR_FLOAT32)
    if xo.type in (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16):
        return c.b.constant(xo.type, np.zeros(channels, np.float32 if xo.type == T.TENSOR_FLOAT32 else np.float16))
    scale = 0.0 if wo.type == T.TENSOR_QUANT8_SYMM_PER_CHANNEL else xo.scale * wo.scale
    return c.b.constant(T.TENSOR_INT32, np.zeros(channels, np.int32), scale=scale)


# ---- quantized lowerings -----------------------------------------------------------------------
def is_quant8(c: OpCtx, operand: int) -> bool:
    return c.b.operands[operand].type in QUANT8


def _raw_range(type_: int) -> np.ndarray:
    return np.arange(0, 256) if type_ == Q8 else np.arange(-128, 128)


def _switch_type(c: OpCtx, src: int, dst: int) -> None:
    """src -> dst of the same scale (any 8-bit types and zero points): DEQUANTIZE + QUANTIZE."""
    f = c.b.operand(T.TENSOR_FLOAT32, list(c.b.operands[src].dimensions))
    c.emit(Op.DEQUANTIZE, [src], [f])
    c.emit(Op.QUANTIZE, [f], [dst])


def apply_table(c: OpCtx, src: int, dst: int, table: np.ndarray) -> None:
    """dst = table[raw value of src] (table: 256 raw values of dst's type, by src's raw order)."""
    s = c.b.operands[src]
    d = c.b.operands[dst]
    if s.type == Q8S:  # NNAPI casts only uint8 to int32: move int8 to uint8 first, exactly
        u = c.b.operand(Q8, list(s.dimensions), s.scale, s.zeroPoint + 128)
        _switch_type(c, src, u)
        src = u
    idx = c.b.operand(T.TENSOR_INT32, list(s.dimensions))
    c.emit(Op.CAST, [src], [idx])
    dtype = np.uint8 if d.type == Q8 else np.int8
    values = c.b.constant(d.type, np.asarray(table).astype(dtype), [256], d.scale, d.zeroPoint)
    c.emit(Op.GATHER, [values, c.b.i32(0), idx], [dst])


def requantize_table(si: float, zi: int, ti: int, so: float, zo: int, to: int) -> np.ndarray:
    """Requantization of every raw input value as TFLite's reference Requantize computes it: q -
    zi times the double-precision ratio si / so as a quantized multiplier
    (MultiplyByQuantizedMultiplier, rounding half away from zero), plus zo, saturated. (TFLite's
    optimized QUANTIZE rounds the last shift half up instead, and XNNPACK differently again: each
    is one step from the others on some inputs.)"""
    m, shift = quantize_multiplier(float(np.float64(np.float32(si)) / np.float64(np.float32(so))))
    v = _raw_range(ti).astype(np.int64) - zi
    raw = np.asarray(multiply_by_quantized_multiplier(v, m, shift), np.int64)
    lo, hi = (0, 255) if to == Q8 else (-128, 127)
    return np.clip(raw + zo, lo, hi)


def requantize(c: OpCtx, src: int, dst: int) -> None:
    """Emit operations computing quantized operand dst from quantized operand src (same shape)."""
    s, d = c.b.operands[src], c.b.operands[dst]
    if np.float32(s.scale) == np.float32(d.scale):
        _switch_type(c, src, dst)
        return
    table = requantize_table(s.scale, s.zeroPoint, s.type, d.scale, d.zeroPoint, d.type)
    apply_table(c, src, dst, table)


def float_table(c: OpCtx, src: int, dst: int, fn: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """A lookup table as TFLite's LUTPopulate builds it: dequantize (float32), fn, multiply by
    the inverse output scale, round half away from zero, add the zero point, saturate."""
    s, d = c.b.operands[src], c.b.operands[dst]
    x = np.float32(s.scale) * (_raw_range(s.type) - s.zeroPoint).astype(np.float32)
    with np.errstate(all="ignore"):
        y = np.asarray(fn(x), np.float32) * (np.float32(1) / np.float32(d.scale))
        r = np.where(np.isnan(y), 0, np.sign(y) * np.floor(np.abs(y) + np.float32(0.5)))
        r = np.clip(r, -1e6, 1e6) + d.zeroPoint
    lo, hi = (0, 255) if d.type == Q8 else (-128, 127)
    return np.clip(r, lo, hi).astype(np.int64)


def same_scale_output(c: OpCtx, x: int, out: int, fixed: Callable[[int], None]) -> None:
    """Emit an NNAPI op whose quantized output must keep input x's scale and zero point:
    fixed(target) emits it into `target`; a requantize follows when TFLite's output differs."""
    xo, oo = c.b.operands[x], c.b.operands[out]
    if xo.type not in QUANT8 or (xo.type == oo.type and np.float32(xo.scale) == np.float32(oo.scale)
                                 and xo.zeroPoint == oo.zeroPoint):
        fixed(out)
        return
    tmp = c.b.operand(xo.type, list(oo.dimensions), xo.scale, xo.zeroPoint)
    fixed(tmp)
    requantize(c, tmp, out)
