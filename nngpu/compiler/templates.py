"""Kernels that are not plain elementwise expressions, registered per OperationType.

Each template computes the value `acc` of one output element at coordinates c0..c{rank-1}
(bias and fused activation included), so the fusion pass can append an elementwise epilogue
before the single store. Parameters (geometry, strides, padding) are baked into the source:
prepared models have static shapes, and the source is the cache key. This module holds the
registry and the convolution / fully connected / pooling templates; modules named
`templates_*.py` beside it register more."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..hal.types import OperandType as T
from ..hal.types import OperationType as Op
from ..ops.conv_common import resolve_window
from ..ops.registry import OpContext, OpError
from .render import C_TYPES, DIALECTS, Dialect

FLOATS = {T.TENSOR_FLOAT32, T.TENSOR_FLOAT16}


@dataclass
class Gemm:
    """C[m, n] = A[m, k] @ B[k, n] by the backend's library call, before the template's kernel.
    Fields are operand ids or the template's negative keys."""

    a: int
    b: int
    c: int
    m: int
    n: int
    k: int


@dataclass
class Fill:
    """A generated kernel writing a temporary element by element (flat index i), e.g. im2col."""

    name: str
    inputs: list[int]
    out: int
    size: int
    body: Callable[[list[str], Dialect], list[str]]   # C lines leaving `float acc` for element i


@dataclass
class Template:
    kind: str
    tensor_inputs: list[int]                       # operand indexes, in parameter order
    body: Callable[[list[str], Dialect], list[str]]  # C lines leaving `float acc`
    # Constants in the layout the kernel reads best: key (negative, used in tensor_inputs) →
    # (the operand it derives from, its value). Computed once at prepare.
    derived: dict[int, tuple[int, np.ndarray]] = field(default_factory=dict)
    # Float32 temporaries (key → shape) and the steps that fill them before this kernel runs.
    temps: dict[int, tuple[int, ...]] = field(default_factory=dict)
    before: list[Gemm | Fill] = field(default_factory=list)


def helpers(d: Dialect) -> str:
    return ""


def _act(code: int) -> str:
    return {0: "", 1: "acc = fmax(acc, 0.0f);", 2: "acc = fmin(fmax(acc, -1.0f), 1.0f);",
            3: "acc = fmin(fmax(acc, 0.0f), 6.0f);"}[code]


def _floats(ctx: OpContext, positions) -> bool:
    return all(ctx.in_operand(p).type in FLOATS for p in positions) and ctx.out_operand(0).type in FLOATS


def _conv(ctx: OpContext, shapes, depthwise: bool) -> Template | None:
    from ..ops import conv

    if not _floats(ctx, (0, 1, 2)):
        return None
    p = (conv._depthwise_params if depthwise else conv._conv_params)(ctx)
    if p.nchw:
        return None
    op = ctx.operation
    x, f, b = op.inputs[:3]
    n, h, w, c = shapes[x]
    _, kh, kw, fc = shapes[f]
    on, oh, ow, oc = shapes[op.outputs[0]]
    win = resolve_window(p.pad, h, w, kh, kw, p.stride_h, p.stride_w, p.dil_h, p.dil_w)
    types = [C_TYPES[ctx.in_operand(i).type] for i in range(3)]
    act = _act(p.activation)

    def body(names: list[str], d: Dialect) -> list[str]:
        X, F, B = names
        ld = lambda k, ptr, idx: d.load(types[k], ptr, idx)  # noqa: E731
        lines = [f"float acc = {ld(2, B, 'c3')};"]
        lines.append(f"for (int kh = 0; kh < {kh}; ++kh) {{ int ih = (int)c1 * {win.stride_h} - {win.pad_top} + kh * {win.dil_h};"
                     f" if (ih < 0 || ih >= {h}) continue;")
        lines.append(f"  for (int kw = 0; kw < {kw}; ++kw) {{ int iw = (int)c2 * {win.stride_w} - {win.pad_left} + kw * {win.dil_w};"
                     f" if (iw < 0 || iw >= {w}) continue;")
        lines.append(f"    long xb = ((c0 * {h} + ih) * (long){w} + iw) * {c};")
        if depthwise:
            lines.append(f"    acc += {ld(0, X, f'xb + c3 / {oc // c}')} * {ld(1, F, f'(kh * {kw} + kw) * (long){fc} + c3')};")
        else:
            # The filter is read as [KH, KW, Cin, Cout]: neighbouring threads (output channels)
            # read neighbouring weights, and all of them the same input value.
            lines.append(f"    long fb = (kh * {kw} + kw) * (long){c * oc};")
            lines.append(f"    for (int ic = 0; ic < {c}; ++ic) acc += {ld(0, X, 'xb + ic')} * {ld(1, F, f'fb + ic * {oc} + c3')};")
        lines.append("  }")
        lines.append("}")
        if act:
            lines.append(act)
        return lines

    if depthwise:
        return Template("depthwise_conv", [x, f, b], body)
    weights = ctx.values[1]
    if weights is None:
        return None
    m, kk = on * oh * ow, kh * kw * c
    if types == ["float"] * 3 and m * oc * kk >= GEMM_MIN_WORK:
        return _conv_gemm(x, f, b, weights, (n, h, w, c), (kh, kw), (oh, ow, oc), win, act)
    return Template("conv", [x, -1, b], body, {-1: (f, np.transpose(weights, (1, 2, 3, 0)))})


GEMM_MIN_WORK = 1 << 21  # multiply-adds from which a convolution goes through im2col + GEMM


def _conv_gemm(x, f, b, weights, in_shape, k_shape, out_shape, win, act) -> Template:
    """CONV_2D as GEMM: patches [N*OH*OW, KH*KW*C] (skipped for 1x1 stride-1 unpadded) times
    the filter as [KH*KW*C, Cout], then bias + activation (+ epilogue) in the kernel."""
    n, h, w, c = in_shape
    kh, kw = k_shape
    oh, ow, oc = out_shape
    m, kk = n * oh * ow, kh * kw * c
    direct = kh == kw == 1 and win.stride_h == win.stride_w == 1 and win.pad_top == win.pad_left == 0 \
        and (oh, ow) == (h, w)
    derived = {-1: (f, np.transpose(weights, (1, 2, 3, 0)).reshape(kk, oc))}
    temps = {-2: (m, oc)}
    before: list[Gemm | Fill] = []
    a = x
    if not direct:
        temps[-3] = (m, kk)
        a = -3

        def im2col(names: list[str], d: Dialect) -> list[str]:
            X = names[0]
            return [f"long row = i / {kk}, col = i % {kk};",
                    f"int ic = (int)(col % {c}), kx = (int)((col / {c}) % {kw}), ky = (int)(col / ({c} * {kw}));",
                    f"int ox = (int)(row % {ow}), oy = (int)((row / {ow}) % {oh}); long bn = row / ({ow} * {oh});",
                    f"int ih = oy * {win.stride_h} - {win.pad_top} + ky * {win.dil_h};",
                    f"int iw = ox * {win.stride_w} - {win.pad_left} + kx * {win.dil_w};",
                    f"float acc = (ih >= 0 && ih < {h} && iw >= 0 && iw < {w}) ? "
                    f"{d.load('float', X, f'((bn * {h} + ih) * (long){w} + iw) * {c} + ic')} : 0.0f;"]

        before.append(Fill("nn_im2col", [x], -3, m * kk, im2col))
    before.append(Gemm(a, -1, -2, m, oc, kk))

    def epilogue(names: list[str], d: Dialect) -> list[str]:
        T, B = names
        return [f"float acc = {T}[i] + {B}[c3];"] + ([act] if act else [])

    return Template("conv_gemm", [-2, b], epilogue, derived, temps, before)


def _fully_connected(ctx: OpContext, shapes) -> Template | None:
    if not _floats(ctx, (0, 1, 2)) or not ctx.is_constant(3):
        return None
    op = ctx.operation
    x, wt, b = op.inputs[:3]
    units, k = shapes[wt]
    act = _act(int(ctx.scalar(3)))
    types = [C_TYPES[ctx.in_operand(i).type] for i in range(3)]

    def body(names: list[str], d: Dialect) -> list[str]:
        X, W, B = names  # W as [K, units]: neighbouring threads read neighbouring weights
        lines = [f"float acc = {d.load(types[2], B, 'c1')};",
                 f"for (int k = 0; k < {k}; ++k) acc += {d.load(types[0], X, f'c0 * {k} + k')} * "
                 f"{d.load(types[1], W, f'k * {units} + c1')};"]
        return lines + ([act] if act else [])

    weights = ctx.values[1]
    if weights is None:
        return None
    derived = {-1: (wt, np.ascontiguousarray(weights.T))}
    batch = shapes[op.outputs[0]][0]
    if types == ["float"] * 3 and batch * units * k >= GEMM_MIN_WORK:
        def epilogue(names: list[str], d: Dialect) -> list[str]:
            T, B = names
            return [f"float acc = {T}[i] + {B}[c1];"] + ([act] if act else [])

        return Template("fully_connected_gemm", [-2, b], epilogue, derived, {-2: (batch, units)},
                        [Gemm(x, -1, -2, batch, units, k)])
    return Template("fully_connected", [x, -1, b], body, derived)


def _pool(ctx: OpContext, shapes, kind: str) -> Template | None:
    from ..ops import pooling

    if not _floats(ctx, (0,)):
        return None
    p = pooling._params(ctx)
    if p.nchw:
        return None
    x = ctx.operation.inputs[0]
    n, h, w, c = shapes[x]
    win = resolve_window(p.pad, h, w, p.filter_h, p.filter_w, p.stride_h, p.stride_w)
    t = C_TYPES[ctx.in_operand(0).type]
    act = _act(p.activation)

    def body(names: list[str], d: Dialect) -> list[str]:
        X = names[0]
        v = d.load(t, X, f"((c0 * {h} + ih) * (long){w} + iw) * {c} + c3")
        init = "0.0f" if kind == "avg" else "-3.402823466e+38f"
        update = f"acc += {v}; ++count;" if kind == "avg" else f"acc = fmax(acc, {v});"
        lines = [f"float acc = {init}; int count = 0;",
                 f"for (int kh = 0; kh < {p.filter_h}; ++kh) {{ int ih = (int)c1 * {win.stride_h} - {win.pad_top} + kh;"
                 f" if (ih < 0 || ih >= {h}) continue;",
                 f"  for (int kw = 0; kw < {p.filter_w}; ++kw) {{ int iw = (int)c2 * {win.stride_w} - {win.pad_left} + kw;"
                 f" if (iw < 0 || iw >= {w}) continue; {update} }}",
                 "}"]
        if kind == "avg":
            lines.append("acc = count ? acc / (float)count : 0.0f;")
        else:
            lines.append("(void)count;")
        return lines + ([act] if act else [])

    return Template(f"{kind}_pool", [x], body)


Builder = Callable[[OpContext, dict], "Template | None"]
TEMPLATES: dict[Op, Builder] = {
    Op.CONV_2D: lambda ctx, shapes: _conv(ctx, shapes, depthwise=False),
    Op.DEPTHWISE_CONV_2D: lambda ctx, shapes: _conv(ctx, shapes, depthwise=True),
    Op.FULLY_CONNECTED: _fully_connected,
    Op.AVERAGE_POOL_2D: lambda ctx, shapes: _pool(ctx, shapes, "avg"),
    Op.MAX_POOL_2D: lambda ctx, shapes: _pool(ctx, shapes, "max"),
}
_loaded = False


def template(op: Op) -> Callable[[Builder], Builder]:
    """Decorator registering a builder: (OpContext with constant values, static shapes) →
    Template, or None when these operand types / parameters stay on the host."""
    def deco(fn: Builder) -> Builder:
        if op in TEMPLATES:
            raise ValueError(f"template for {op.name} registered twice")
        TEMPLATES[op] = fn
        return fn
    return deco


def _load() -> None:
    global _loaded
    if not _loaded:
        import importlib
        import pkgutil

        from .. import compiler

        for info in pkgutil.iter_modules(compiler.__path__):
            if info.name.startswith("templates_"):
                importlib.import_module(f"{compiler.__name__}.{info.name}")
        _loaded = True


def match(ctx: OpContext, shapes) -> Template | None:
    """The template computing this operation on the device, or None (host)."""
    _load()
    builder = TEMPLATES.get(ctx.operation.type)
    if builder is None:
        return None
    try:
        t = builder(ctx, shapes)
        if t is not None:  # a body that cannot render keeps the op on the host
            t.body([f"in{k}" for k in range(len(t.tensor_inputs))], DIALECTS["opencl"])
        return t
    except (OpError, KeyError, ValueError, TypeError, AttributeError, IndexError):
        return None  # parameters that are not compile-time constants: host
