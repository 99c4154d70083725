"""Convolutions and pooling beyond templates.py's NHWC kernels (float32 / float16):
GROUPED_CONV_2D, TRANSPOSE_CONV_2D, L2_POOL_2D in either layout, and the NCHW forms of CONV_2D,
DEPTHWISE_CONV_2D, AVERAGE_POOL_2D and MAX_POOL_2D (templates.py's builders keep the NHWC
forms; ours run when they decline). One forward-convolution body covers plain, depthwise and
grouped convolution: output channel co reads input channels of its group only."""
from __future__ import annotations

from typing import Callable

from ..hal.types import OperationType as Op
from ..ops import conv, pooling
from ..ops.conv_common import implicit_padding, resolve_window
from ..ops.registry import OpContext
from .render import Dialect
from .templates import TEMPLATES, Template, _act, template
from .templates_util import ctype, nonempty, params_known, same_float

Builder = Callable[[OpContext, dict], "Template | None"]


def _after(op: Op, fallback: Builder) -> None:
    """Try the builder already registered for `op`, then `fallback` (the registry holds one
    builder per op; this keeps templates.py's NHWC kernels first)."""
    first = TEMPLATES[op]

    def chained(ctx: OpContext, shapes: dict) -> Template | None:
        return first(ctx, shapes) or fallback(ctx, shapes)

    TEMPLATES[op] = chained


class Layout:
    """Index arithmetic of a 4-D image tensor and the output coordinates' roles."""

    def __init__(self, nchw: bool, shape):
        self.nchw = nchw
        if nchw:
            self.n, self.c, self.h, self.w = shape
            self.ch, self.row, self.col = "c1", "c2", "c3"
        else:
            self.n, self.h, self.w, self.c = shape
            self.ch, self.row, self.col = "c3", "c1", "c2"

    def at(self, row: str, col: str, ch: str) -> str:
        if self.nchw:
            return f"((c0 * {self.c} + {ch}) * {self.h} + {row}) * (long){self.w} + {col}"
        return f"((c0 * {self.h} + {row}) * (long){self.w} + {col}) * {self.c} + {ch}"


def _float_conv_operands(ctx: OpContext, shapes: dict) -> tuple[int, int, int] | None:
    """(input, filter, bias) of a float convolution with constant parameters and non-empty
    4-D input and filter, else None."""
    if not same_float(ctx, (0, 1, 2)) or not params_known(ctx, range(3, ctx.num_inputs)):
        return None
    x, f, b = ctx.operation.inputs[:3]
    if not nonempty(shapes, [x, f, b, ctx.operation.outputs[0]]) or len(shapes[x]) != 4 or len(shapes[f]) != 4:
        return None
    return x, f, b


def _conv_kind(ctx: OpContext, shapes: dict, kind: str) -> Template | None:
    operands = _float_conv_operands(ctx, shapes)
    if operands is None:
        return None
    op = ctx.operation
    x, f, b = operands
    p = {"conv": conv._conv_params, "depthwise": conv._depthwise_params, "grouped": conv._grouped_params}[kind](ctx)
    src, dst = Layout(p.nchw, shapes[x]), Layout(p.nchw, shapes[op.outputs[0]])
    if kind == "depthwise":
        _, kh, kw, cout = shapes[f]
        groups, cg = src.c, 1
    else:
        cout, kh, kw, cg = shapes[f]
        groups = p.groups if kind == "grouped" else 1
    if dst.c != cout or cg * groups != src.c or cout % groups or shapes[b] != (cout,):
        return None
    win = resolve_window(p.pad, src.h, src.w, kh, kw, p.stride_h, p.stride_w, p.dil_h, p.dil_w)
    types = [ctype(ctx, i) for i in range(3)]
    act = _act(p.activation)
    co = dst.ch

    def body(names: list[str], d: Dialect) -> list[str]:
        X, F, B = names
        lines = [f"float acc = {d.load(types[2], B, co)};",
                 f"for (int ky = 0; ky < {kh}; ++ky) {{ int ih = (int){dst.row} * {win.stride_h} - {win.pad_top}"
                 f" + ky * {win.dil_h}; if (ih < 0 || ih >= {src.h}) continue;",
                 f"  for (int kx = 0; kx < {kw}; ++kx) {{ int iw = (int){dst.col} * {win.stride_w} - {win.pad_left}"
                 f" + kx * {win.dil_w}; if (iw < 0 || iw >= {src.w}) continue;"]
        if kind == "depthwise":
            lines.append(f"    acc += {d.load(types[0], X, src.at('ih', 'iw', f'{co} / {cout // src.c}'))} * "
                         f"{d.load(types[1], F, f'(ky * {kw} + kx) * (long){cout} + {co}')};")
        else:
            first = f"({co} / {cout // groups}) * {cg}" if groups > 1 else "0"
            lines.append(f"    long fb = (({co} * {kh} + ky) * (long){kw} + kx) * {cg};")
            xv = d.load(types[0], X, src.at("ih", "iw", f"{first} + ic"))
            lines.append(f"    for (int ic = 0; ic < {cg}; ++ic) acc += {xv} * {d.load(types[1], F, 'fb + ic')};")
        lines += ["  }", "}"]
        return lines + ([act] if act else [])

    return Template({"conv": "conv", "depthwise": "depthwise_conv", "grouped": "grouped_conv"}[kind], [x, f, b], body)


@template(Op.TRANSPOSE_CONV_2D)
def _transpose_conv(ctx: OpContext, shapes: dict) -> Template | None:
    """Output-stationary: output row oy gathers input rows iy with iy * stride + ky == oy + top."""
    operands = _float_conv_operands(ctx, shapes)
    if operands is None:
        return None
    op = ctx.operation
    x, f, b = operands
    p = conv._transpose_params(ctx)
    src, dst = Layout(p.nchw, shapes[x]), Layout(p.nchw, shapes[op.outputs[0]])
    cout, kh, kw, cin = shapes[f]
    if cin != src.c or dst.c != cout or shapes[b] != (cout,):
        return None
    if p.pad.code is not None:  # the reference's implicit padding from the requested output shape
        req = [int(v) for v in ctx.input(3).reshape(-1)]
        if len(req) != 4:
            return None
        req_h, req_w = (req[2], req[3]) if p.nchw else (req[1], req[2])
        top, _ = implicit_padding(req_h, p.stride_h, 1, kh, p.pad.code, transpose=True)
        left, _ = implicit_padding(req_w, p.stride_w, 1, kw, p.pad.code, transpose=True)
    else:
        top, left = p.pad.top, p.pad.left
    if top < 0 or left < 0:
        return None
    types = [ctype(ctx, i) for i in range(3)]
    act = _act(p.activation)
    co = dst.ch
    sh, sw = p.stride_h, p.stride_w

    def body(names: list[str], d: Dialect) -> list[str]:
        X, F, B = names
        lines = [f"float acc = {d.load(types[2], B, co)};",
                 f"for (int ky = 0; ky < {kh}; ++ky) {{ int ty = (int){dst.row} + {top} - ky;"
                 f" if (ty < 0 || ty % {sh}) continue; int ih = ty / {sh}; if (ih >= {src.h}) continue;",
                 f"  for (int kx = 0; kx < {kw}; ++kx) {{ int tx = (int){dst.col} + {left} - kx;"
                 f" if (tx < 0 || tx % {sw}) continue; int iw = tx / {sw}; if (iw >= {src.w}) continue;",
                 f"    long fb = (({co} * {kh} + ky) * (long){kw} + kx) * {cin};",
                 f"    for (int ic = 0; ic < {cin}; ++ic) acc += "
                 f"{d.load(types[0], X, src.at('ih', 'iw', 'ic'))} * {d.load(types[1], F, 'fb + ic')};",
                 "  }", "}"]
        return lines + ([act] if act else [])

    return Template("transpose_conv", [x, f, b], body)


def pool_geometry(ctx: OpContext, shapes: dict):
    """(params, input layout, output layout, window) of a pooling op with constant parameters
    and 4-D non-empty tensors, else None."""
    if not params_known(ctx, range(1, ctx.num_inputs)):
        return None
    x, y = ctx.operation.inputs[0], ctx.operation.outputs[0]
    if not nonempty(shapes, [x, y]) or len(shapes[x]) != 4:
        return None
    p = pooling._params(ctx)
    src, dst = Layout(p.nchw, shapes[x]), Layout(p.nchw, shapes[y])
    return p, src, dst, resolve_window(p.pad, src.h, src.w, p.filter_h, p.filter_w, p.stride_h, p.stride_w)


def _pool(ctx: OpContext, shapes: dict, kind: str) -> Template | None:
    """Average, max or L2 over the in-image taps of each window (padding excluded)."""
    geometry = pool_geometry(ctx, shapes) if same_float(ctx, (0,)) else None
    if geometry is None:
        return None
    p, src, dst, win = geometry
    x = ctx.operation.inputs[0]
    t = ctype(ctx, 0)
    act = _act(p.activation)
    init = "-3.402823466e+38f" if kind == "max" else "0.0f"

    def body(names: list[str], d: Dialect) -> list[str]:
        v = d.load(t, names[0], src.at("ih", "iw", dst.ch))
        update = {"avg": f"acc += {v};", "max": f"acc = fmax(acc, {v});",
                  "l2": f"{{ float v = {v}; acc += v * v; }}"}[kind]
        lines = [f"float acc = {init}; int count = 0;",
                 f"for (int ky = 0; ky < {p.filter_h}; ++ky) {{ int ih = (int){dst.row} * {win.stride_h}"
                 f" - {win.pad_top} + ky; if (ih < 0 || ih >= {src.h}) continue;",
                 f"  for (int kx = 0; kx < {p.filter_w}; ++kx) {{ int iw = (int){dst.col} * {win.stride_w}"
                 f" - {win.pad_left} + kx; if (iw < 0 || iw >= {src.w}) continue; {update} ++count; }}",
                 "}"]
        if kind == "avg":
            lines.append("acc = count ? acc / (float)count : 0.0f;")
        elif kind == "l2":
            lines.append("acc = count ? sqrt(acc / (float)count) : 0.0f;")
        else:
            lines.append("(void)count;")
        return lines + ([act] if act else [])

    return Template(f"{kind}_pool", [x], body)


template(Op.GROUPED_CONV_2D)(lambda ctx, shapes: _conv_kind(ctx, shapes, "grouped"))
template(Op.L2_POOL_2D)(lambda ctx, shapes: _pool(ctx, shapes, "l2"))
_after(Op.CONV_2D, lambda ctx, shapes: _conv_kind(ctx, shapes, "conv"))
_after(Op.DEPTHWISE_CONV_2D, lambda ctx, shapes: _conv_kind(ctx, shapes, "depthwise"))
_after(Op.AVERAGE_POOL_2D, lambda ctx, shapes: _pool(ctx, shapes, "avg"))
_after(Op.MAX_POOL_2D, lambda ctx, shapes: _pool(ctx, shapes, "max"))
