"""Quantized (TENSOR_QUANT8_ASYMM / _SIGNED) operations as device kernels, bit-exact with the
numpy reference.

Two techniques, both exact by construction:
- integer arithmetic in the reference's fixed point (quant_c.py): ADD, SUB, MUL, PRELU, CONV_2D,
  DEPTHWISE_CONV_2D, GROUPED_CONV_2D, FULLY_CONNECTED, AVERAGE_POOL_2D, MAX_POOL_2D; the
  multipliers and shifts come from the reference's own functions at prepare time, baked into
  the source (per tensor) or passed as derived TENSOR_INT32 tables (per channel);
- lookup tables: an 8-bit input has 256 values, so an op that maps each element on its own
  (RELU family, LOGISTIC, TANH, HARD_SWISH, DEQUANTIZE, CAST, the requantization of a
  CONCATENATION, MAXIMUM, MINIMUM or SELECT input) runs the reference on all 256 values at
  prepare and the kernel reads the table.
QUANTIZE (float -> quant8) divides in float32 like the reference and rounds half away from
zero exactly in float. Every builder returns None (host) when something it needs is not a
compile-time constant or not handled. Quant heads produce an `int acc` already clamped to the
output range (the store casts it to the 8-bit type)."""
from __future__ import annotations

import importlib
import pkgutil
from typing import Callable

import numpy as np

from ..hal.types import OperandType as T
from ..hal.types import OperationType as Op
from ..ops import conv
from ..ops.conv_common import (
    check_padding_below_filter,
    conv_requant_params,
    filter_scales,
    output_hw,
    resolve_window,
)
from ..ops.dtypes import dtype_of, quant_range
from ..ops.quant import VALID_ACTIVATIONS, activation_range_quant, quantize_multiplier
from ..ops.registry import REGISTRY, OpContext
from . import templates
from .quant_c import clamp, i64, mbqm
from .render import C_TYPES, Dialect, float_literal, index_expr
from .templates import Template
from .templates_util import QUANT8, nonempty, params_known

Builder = Callable[[OpContext, dict], "Template | None"]
PC = T.TENSOR_QUANT8_SYMM_PER_CHANNEL


def _register(op: Op, builder: Builder) -> None:
    """Add `builder` after any builder another module registered for `op` (theirs first: e.g.
    same-scale quant8 concatenation is a plain copy there)."""
    first = templates.TEMPLATES.get(op)
    if first is None:
        templates.TEMPLATES[op] = builder
        return
    templates.TEMPLATES[op] = lambda ctx, shapes: first(ctx, shapes) or builder(ctx, shapes)


def _load_siblings() -> None:
    """Import the other templates_* modules first, so their @template registrations happen
    before ours chain onto them (a later plain registration would collide)."""
    from .. import compiler

    for info in pkgutil.iter_modules(compiler.__path__):
        if info.name.startswith("templates_") and info.name != __name__.rsplit(".", 1)[-1]:
            importlib.import_module(f"{compiler.__name__}.{info.name}")


def _q8(ctx: OpContext, positions, out: bool = True) -> bool:
    """The listed inputs (and output 0) are one quant8 type with a device C type."""
    t = ctx.out_operand(0).type if out else ctx.in_operand(positions[0]).type
    return t in QUANT8 and t in C_TYPES and all(ctx.in_operand(p).type == t for p in positions)


def _activation(ctx: OpContext, i: int) -> int | None:
    if not params_known(ctx, [i]):
        return None
    act = int(ctx.scalar(i))
    return act if act in VALID_ACTIVATIONS else None


def _f32(x: float) -> float:
    return float(np.float32(x))


def _load_int(d: Dialect, ctype: str, ptr: str, index: str) -> str:
    return f"(({i64(d)}){d.load(ctype, ptr, index)})"


# ---- ADD / SUB / MUL -----------------------------------------------------------------------

def _add_sub_params(ctx: OpContext, negate: bool) -> list[tuple[int, int]]:
    """(multiplier, shift) of input 1, input 2 and the output, as the reference's addQuant8."""
    s1, s2, so = _f32(ctx.in_operand(0).scale), _f32(ctx.in_operand(1).scale), _f32(ctx.out_operand(0).scale)
    twice_max = 2.0 * max(s1, s2)
    m1, sh1 = quantize_multiplier(s1 / twice_max)
    m2, sh2 = quantize_multiplier(s2 / twice_max)
    mo, sho = quantize_multiplier(twice_max / ((1 << 20) * so))
    return [(m1, sh1), (-m2 if negate else m2, sh2), (mo, sho)]


def _binary(ctx: OpContext, shapes: dict, op: Op) -> Template | None:
    if not _q8(ctx, [0, 1]):
        return None
    act = _activation(ctx, 2)
    a, b = ctx.operation.inputs[:2]
    y = ctx.operation.outputs[0]
    if act is None or not nonempty(shapes, [a, b, y]):
        return None
    out_shape = shapes[y]
    if tuple(np.broadcast_shapes(shapes[a], shapes[b])) != tuple(out_shape):
        return None
    t = ctx.out_operand(0).type
    z1, z2, zo = ctx.in_operand(0).zeroPoint, ctx.in_operand(1).zeroPoint, ctx.out_operand(0).zeroPoint
    lo, hi = activation_range_quant(act, ctx.out_operand(0).scale, zo, t)
    ct = C_TYPES[t]
    ia, ib = index_expr(shapes[a], out_shape), index_expr(shapes[b], out_shape)
    if op == Op.MUL:
        product = float(np.float32(ctx.in_operand(0).scale) * np.float32(ctx.in_operand(1).scale))
        if not product < _f32(ctx.out_operand(0).scale):
            return None  # the reference rejects it at run time
        m, sh = quantize_multiplier(product / _f32(ctx.out_operand(0).scale))

        def mul_body(names: list[str], d: Dialect) -> list[str]:
            L = i64(d)
            lines = [f"{L} q_p = ({_load_int(d, ct, names[0], ia)} - {z1}) * ({_load_int(d, ct, names[1], ib)} - {z2});"]
            lines += mbqm("q_p", "q_p", m, sh, d)
            return lines + [f"q_p += {zo};", f"int acc = (int){clamp('q_p', lo, hi)};"]

        return Template("quant_mul", [a, b], mul_body)
    (m1, sh1), (m2, sh2), (mo, sho) = _add_sub_params(ctx, negate=op == Op.SUB)

    def add_body(names: list[str], d: Dialect) -> list[str]:
        L = i64(d)
        lines = [f"{L} q_a = ({_load_int(d, ct, names[0], ia)} - {z1}) * {1 << 20};",
                 f"{L} q_b = ({_load_int(d, ct, names[1], ib)} - {z2}) * {1 << 20};", f"{L} q_r;"]
        lines += mbqm("q_a", "q_a", m1, sh1, d) + mbqm("q_b", "q_b", m2, sh2, d)
        lines += mbqm("q_r", "q_a + q_b", mo, sho, d)
        return lines + [f"q_r += {zo};", f"int acc = (int){clamp('q_r', lo, hi)};"]

    return Template(f"quant_{op.name.lower()}", [a, b], add_body)


# ---- elementwise ops of one 8-bit input: a 256-entry table ---------------------------------

def _table_input(t: int) -> np.ndarray:
    lo, hi = quant_range(t)
    return np.arange(lo, hi + 1, dtype=np.int64).astype(dtype_of(t))


def _lut(ctx: OpContext, shapes: dict) -> Template | None:
    """out[i] = table[x[i] - qmin], the table being the reference applied to every value."""
    t = ctx.in_operand(0).type
    y = ctx.operation.outputs[0]
    x = ctx.operation.inputs[0]
    out_type = ctx.out_operand(0).type
    if t not in QUANT8 or t not in C_TYPES or out_type not in C_TYPES or ctx.num_outputs != 1:
        return None
    if not params_known(ctx, range(1, ctx.num_inputs)) or not nonempty(shapes, [x, y]):
        return None
    if tuple(shapes[x]) != tuple(shapes[y]):
        return None
    sub = OpContext(ctx.operation, ctx.operands, [_table_input(t), *ctx.values[1:]], ctx.relaxed, ctx.version)
    with np.errstate(all="ignore"):
        table = np.asarray(REGISTRY[ctx.operation.type].reference(sub)[0])
    if table.shape != (256,):
        return None
    lo = quant_range(t)[0]
    ct, ot = C_TYPES[t], C_TYPES[out_type]
    acc_type = "float" if out_type in (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16) else "int"

    def body(names: list[str], d: Dialect) -> list[str]:
        idx = f"(int){d.load(ct, names[0], 'i')} - ({lo})"
        return [f"{acc_type} acc = {d.load(ot, names[1], idx)};"]

    return Template("quant_table", [x, -1], body, {-1: (y, table)})


# ---- QUANTIZE ------------------------------------------------------------------------------

def _quantize(ctx: OpContext, shapes: dict) -> Template | None:
    """round_half_away(x / scale) + zeroPoint, saturated; NaN gives the clamp of 0 (the
    reference's nan_to_num after adding the zero point)."""
    x, y = ctx.operation.inputs[0], ctx.operation.outputs[0]
    src, o = ctx.in_operand(0), ctx.out_operand(0)
    if src.type not in (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16) or o.type not in QUANT8 or o.type not in C_TYPES:
        return None
    if not nonempty(shapes, [x, y]) or tuple(shapes[x]) != tuple(shapes[y]):
        return None
    scale = np.float32(o.scale)
    if not (np.isfinite(scale) and scale >= np.float32(1e-30)):
        return None  # quotients near the subnormal range: a device may flush them
    lo, hi = quant_range(o.type)
    zp = int(o.zeroPoint)
    s = float_literal(float(scale))
    ct = C_TYPES[src.type]

    def body(names: list[str], d: Dialect) -> list[str]:
        L = i64(d)
        return [f"float q_v = {d.load(ct, names[0], 'i')} / {s};",  # float32 division, as the reference
                "float q_a = fabs(q_v);",
                f"{L} q_n;",
                "if (q_v != q_v) q_n = 0;",
                f"else if (q_a >= 1.0e9f) q_n = q_v > 0.0f ? {hi} : {lo};",
                # half away from zero, exactly: q_a - floor(q_a) is exact in float
                "else { float q_t = floor(q_a); q_n = (" + L + ")q_t + (q_a - q_t >= 0.5f ? 1 : 0);"
                f" if (q_v < 0.0f) q_n = -q_n; q_n += {zp}; }}",
                f"int acc = (int){clamp('q_n', lo, hi)};"]

    return Template("quantize", [x], body)


# ---- convolutions and fully connected ------------------------------------------------------

def _requant(ctx: OpContext, fscales: np.ndarray, per_channel: bool, bias: int, derived: dict):
    """Multiplier and shift operands for the body: ints when one pair serves every channel, else
    derived TENSOR_INT32 tables (keyed -2, -3) read at the output channel."""
    mults, shifts = conv_requant_params(ctx, fscales, per_channel)
    if np.all(mults == mults[0]) and np.all(shifts == shifts[0]):
        return int(mults[0]), int(shifts[0]), []
    if np.any(shifts > 31) or np.any(shifts < -62):
        raise ValueError("shift out of range")
    derived[-2] = (bias, mults.astype(np.int32))
    derived[-3] = (bias, shifts.astype(np.int32))
    return None, None, [-2, -3]


def _acc_type(d: Dialect, taps: int) -> str:
    """int while the largest possible sum of 8-bit products fits, else 64-bit."""
    return "int" if taps * 255 * 255 < (1 << 31) else i64(d)


def _conv(ctx: OpContext, shapes: dict, kind: str) -> Template | None:
    from .templates_conv import Layout

    in_t, f_t = ctx.in_operand(0).type, ctx.in_operand(1).type
    if not _q8(ctx, [0]) or f_t not in (in_t, PC) or ctx.in_operand(2).type != T.TENSOR_INT32:
        return None
    if not params_known(ctx, range(3, ctx.num_inputs)):
        return None
    op = ctx.operation
    x, f, b = op.inputs[:3]
    y = op.outputs[0]
    if not nonempty(shapes, [x, f, b, y]) or len(shapes[x]) != 4 or len(shapes[f]) != 4:
        return None
    p = {"conv": conv._conv_params, "depthwise": conv._depthwise_params, "grouped": conv._grouped_params}[kind](ctx)
    src, dst = Layout(p.nchw, shapes[x]), Layout(p.nchw, shapes[y])
    if kind == "depthwise":
        _, kh, kw, cout = shapes[f]
        groups, cg = src.c, 1
    else:
        cout, kh, kw, cg = shapes[f]
        groups = p.groups if kind == "grouped" else 1
    if dst.c != cout or cg * groups != src.c or cout % groups or tuple(shapes[b]) != (cout,):
        return None
    if kind == "depthwise" and cout != src.c * p.multiplier:
        return None
    win = resolve_window(p.pad, src.h, src.w, kh, kw, p.stride_h, p.stride_w, p.dil_h, p.dil_w)
    check_padding_below_filter(win, kh, kw)
    if output_hw(win, src.h, src.w, kh, kw) != (dst.h, dst.w):
        return None
    per_channel = f_t == PC
    derived: dict = {}
    mult, shift, tables = _requant(ctx, filter_scales(ctx, 1, 3 if kind == "depthwise" else 0, cout),
                                   per_channel, b, derived)
    out = ctx.out_operand(0)
    lo, hi = activation_range_quant(p.activation, out.scale, out.zeroPoint, out.type)
    zx, zf = ctx.in_operand(0).zeroPoint, (0 if per_channel else ctx.in_operand(1).zeroPoint)
    weights = ctx.values[1]
    if weights is not None:
        w = weights.astype(np.int64) - zf
        # conv / grouped as [KH, KW, Cg, Cout]: neighbouring threads read neighbouring weights
        derived[-1] = (b, (w if kind == "depthwise" else np.transpose(w, (1, 2, 3, 0))).astype(np.int32))
        fkey, fct = -1, "int"
    elif f_t in C_TYPES:  # per-channel filters once the renderer has a C type for them
        fkey, fct = f, C_TYPES[f_t]
    else:
        return None
    co = dst.ch
    ct = C_TYPES[in_t]
    taps = kh * kw * cg

    def filter_at(d: Dialect, F: str, ky: str, kx: str, ic: str) -> str:
        if kind == "depthwise":
            idx = f"({ky} * {kw} + {kx}) * (long){cout} + {co}"
        elif fkey == -1:
            idx = f"(({ky} * {kw} + {kx}) * (long){cg} + {ic}) * {cout} + {co}"
        else:
            idx = f"(({co} * {kh} + {ky}) * (long){kw} + {kx}) * {cg} + {ic}"
        v = f"(int){d.load(fct, F, idx)}"
        return v if fkey == -1 else f"({v} - {zf})"

    def body(names: list[str], d: Dialect) -> list[str]:
        X, F, B = names[:3]
        L, A = i64(d), _acc_type(d, taps)
        lines = [f"{A} q_acc = 0;",
                 f"for (int ky = 0; ky < {kh}; ++ky) {{ int ih = (int){dst.row} * {win.stride_h} - {win.pad_top}"
                 f" + ky * {win.dil_h}; if (ih < 0 || ih >= {src.h}) continue;",
                 f"  for (int kx = 0; kx < {kw}; ++kx) {{ int iw = (int){dst.col} * {win.stride_w} - {win.pad_left}"
                 f" + kx * {win.dil_w}; if (iw < 0 || iw >= {src.w}) continue;"]
        if kind == "depthwise":
            xv = f"((int){d.load(ct, X, src.at('ih', 'iw', f'{co} / {p.multiplier}'))} - {zx})"
            lines.append(f"    q_acc += ({A}){xv} * {filter_at(d, F, 'ky', 'kx', '0')};")
        else:
            first = f"({co} / {cout // groups}) * {cg} + " if groups > 1 else ""
            xv = f"((int){d.load(ct, X, src.at('ih', 'iw', f'{first}ic'))} - {zx})"
            lines.append(f"    for (int ic = 0; ic < {cg}; ++ic) q_acc += ({A}){xv} * {filter_at(d, F, 'ky', 'kx', 'ic')};")
        lines += ["  }", "}", f"{L} q_t = ({L})q_acc + ({L}){d.load('int', B, co)};"]
        m = mult if tables == [] else d.load("int", names[3], co)
        s = shift if tables == [] else d.load("int", names[4], co)
        lines += mbqm("q_t", "q_t", m, s, d)
        return lines + [f"q_t += {out.zeroPoint};", f"int acc = (int){clamp('q_t', lo, hi)};"]

    return Template(f"quant_{kind}_conv" if kind != "conv" else "quant_conv", [x, fkey, b, *tables], body, derived)


def _fully_connected(ctx: OpContext, shapes: dict) -> Template | None:
    if not _q8(ctx, [0, 1]) or ctx.in_operand(2).type != T.TENSOR_INT32:
        return None
    act = _activation(ctx, 3)
    op = ctx.operation
    x, wt, b = op.inputs[:3]
    y = op.outputs[0]
    if act is None or not nonempty(shapes, [x, wt, b, y]) or len(shapes[wt]) != 2:
        return None
    units, k = shapes[wt]
    batch = int(np.prod(shapes[x])) // k
    if tuple(shapes[y]) != (batch, units) or shapes[b][0] != units or int(np.prod(shapes[b])) != units:
        return None
    mults, shifts = conv_requant_params(ctx, filter_scales(ctx, 1, 0, 1), False)
    m, sh = int(mults[0]), int(shifts[0])
    out = ctx.out_operand(0)
    lo, hi = activation_range_quant(act, out.scale, out.zeroPoint, out.type)
    zx, zw = ctx.in_operand(0).zeroPoint, ctx.in_operand(1).zeroPoint
    ct = C_TYPES[ctx.in_operand(0).type]
    derived = {}
    if ctx.values[1] is not None:  # as [K, units], zero point removed
        derived[-1] = (b, (ctx.values[1].astype(np.int64) - zw).T.astype(np.int32))
        wkey = -1
    else:
        wkey = wt

    def body(names: list[str], d: Dialect) -> list[str]:
        X, W, B = names
        L, A = i64(d), _acc_type(d, k)
        wv = f"(int){d.load('int', W, f'k * {units} + c1')}" if wkey == -1 else \
            f"((int){d.load(ct, W, f'c1 * {k} + k')} - {zw})"
        lines = [f"{A} q_acc = 0;",
                 f"for (int k = 0; k < {k}; ++k) q_acc += ({A})((int){d.load(ct, X, f'c0 * {k} + k')} - {zx}) * {wv};",
                 f"{L} q_t = ({L})q_acc + ({L}){d.load('int', B, 'c1')};"]
        lines += mbqm("q_t", "q_t", m, sh, d)
        return lines + [f"q_t += {out.zeroPoint};", f"int acc = (int){clamp('q_t', lo, hi)};"]

    return Template("quant_fully_connected", [x, wkey, b], body, derived)


# ---- pooling -------------------------------------------------------------------------------

def _pool(ctx: OpContext, shapes: dict, kind: str) -> Template | None:
    from .templates_conv import pool_geometry

    geometry = pool_geometry(ctx, shapes) if _q8(ctx, [0]) else None
    if geometry is None:
        return None
    p, src, dst, win = geometry
    x = ctx.operation.inputs[0]
    check_padding_below_filter(win, p.filter_h, p.filter_w)
    if output_hw(win, src.h, src.w, p.filter_h, p.filter_w) != (dst.h, dst.w) or (dst.n, dst.c) != (src.n, src.c):
        return None
    out = ctx.out_operand(0)
    lo, hi = activation_range_quant(p.activation, out.scale, out.zeroPoint, out.type)
    ct = C_TYPES[out.type]
    qmin = quant_range(out.type)[0]

    def body(names: list[str], d: Dialect) -> list[str]:
        v = f"(int){d.load(ct, names[0], src.at('ih', 'iw', dst.ch))}"
        update = f"q_s += {v}; ++q_c;" if kind == "avg" else f"{{ int q_v = {v}; q_s = q_v > q_s ? q_v : q_s; }}"
        lines = [f"int q_s = {0 if kind == 'avg' else qmin}, q_c = 0;",
                 f"for (int ky = 0; ky < {p.filter_h}; ++ky) {{ int ih = (int){dst.row} * {win.stride_h}"
                 f" - {win.pad_top} + ky; if (ih < 0 || ih >= {src.h}) continue;",
                 f"  for (int kx = 0; kx < {p.filter_w}; ++kx) {{ int iw = (int){dst.col} * {win.stride_w}"
                 f" - {win.pad_left} + kx; if (iw < 0 || iw >= {src.w}) continue; {update} }}",
                 "}"]
        if kind == "avg":  # (sum ± count/2) / count with C truncation: half away from zero
            lines.append("q_s = q_s >= 0 ? (q_s + q_c / 2) / q_c : -((-q_s + q_c / 2) / q_c);")
        else:
            lines.append("(void)q_c;")
        return lines + [f"int acc = {clamp('q_s', lo, hi)};"]

    return Template(f"quant_{kind}_pool", [x], body)


# ---- CONCATENATION with requantization -----------------------------------------------------

def _concatenation(ctx: OpContext, shapes: dict) -> Template | None:
    from ..ops import movement
    from .templates_movement import concat_layout

    n = ctx.num_inputs - 1
    ins = list(ctx.operation.inputs[:n])
    y = ctx.operation.outputs[0]
    if n < 1 or not _q8(ctx, range(n)) or not params_known(ctx, [n]) or not nonempty(shapes, [*ins, y]):
        return None
    out = ctx.out_operand(0)
    layout = concat_layout(ctx, shapes, ins, y, n)
    if layout is None:
        return None
    signed = out.type == T.TENSOR_QUANT8_ASYMM_SIGNED
    base = _table_input(out.type)
    derived, tables = {}, {}
    for k in range(n):
        o = ctx.in_operand(k)
        table = movement._requantize(base, o.scale, o.zeroPoint, out.scale, out.zeroPoint, signed)
        if not np.array_equal(table, base):
            tables[k] = -(len(tables) + 1)
            derived[tables[k]] = (y, np.asarray(table))
    ct = C_TYPES[out.type]
    qmin = quant_range(out.type)[0]
    inputs = ins + list(tables.values())

    def body(names: list[str], d: Dialect) -> list[str]:
        loads = []
        for k in range(n):
            v = d.load(ct, names[k], layout.index(k))
            if k in tables:
                v = d.load(ct, names[n + list(tables).index(k)], f"(int){v} - ({qmin})")
            loads.append(f"acc = {v};")
        return ["int acc;", *layout.select(loads)]

    return Template("quant_concatenation", inputs, body, derived)



# ---- MAXIMUM / MINIMUM / SELECT: each input requantized by a table, then combined ----------

def _requant_table(ctx: OpContext, i: int) -> np.ndarray | None:
    """The reference's requantize() of input i on all 256 values, or None when it is the identity."""
    from ..ops.comparison import requantize

    base = _table_input(ctx.in_operand(i).type)
    table = np.asarray(requantize(ctx, i, base))
    return None if np.array_equal(table, base) else table


def _combine(ctx: OpContext, shapes: dict, op: Op) -> Template | None:
    positions = [1, 2] if op == Op.SELECT else [0, 1]
    if not _q8(ctx, positions) or not params_known(ctx, range(3 if op == Op.SELECT else 2, ctx.num_inputs)):
        return None
    if op == Op.SELECT and ctx.in_operand(0).type != T.TENSOR_BOOL8:
        return None
    ins = list(ctx.operation.inputs[:3 if op == Op.SELECT else 2])
    y = ctx.operation.outputs[0]
    if not nonempty(shapes, [*ins, y]):
        return None
    out_shape = tuple(shapes[y])
    if tuple(np.broadcast_shapes(*[shapes[i] for i in ins])) != out_shape:
        return None
    if op == Op.SELECT and any(tuple(shapes[i]) != out_shape for i in ins):
        return None
    t = ctx.out_operand(0).type
    ct, qmin = C_TYPES[t], quant_range(t)[0]
    derived, keys = {}, {}
    for p in positions:
        table = _requant_table(ctx, p)
        if table is not None:
            keys[p] = -(len(keys) + 1)
            derived[keys[p]] = (y, table)
    tensor_inputs = ins + list(keys.values())

    def body(names: list[str], d: Dialect) -> list[str]:
        vals = []
        for p in positions:
            v = d.load(ct, names[p], index_expr(shapes[ins[p]], out_shape))
            if p in keys:
                v = d.load(ct, names[len(ins) + list(keys).index(p)], f"(int){v} - ({qmin})")
            vals.append(f"(int){v}")
        a, b = vals
        if op == Op.SELECT:
            cond = d.load("uchar", names[0], index_expr(shapes[ins[0]], out_shape))
            return [f"int acc = {cond} ? {a} : {b};"]
        return [f"int q_a = {a}, q_b = {b};", f"int acc = q_a {'>' if op == Op.MAXIMUM else '<'} q_b ? q_a : q_b;"]

    return Template(f"quant_{op.name.lower()}", tensor_inputs, body, derived)


# ---- PRELU ---------------------------------------------------------------------------------

def _prelu(ctx: OpContext, shapes: dict) -> Template | None:
    """The reference's two requantizations: x >= 0 by s / so, else x * alpha by s * sa / so."""
    if not _q8(ctx, [0, 1]):
        return None
    x, a = ctx.operation.inputs[:2]
    y = ctx.operation.outputs[0]
    if not nonempty(shapes, [x, a, y]):
        return None
    out_shape = tuple(shapes[y])
    if tuple(np.broadcast_shapes(shapes[x], shapes[a])) != out_shape:
        return None
    s, sa, so = (np.float32(ctx.in_operand(0).scale), np.float32(ctx.in_operand(1).scale),
                 np.float32(ctx.out_operand(0).scale))
    m_pos, sh_pos = quantize_multiplier(float(s / so))
    m_neg, sh_neg = quantize_multiplier(float(s * sa) / float(so))
    z, za, zo = ctx.in_operand(0).zeroPoint, ctx.in_operand(1).zeroPoint, ctx.out_operand(0).zeroPoint
    t = ctx.out_operand(0).type
    ct, (lo, hi) = C_TYPES[t], quant_range(t)

    def body(names: list[str], d: Dialect) -> list[str]:
        L = i64(d)
        lines = [f"{L} q_x = {_load_int(d, ct, names[0], index_expr(shapes[x], out_shape))} - {z};",
                 f"{L} q_r;",
                 "if (q_x >= 0) {"]
        lines += ["  " + ln for ln in mbqm("q_r", "q_x", m_pos, sh_pos, d)]
        lines += ["} else {",
                  f"  {L} q_p = q_x * ({_load_int(d, ct, names[1], index_expr(shapes[a], out_shape))} - {za});"]
        lines += ["  " + ln for ln in mbqm("q_r", "q_p", m_neg, sh_neg, d)]
        return lines + ["}", f"q_r += {zo};", f"int acc = (int){clamp('q_r', lo, hi)};"]

    return Template("quant_prelu", [x, a], body)


# ---- comparisons: real values formed in float32 as the reference, then compared -------------

_COMPARE = {Op.EQUAL: "==", Op.NOT_EQUAL: "!=", Op.GREATER: ">", Op.GREATER_EQUAL: ">=", Op.LESS: "<",
            Op.LESS_EQUAL: "<="}


def _compare(ctx: OpContext, shapes: dict, op: Op) -> Template | None:
    """scale * (q - zeroPoint) is one float32 multiply of exact operands: rounded the same on
    every IEEE device, and no contraction can form without an add."""
    if not _q8(ctx, [0, 1], out=False) or ctx.out_operand(0).type != T.TENSOR_BOOL8:
        return None
    a, b = ctx.operation.inputs[:2]
    y = ctx.operation.outputs[0]
    if not nonempty(shapes, [a, b, y]):
        return None
    out_shape = tuple(shapes[y])
    if tuple(np.broadcast_shapes(shapes[a], shapes[b])) != out_shape:
        return None
    ct = C_TYPES[ctx.in_operand(0).type]
    real = [(float_literal(_f32(ctx.in_operand(k).scale)), ctx.in_operand(k).zeroPoint) for k in (0, 1)]

    def body(names: list[str], d: Dialect) -> list[str]:
        v = [f"({s} * (float)((int){d.load(ct, names[k], index_expr(shapes[(a, b)[k]], out_shape))} - ({z})))"
             for k, (s, z) in enumerate(real)]
        return [f"float q_a = {v[0]};", f"float q_b = {v[1]};", f"int acc = q_a {_COMPARE[op]} q_b;"]

    return Template("quant_compare", [a, b], body)

_load_siblings()
for _op in (Op.ADD, Op.SUB, Op.MUL):
    _register(_op, lambda ctx, shapes, _op=_op: _binary(ctx, shapes, _op))
for _op in (Op.RELU, Op.RELU1, Op.RELU6, Op.LOGISTIC, Op.TANH, Op.HARD_SWISH, Op.DEQUANTIZE, Op.CAST):
    _register(_op, _lut)
_register(Op.QUANTIZE, _quantize)
for _op, _kind in ((Op.CONV_2D, "conv"), (Op.DEPTHWISE_CONV_2D, "depthwise"), (Op.GROUPED_CONV_2D, "grouped")):
    _register(_op, lambda ctx, shapes, _kind=_kind: _conv(ctx, shapes, _kind))
_register(Op.FULLY_CONNECTED, _fully_connected)
_register(Op.AVERAGE_POOL_2D, lambda ctx, shapes: _pool(ctx, shapes, "avg"))
_register(Op.MAX_POOL_2D, lambda ctx, shapes: _pool(ctx, shapes, "max"))
_register(Op.CONCATENATION, _concatenation)
for _op in (Op.MAXIMUM, Op.MINIMUM, Op.SELECT):
    _register(_op, lambda ctx, shapes, _op=_op: _combine(ctx, shapes, _op))
_register(Op.PRELU, _prelu)
for _op in _COMPARE:
    _register(_op, lambda ctx, shapes, _op=_op: _compare(ctx, shapes, _op))
