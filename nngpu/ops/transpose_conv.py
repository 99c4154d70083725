"""TRANSPOSE_CONV_2D: the reference scatters each input pixel's filter-shaped contribution (one
GEMM, then one strided add per filter tap); the device gathers, output-stationary, the input
pixels whose taps land on each output element (ir.window.transposed_window)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..hal.types import OperationType as Op
from ..ir import Acc, Compute, Coords, Loop, Reduce, Var
from ..ir.window import Geometry, Image, transposed_window
from .lib.conv_common import BOOL, CONV_TENSOR_CONFIGS, I32, TI32, build_signatures, implicit_padding
from .lib.conv_kernels import finish, operands
from .lib.conv_params import make_validate, transpose_params
from .lib.device import activation, floats
from .node import OpNode
from .registry import HalVersion, OpContext, OpError, OpSpec, Pattern, register


@dataclass(frozen=True)
class TransposeGeometry:
    n: int
    h: int
    w: int
    cin: int
    cout: int
    kh: int
    kw: int
    top: int
    bottom: int
    left: int
    right: int
    oh: int
    ow: int


def _geometry(ctx: OpContext) -> TransposeGeometry:
    p = ctx.params
    x_shape, f_shape, b_shape = ctx.in_shape(0), ctx.in_shape(1), ctx.in_shape(2)
    if len(x_shape) != 4 or len(f_shape) != 4 or len(b_shape) != 1:
        raise OpError("input and filter must be 4-D and bias 1-D")
    n, h, w, cin = (x_shape[0], x_shape[2], x_shape[3], x_shape[1]) if p.nchw else x_shape
    cout, kh, kw = f_shape[0], f_shape[1], f_shape[2]
    if f_shape[3] != cin or b_shape[0] != cout:
        raise OpError(f"filter {list(f_shape)} / bias {list(b_shape)} do not match input depth {cin}")
    if h <= 0 or w <= 0 or cin <= 0 or cout <= 0 or kh <= 0 or kw <= 0:
        raise OpError("only the batch dimension may be zero")
    if p.pad.code is not None:
        shape = np.asarray(ctx.input(3)).reshape(-1)
        if shape.size != 4:
            raise OpError(f"output shape tensor must have 4 elements, got {shape.size}")
        req_h, req_w = (int(shape[2]), int(shape[3])) if p.nchw else (int(shape[1]), int(shape[2]))
        top, bottom = implicit_padding(req_h, p.stride_h, 1, kh, p.pad.code, transpose=True)
        left, right = implicit_padding(req_w, p.stride_w, 1, kw, p.pad.code, transpose=True)
    else:
        left, right, top, bottom = p.pad.left, p.pad.right, p.pad.top, p.pad.bottom
    # Tail pads may be negative (they resolve the stride > 1 ambiguity); heads may not.
    if left < 0 or top < 0:
        raise OpError("leading padding must be non-negative")
    oh = h * p.stride_h + kh - p.stride_h - top - bottom
    ow = w * p.stride_w + kw - p.stride_w - left - right
    if oh <= 0 or ow <= 0:
        raise OpError(f"output spatial size {oh}x{ow} is empty")
    return TransposeGeometry(n, h, w, cin, cout, kh, kw, top, bottom, left, right, oh, ow)


def _shape(ctx: OpContext) -> list[tuple[int, ...]]:
    g = _geometry(ctx)
    return [(g.n, g.cout, g.oh, g.ow) if ctx.params.nchw else (g.n, g.oh, g.ow, g.cout)]


def _reference(ctx: OpContext) -> list[np.ndarray]:
    p, g = ctx.params, _geometry(ctx)
    x, f, b = operands(ctx, p.nchw)
    sh, sw = p.stride_h, p.stride_w
    full_h = max((g.h - 1) * sh + g.kh, g.top + g.oh)
    full_w = max((g.w - 1) * sw + g.kw, g.left + g.ow)
    # Each input pixel's [KH,KW,Cout] contribution in one GEMM, then one strided add per tap.
    wmat = f.transpose(1, 2, 0, 3).reshape(g.kh * g.kw * g.cout, g.cin)
    contrib = (x.reshape(g.n * g.h * g.w, g.cin) @ wmat.T).reshape(g.n, g.h, g.w, g.kh, g.kw, g.cout)
    buf = np.zeros((g.n, full_h, full_w, g.cout), dtype=x.dtype)
    for i in range(g.kh):
        for j in range(g.kw):
            buf[:, i:i + (g.h - 1) * sh + 1:sh, j:j + (g.w - 1) * sw + 1:sw, :] += contrib[:, :, :, i, j, :]
    acc = buf[:, g.top:g.top + g.oh, g.left:g.left + g.ow, :]
    return finish(ctx, acc, b, p.activation, 0, p.nchw)


_FORMS = [([I32] * 7 + [BOOL], HalVersion.V1_2), ([TI32] + [I32] * 4 + [BOOL], HalVersion.V1_2)]
SPEC = register(OpSpec(Op.TRANSPOSE_CONV_2D, build_signatures(CONV_TENSOR_CONFIGS, _FORMS), _reference,
                       make_validate(transpose_params, 0, False), shape=_shape, params=transpose_params,
                       pattern=Pattern.REDUCTION))


@SPEC.device(floats(0, 1, 2))
def _float_transpose_conv(node: OpNode, ins: list) -> Compute:
    x, f, b = ins[:3]
    p, g = node.params, _geometry(node)
    src, dst = Image.of(node.in_shape(0), p.nchw), Image.of(node.out_shape(0), p.nchw)
    geo = Geometry(g.kh, g.kw, p.stride_h, p.stride_w, g.top, g.left, g.h, g.w)

    def value(c: Coords):
        bn, oy, ox, co = dst.split(c)
        taps = transposed_window(oy, ox, geo)
        ic = Var("ic", "int")
        body = x.load(src.at(bn, taps.ih, taps.iw, ic)) * f.load(Coords(f.shape, [co, taps.ky, taps.kx, ic]))
        red = Reduce(taps.then(Loop(ic, g.cin)).loops, [Acc(b.load(Coords(b.shape, [co])), body, lambda a, v: a + v)])
        return activation(red, p.activation)

    return Compute(node.out_shape(0), "float", value)
