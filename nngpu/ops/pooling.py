"""AVERAGE_POOL_2D, MAX_POOL_2D and L2_POOL_2D.

Windows only count taps inside the image (padding is excluded from averages, as in the
reference). Each kernel folds the filter taps as shifted views of one padded copy of the input
(float sums in float32, like the reference). Quantized average pooling divides the integer sum
with rounding half away from zero; max pooling is exact in the storage type.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..hal.types import OperationType as Op
from ..ir import Acc, BufferTensor, Compute, Const, Coords, Expr, Reduce, Stored, Tensor, clamp, fn
from ..ir.storage import FLOAT32_STORAGES
from ..ir.window import Image, window
from .lib.conv_common import (
    BOOL,
    F16,
    F32,
    I32,
    Q8,
    S8,
    Padding,
    Window,
    bool_arg,
    check_activation,
    check_explicit_pads,
    check_padding_below_filter,
    check_steps,
    clip_activation,
    from_nhwc,
    int_arg,
    is_quant,
    optional_forms,
    output_hw,
    pad_nhwc,
    read_padding,
    resolve_window,
    tap,
    to_nhwc,
    window_geometry,
    window_valid_mask,
    window_view,
)
from .lib.device import (QUANT8, activation, activation_defines, channel_lanes, floats, largest_divisor,
                         types_in)
from .lib.dtypes import quant_range
from .lib.quant import activation_range_quant
from .lib.reduce_device import extreme
from .node import OpNode
from .registry import HalVersion, Kernel, OpContext, OpError, OpSpec, Pattern, register, sig


@dataclass
class PoolParams:
    pad: Padding
    stride_w: int
    stride_h: int
    filter_w: int
    filter_h: int
    activation: int
    nchw: bool


def _params(ctx: OpContext) -> PoolParams:
    pad, k = read_padding(ctx, 1, ctx.num_inputs >= 10)
    p = PoolParams(pad, int_arg(ctx, k), int_arg(ctx, k + 1), int_arg(ctx, k + 2), int_arg(ctx, k + 3),
                   check_activation(int_arg(ctx, k + 4)), bool_arg(ctx, k + 5))
    if p.filter_w <= 0 or p.filter_h <= 0:
        raise OpError(f"filter size must be positive, got {p.filter_w}x{p.filter_h}")
    check_steps(p.stride_h, p.stride_w)
    check_explicit_pads(p.pad)
    return p


def _geometry(ctx: OpContext) -> tuple[PoolParams, Image, Window, int, int]:
    """Params, the input image, the resolved window and the output size, checked as the
    reference checks them."""
    p = ctx.params
    shape = ctx.in_shape(0)
    if len(shape) != 4:
        raise OpError(f"expected a 4-D tensor, got rank {len(shape)}")
    src = Image.of(shape, p.nchw)
    if src.h <= 0 or src.w <= 0 or src.c <= 0:
        raise OpError("only the batch dimension may be zero")
    win = resolve_window(p.pad, src.h, src.w, p.filter_h, p.filter_w, p.stride_h, p.stride_w)
    check_padding_below_filter(win, p.filter_h, p.filter_w)
    oh, ow = output_hw(win, src.h, src.w, p.filter_h, p.filter_w)
    return p, src, win, oh, ow


def _shape(ctx: OpContext) -> list[tuple[int, ...]]:
    p, src, _, oh, ow = _geometry(ctx)
    return [(src.n, src.c, oh, ow) if p.nchw else (src.n, oh, ow, src.c)]


def _setup(ctx: OpContext):
    """The reference's setup: params, NHWC input, resolved window and output size."""
    p, _, win, oh, ow = _geometry(ctx)
    return p, to_nhwc(ctx.input(0), p.nchw), win, oh, ow


# Above this many filter taps (global-style pooling) one reduction over the strided window
# view beats a Python loop of per-tap ufunc calls.
_MAX_TAP_LOOP = 32


def _reduce_taps(x: np.ndarray, p: PoolParams, win, oh: int, ow: int, fill, combine,
                 out: np.ndarray | None = None) -> np.ndarray:
    """combine (np.add / np.maximum) over every filter tap of the padded input, vectorised over
    N, OH, OW, C; `x` is already in the accumulation dtype. Returns an owned array: `out` (an
    [N,OH,OW,C] buffer of that dtype) when given."""
    n, c = x.shape[0], x.shape[3]
    if (oh, ow) == (1, 1) and (p.filter_h, p.filter_w) == x.shape[1:3] and not (
            win.pad_top or win.pad_bottom or win.pad_left or win.pad_right):
        # Global pooling: over H first (inner loops run along whole W*C rows), then over W.
        y = combine.reduce(combine.reduce(x, axis=1), axis=1, out=None if out is None else out.reshape(n, c))
        return y.reshape(n, 1, 1, c)
    xp = pad_nhwc(x, win, fill)
    if p.filter_h * p.filter_w > _MAX_TAP_LOOP:
        view = window_view(xp, win, p.filter_h, p.filter_w, oh, ow)
        return combine.reduce(view, axis=(3, 4), out=out)
    acc = out
    for i in range(p.filter_h):
        for j in range(p.filter_w):
            v = tap(xp, win, i, j, oh, ow)
            if i == j == 0 and acc is None:
                acc = np.array(v)               # owned, contiguous copy of the first tap
            elif i == j == 0:
                np.copyto(acc, v)
            else:
                combine(acc, v, out=acc)
    return acc


def _counts(h: int, w: int, p: PoolParams, win, oh: int, ow: int) -> np.ndarray:
    """[1,OH,OW,1] number of in-image taps per window of an HxW image (padding is not counted)."""
    mask = window_valid_mask(win, h, w, p.filter_h, p.filter_w, oh, ow)
    return mask.sum(axis=(2, 3))[None, :, :, None]


def _quant_clamp(ctx: OpContext, y: np.ndarray, activation: int) -> np.ndarray:
    out = ctx.out_operand(0)
    lo, hi = activation_range_quant(activation, out.scale, out.zeroPoint, out.type)
    return np.clip(y, lo, hi)


def _average(ctx: OpContext) -> list[np.ndarray]:
    p, x, win, oh, ow = _setup(ctx)
    count = _counts(x.shape[1], x.shape[2], p, win, oh, ow)             # >= 1
    if is_quant(ctx.in_operand(0).type):
        total = _reduce_taps(x.astype(np.int64), p, win, oh, ow, 0, np.add)
        # (sum ± count/2) / count with C truncation: rounds half away from zero.
        count = count.astype(np.int64)
        half = count // 2
        q = np.where(total >= 0, (total + half) // count, -((-total + half) // count))
        y = _quant_clamp(ctx, q, p.activation)
    else:
        y = _reduce_taps(x.astype(np.float32, copy=False), p, win, oh, ow, 0, np.add)
        y /= count.astype(np.float32)
        clip_activation(y, p.activation)
    return [from_nhwc(y, p.nchw)]


def _max(ctx: OpContext) -> list[np.ndarray]:
    p, x, win, oh, ow = _setup(ctx)
    # Max is exact in the storage dtype; padding never wins.
    fill = -np.inf if np.issubdtype(x.dtype, np.floating) else np.iinfo(x.dtype).min
    y = _reduce_taps(x, p, win, oh, ow, fill, np.maximum)
    if is_quant(ctx.in_operand(0).type):
        y = _quant_clamp(ctx, y.astype(np.int64), p.activation)
    else:
        clip_activation(y, p.activation)
    return [from_nhwc(y, p.nchw)]


def _float_bind(kind: str):
    """The numpy plan's float32 NHWC average / max pooling, straight into its output buffer."""
    def bind(node: OpNode) -> Kernel | None:
        p, src, win, oh, ow = _geometry(node)
        if node.in_operand(0).type != F32 or p.nchw or src.n == 0:
            return None
        count = _counts(src.h, src.w, p, win, oh, ow).astype(np.float32)

        def kernel(ins, outs: list[np.ndarray]) -> list[np.ndarray]:
            if kind == "avg":
                y = _reduce_taps(ins[0], p, win, oh, ow, 0, np.add, out=outs[0])
                y /= count
            else:
                y = _reduce_taps(ins[0], p, win, oh, ow, -np.inf, np.maximum, out=outs[0])
            clip_activation(y, p.activation)
            return outs
        return kernel
    return bind


def _l2(ctx: OpContext) -> list[np.ndarray]:
    p, x, win, oh, ow = _setup(ctx)
    count = _counts(x.shape[1], x.shape[2], p, win, oh, ow).astype(np.float32)
    sq = _reduce_taps(np.square(x, dtype=np.float32), p, win, oh, ow, 0, np.add)
    y = np.sqrt(sq / count, out=sq)
    return [from_nhwc(clip_activation(y, p.activation), p.nchw)]


# ---- device implementations: one window reduction per output element -------------------------


def _taps(node: OpNode, c: Coords):
    """(params, the input tensor's coordinates at a tap, the taps of c's window)."""
    p, src, win, _, _ = _geometry(node)
    bn, oy, ox, ch = Image.of(node.out_shape(0), p.nchw).split(c)
    taps = window(oy, ox, window_geometry(win, p.filter_h, p.filter_w, src.h, src.w))
    return p, src.at(bn, taps.ih, taps.iw, ch), taps


POOL_ITEMS = 512   # work-items a max pool keeps where it can (8 work-groups of 64), its threads' share


def _max_pool_library(node: OpNode, x: Tensor) -> Stored | None:
    """The target's hand-written float MAX_POOL_2D (kernels/max_pool.cl), in vectors of channels,
    for an NHWC float32 input whose channels make whole vectors of 16, 8, 4 or 2 and whose
    indices fit in 32 bits; None where it does not apply (the generated kernel). A work-item
    takes as many of a pixel's vectors as leave POOL_ITEMS work-items (a work-item's fixed cost
    is most of a small pool's time on PoCL); a folded consumer (THEN) only with vectors of 4 up."""
    p, src, win, oh, ow = _geometry(node)
    vw = channel_lanes(src.c, narrowest=2)
    if (p.nchw or vw is None or node.in_operand(0).type != F32 or not isinstance(x, BufferTensor)
            or not {x.buffer.storage, node.out_storage(0)} <= FLOAT32_STORAGES
            or max(src.h * src.w, oh * ow) * src.n * src.c >= 2 ** 31
            or not node.has_library("max_pool")):
        return None
    pixels, vectors = src.n * oh * ow, src.c // vw
    pv = largest_divisor(vectors, vectors, lambda d: pixels * vectors // d >= POOL_ITEMS)
    defines: dict[str, object] = dict(VW=vw, PV=pv, N=src.n, H=src.h, W=src.w, C=src.c, OH=oh, OW=ow,
                                      KH=p.filter_h, KW=p.filter_w, SH=win.stride_h, SW=win.stride_w,
                                      PT=win.pad_top, PL=win.pad_left, **activation_defines(p.activation))
    return Stored(node.library("max_pool", [x], pixels * vectors // pv, defines,
                               then_row=src.c if vw >= 4 else None))


def _float_pool(kind: str):
    def build(node: OpNode, ins: list) -> Compute | Stored:
        x = ins[0]
        if kind == "max":
            stored = _max_pool_library(node, x)
            if stored is not None:
                return stored

        def value(c: Coords) -> Expr:
            p, at, taps = _taps(node, c)
            v = x.load(at)
            if kind == "max":
                y = extreme(taps.loops, v, largest=True)   # NaN wins, as np.maximum (fmax would drop it)
            else:
                red = Reduce(taps.loops, [Acc(Const(0.0, "float"), v * v if kind == "l2" else v, lambda a, e: a + e),
                                          Acc(Const(0, "int"), Const(1, "int"), lambda a, e: a + e)])
                count = red.out(1)
                mean = count.where(red / count.cast("float"), 0.0)
                y = fn("sqrt", mean) if kind == "l2" else mean
            return activation(y, p.activation)

        return Compute(node.out_shape(0), "float", value)
    build.__name__ = f"float_{kind}_pool"
    return build


def _quant_pool(kind: str):
    def build(node: OpNode, ins: list) -> Compute:
        x = ins[0]
        out = node.out_operand(0)

        def value(c: Coords) -> Expr:
            p, at, taps = _taps(node, c)
            v = x.load(at)
            lo, hi = activation_range_quant(p.activation, out.scale, out.zeroPoint, out.type)
            if kind == "max":
                y = Reduce(taps.loops, [Acc(Const(quant_range(out.type)[0], "int"), v, lambda a, e: (e > a).where(e, a))])
                return clamp(y, lo, hi)
            red = Reduce(taps.loops, [Acc(Const(0, "int"), v, lambda a, e: a + e),
                                      Acc(Const(0, "int"), Const(1, "int"), lambda a, e: a + e)])
            total, count = red, red.out(1)
            # (sum ± count/2) / count with C truncation: rounds half away from zero
            half = count / 2
            return clamp((total >= 0).where((total + half) / count, -((half - total) / count)), lo, hi)

        return Compute(node.out_shape(0), "int", value)
    build.__name__ = f"quant_{kind}_pool"
    return build


def _validate(ctx: OpContext) -> None:
    rank = len(ctx.in_operand(0).dimensions)
    if rank and rank != 4:
        raise OpError("input must be 4-D")
    if all(ctx.values[i] is not None or ctx.is_omitted(i) for i in range(1, ctx.num_inputs)):
        _params(ctx)


def _signatures(types: list[tuple]) -> list:
    forms = (optional_forms([I32] * 9, HalVersion.V1_0, [[BOOL]])
             + optional_forms([I32] * 6, HalVersion.V1_0, [[BOOL]]))
    return [sig([t, *scalars], [t], max(tv, fv)) for t, tv in types for scalars, fv in forms]


_ALL = [(F32, HalVersion.V1_0), (Q8, HalVersion.V1_0), (F16, HalVersion.V1_2), (S8, HalVersion.V1_3)]
_FLOATS = [(F32, HalVersion.V1_0), (F16, HalVersion.V1_2)]
for _op, _kind, _ref, _types in ((Op.AVERAGE_POOL_2D, "avg", _average, _ALL), (Op.MAX_POOL_2D, "max", _max, _ALL),
                                 (Op.L2_POOL_2D, "l2", _l2, _FLOATS)):
    _spec = register(OpSpec(_op, _signatures(_types), _ref, _validate, shape=_shape, params=_params,
                            pattern=Pattern.REDUCTION, bind=None if _kind == "l2" else _float_bind(_kind)))
    _spec.device(floats(0))(_float_pool(_kind))
    if _kind != "l2":
        _spec.device(types_in(QUANT8, 0))(_quant_pool(_kind))
