"""CONV_2D, DEPTHWISE_CONV_2D and GROUPED_CONV_2D: parameters, geometry (the shape function),
the reference (numpy kernels in lib/conv_kernels.py) and the device implementations: a window sum
per output element in float or in the reference's exact integer arithmetic with per-channel
requantization, im2col + GEMM for large float convolutions, and a target's hand-written kernels
(a direct convolution of few input channels, a depthwise one) where it has them."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ..hal.types import OperationType as Op
from ..ir import Acc, BufferTensor, Compute, Const, Coords, Expr, Loop, Reduce, Stored, Tensor, Var
from ..ir.storage import FLOAT32_STORAGES
from ..ir.window import Image, inside, tap_col, tap_row, window
from .lib.conv_common import (
    BOOL,
    CONV_TENSOR_CONFIGS,
    F32,
    I32,
    PC,
    TI32,
    Window,
    build_signatures,
    check_padding_below_filter,
    conv_requant_params,
    filter_scales,
    optional_forms,
    output_hw,
    requant_operands,
    requantize_device,
    resolve_window,
    window_geometry,
)
from .lib.conv_kernels import (
    bound_quant_layer,
    depthwise_forward,
    finish,
    float_epilogue,
    grouped_forward,
    operands,
    QuantConvKernel,
    quant_forward,
)
from .lib.conv_params import ConvParams, conv_params, depthwise_params, grouped_params, make_validate
from .lib.device import QUANT8, activation, activation_defines, channel_lanes, floats, gemm_epilogue, largest_divisor
from .lib.dtypes import dtype_of
from .node import OpNode
from .registry import HalVersion, Kernel, OpContext, OpError, OpSpec, Pattern, register

# --- parameter parsing (input positions per the spec) ---------------------------------------


@dataclass(frozen=True)
class ConvGeometry:
    """A forward convolution's extents, checked as the reference checks them."""

    n: int
    h: int
    w: int
    cin: int
    cout: int
    kh: int
    kw: int
    groups: int
    win: Window
    oh: int
    ow: int

    @property
    def cg(self) -> int:
        """Input channels per group."""
        return self.cin // self.groups

    def out_shape(self, nchw: bool) -> tuple[int, int, int, int]:
        return (self.n, self.cout, self.oh, self.ow) if nchw else (self.n, self.oh, self.ow, self.cout)


def conv_geometry(p: ConvParams, kind: str, x_shape, f_shape, b_shape) -> ConvGeometry:
    if len(x_shape) != 4 or len(f_shape) != 4 or len(b_shape) != 1:
        raise OpError(f"input and filter must be 4-D and bias 1-D, got ranks {len(x_shape)}, {len(f_shape)}, "
                      f"{len(b_shape)}")
    n, h, w, cin = (x_shape[0], x_shape[2], x_shape[3], x_shape[1]) if p.nchw else x_shape
    if kind == "depthwise":
        if f_shape[0] != 1:
            raise OpError(f"depthwise filter must have first dimension 1, got {f_shape[0]}")
        cout, groups = f_shape[3], cin
        if p.multiplier * cin != cout:
            raise OpError(f"depth_out {cout} != depth_in {cin} * multiplier {p.multiplier}")
    else:
        cout, groups = f_shape[0], (p.groups if kind == "grouped" else 1)
        if f_shape[3] * groups != cin or cout % groups:
            raise OpError(f"filter {list(f_shape)} does not split input depth {cin} into {groups} groups")
    if b_shape[0] != cout:
        raise OpError(f"bias length {b_shape[0]} != output depth {cout}")
    if h <= 0 or w <= 0 or cin <= 0 or cout <= 0:
        raise OpError("only the batch dimension may be zero")
    kh, kw = f_shape[1], f_shape[2]
    if kh <= 0 or kw <= 0:
        raise OpError("filter spatial size must be positive")
    win = resolve_window(p.pad, h, w, kh, kw, p.stride_h, p.stride_w, p.dil_h, p.dil_w)
    check_padding_below_filter(win, kh, kw)
    oh, ow = output_hw(win, h, w, kh, kw)
    return ConvGeometry(n, h, w, cin, cout, kh, kw, groups, win, oh, ow)


def _geometry(ctx: OpContext, kind: str) -> ConvGeometry:
    return conv_geometry(ctx.params, kind, ctx.in_shape(0), ctx.in_shape(1), ctx.in_shape(2))


def _shape(kind: str):
    return lambda node: [_geometry(node, kind).out_shape(node.params.nchw)]


def _forward(ctx: OpContext, kind: str) -> list[np.ndarray]:
    p = ctx.params
    g = _geometry(ctx, kind)
    x, f, b = operands(ctx, p.nchw)
    if kind == "depthwise":
        acc = depthwise_forward(x, f, p.multiplier, g.win, g.oh, g.ow)
    else:
        acc = grouped_forward(x, f, g.groups, g.win, g.oh, g.ow)
    return finish(ctx, acc, b, p.activation, 3 if kind == "depthwise" else 0, p.nchw)


def _bind(kind: str):
    """The numpy plan's NHWC convolution with constant filter and bias: the reference's kernels
    computing straight into the output buffer, with a quantized filter's float64 form and
    requantization multipliers made once, here (other cases run the reference)."""
    def bind(node: OpNode) -> Kernel | None:
        p = node.params
        in_type = node.in_operand(0).type
        if p.nchw or in_type not in (F32, *QUANT8) or not (node.is_constant(1) and node.is_constant(2)):
            return None
        g = _geometry(node, kind)
        if g.n == 0:
            return None

        def forward(x: np.ndarray, f: np.ndarray, out: np.ndarray | None) -> np.ndarray:
            if kind == "depthwise":
                return depthwise_forward(x, f, p.multiplier, g.win, g.oh, g.ow, out=out)
            return grouped_forward(x, f, g.groups, g.win, g.oh, g.ow, out=out)

        if in_type == F32:
            f, b = node.input(1), node.input(2)

            def kernel(ins, outs: list[np.ndarray]) -> list[np.ndarray]:
                forward(ins[0], f, outs[0])
                float_epilogue(outs[0], b, p.activation)
                return outs
            return kernel
        layer = bound_quant_layer(node, 3 if kind == "depthwise" else 0, p.activation)
        if layer is None:                       # a sum of products past float64's exact integers
            return None
        kernel = QuantConvKernel(quant_forward(kind, *layer, node.in_operand(0).zeroPoint, p.multiplier,
                                               g.groups, g.win, g.oh, g.ow),
                                 (node.in_shape(0), np.dtype(dtype_of(in_type))),
                                 (node.out_shape(0), np.dtype(dtype_of(node.out_operand(0).type))))
        kernel.warm()
        return kernel
    return bind


# --- validation -------------------------------------------------------------------------------


# --- device implementations --------------------------------------------------------------------

def _filter_taps(node: OpNode, f: Tensor, kind: str, prepare) -> Callable[..., Expr]:
    """(ky, kx, ic, co) -> the filter tap. A constant filter is copied as `prepare(weights)` gives
    it (values, operand type) and, but for depthwise, laid out [KH, KW, Cg, Cout]: neighbouring
    threads (output channels) then read neighbouring weights. Else the filter is read as given."""
    if node.known(1):
        values, operand_type = prepare(node.input(1))
        if kind != "depthwise":
            values = np.transpose(values, (1, 2, 3, 0))
        f = node.constant(values, operand_type)
        if kind != "depthwise":
            return lambda ky, kx, ic, co: f.load(Coords(f.shape, [ky, kx, ic, co]))
    if kind == "depthwise":
        return lambda ky, kx, ic, co: f.load(Coords(f.shape, [0, ky, kx, co]))
    return lambda ky, kx, ic, co: f.load(Coords(f.shape, [co, ky, kx, ic]))


def _window_sum(node: OpNode, kind: str, c: Coords, x_at, w_at, init) -> Expr:
    """The convolution at output coordinates c: init(co) plus, over the window's in-image taps
    and the channels of co's group, x_at(input coordinates) * w_at(ky, kx, ic, co)."""
    p, g = node.params, _geometry(node, kind)
    src, dst = Image.of(node.in_shape(0), p.nchw), Image.of(node.out_shape(0), p.nchw)
    bn, oy, ox, co = dst.split(c)
    taps = window(oy, ox, window_geometry(g.win, g.kh, g.kw, g.h, g.w))
    if kind == "depthwise":
        body = x_at(src.at(bn, taps.ih, taps.iw, co / p.multiplier)) * w_at(taps.ky, taps.kx, 0, co)
    else:
        ic = Var("ic", "int")
        first = (co / (g.cout // g.groups)) * g.cg + ic if g.groups > 1 else ic
        body = x_at(src.at(bn, taps.ih, taps.iw, first)) * w_at(taps.ky, taps.kx, ic, co)
        taps = taps.then(Loop(ic, g.cg))
    return Reduce(taps.loops, [Acc(init(co), body, lambda a, v: a + v)])


def _float_conv(kind: str):
    def build(node: OpNode, ins: list):
        x, f, b = ins[:3]
        p, g = node.params, _geometry(node, kind)
        if kind == "conv" and not p.nchw and node.known(1) and node.in_operand(0).type == F32:
            stored = _conv_library(node, ins, g)
            if stored is not None:
                return stored
            # one output pixel: a GEMM of one row, whatever its size, on a target that folds a
            # squeeze-and-excite head's into one kernel (compiler/squeeze_excite.py)
            if (g.n * g.oh * g.ow * g.cout * g.kh * g.kw * g.cin >= node.gemm_min_work()
                    or g.n * g.oh * g.ow == 1 and node.has_library("squeeze_excite")):
                return _conv_gemm(node, x, b, g)
        if kind == "depthwise":
            stored = _depthwise_library(node, ins, g)
            if stored is not None:
                return stored
        w_at = _filter_taps(node, f, kind, lambda w: (w, node.in_operand(1).type))
        bias = lambda co: b.load(Coords(b.shape, [co]))  # noqa: E731
        return Compute(node.out_shape(0), "float",
                       lambda c: activation(_window_sum(node, kind, c, x.load, w_at, bias), p.activation))
    build.__name__ = f"float_{kind}_conv"
    return build


ROW_PIXELS = 4   # output pixels of a row a work-item of kernels/conv.cl computes (depthwise.cl: the fallback)
# the most output pixels of a row a work-item of kernels/depthwise.cl computes, and the most floats
# of their sums (PIX vectors of VW), held in registers (as the CPU GEMM's 4 rows of 64 columns)
ROW_MOST_PIXELS, ROW_MOST_FLOATS = 16, 256


def depthwise_pixels(ow: int, vw: int) -> int:
    """PIX of kernels/depthwise.cl for rows of OW pixels in vectors of VW channels: the whole row
    where it has up to ROW_MOST_PIXELS and its sums fit in ROW_MOST_FLOATS, else the largest
    divisor of OW from 8 down to 4, else 4 (the last strip of a row partial). A strip that
    divides the row is never partial (a partial one takes the bounds-tested path), and at stride 1
    the windows of a longer strip share more of their input loads. On PoCL, alone:
    MobileNet v3's 14 x 14 and 7 x 7 5x5 layers 2-3x faster as whole rows than in strips of 4
    (14 x 14 x 240: 31-42 -> 14-25 us), MobileNet v2's and hand landmarks' 28-112 pixel rows
    1.2-2x in strips of 7 or 8; the compile no slower."""
    if ow <= ROW_MOST_PIXELS and ow * vw <= ROW_MOST_FLOATS:
        return ow
    return next((d for d in range(8, 3, -1) if ow % d == 0), ROW_PIXELS)


def _depthwise_library(node: OpNode, ins: list, g: ConvGeometry) -> Stored | None:
    """The target's hand-written depthwise kernel (compiler/library.py), bias and fused activation
    included, for a float NHWC layer with depth multiplier 1 whose channels make whole vectors of
    16, 8, 4 or 2 and whose indices fit in 32 bits; None where it does not apply (the generated
    kernel: the face detector's 42 channels in pairs rather than one a work-item, 52 -> 23 us in
    the pipeline on PoCL). A folded consumer (THEN) only with vectors of 4 up."""
    p = node.params
    x, f, b = ins[:3]
    vw = channel_lanes(g.cout, narrowest=2)
    if (p.nchw or p.multiplier != 1 or vw is None or node.in_operand(0).type != F32
            or not all(isinstance(t, BufferTensor) for t in (x, f, b)) or f.buffer.storage != "float"
            or b.buffer.storage != "float" or not {x.buffer.storage, node.out_storage(0)} <= FLOAT32_STORAGES
            or max(g.n * g.h * g.w, g.n * g.oh * g.ow) * g.cout >= 2 ** 31 or not node.has_library("depthwise")):
        return None
    pix = depthwise_pixels(g.ow, vw)
    return Stored(node.library("depthwise", [x, f, b], _strips(g, vw, pix), _strip_defines(g, vw, p.activation, pix),
                               then_row=g.cout if vw >= 4 else None))


DIRECT_MAX_CIN, DIRECT_MAX_TAPS = 4, 49   # the layers kernels/conv.cl takes: its unrolled body
DIRECT_MOST_VECTORS = 4   # of output channels a work-item of it: CV * ROW_PIXELS sums in registers


def _conv_library(node: OpNode, ins: list, g: ConvGeometry) -> Stored | None:
    """The target's hand-written direct convolution (compiler/library.py), bias and fused
    activation included, for a float NHWC layer with a constant filter, up to DIRECT_MAX_CIN
    input channels and DIRECT_MAX_TAPS taps (a stem: its GEMM's patch matrix would be as large as
    its output), output channels in whole vectors of 16, 8 or 4, a strip of output pixels to
    share each filter vector, and indices that fit in 32 bits; None where it does not apply
    (im2col and a GEMM, or the generated kernel)."""
    x, _, b = ins[:3]
    vw = channel_lanes(g.cout)
    if (g.groups != 1 or g.oh * g.ow < ROW_PIXELS or g.cin > DIRECT_MAX_CIN or g.kh * g.kw > DIRECT_MAX_TAPS
            or vw is None or not all(isinstance(t, BufferTensor) for t in (x, b)) or b.buffer.storage != "float"
            or not {x.buffer.storage, node.out_storage(0)} <= FLOAT32_STORAGES
            or max(g.n * g.h * g.w * g.cin, g.n * g.oh * g.ow * g.cout) >= 2 ** 31 or not node.has_library("conv")):
        return None
    # [Cout, KH, KW, Cin] -> [KH, KW, Cin, Cout]: a tap's output channels contiguous
    f = node.constant(np.ascontiguousarray(node.input(1).reshape(g.cout, -1).T), F32)
    # up to DIRECT_MOST_VECTORS vectors of channels a work-item: each input broadcast feeds them all
    cv = largest_divisor(g.cout // vw, DIRECT_MOST_VECTORS)
    defines = {**_strip_defines(g, vw, node.params.activation, ROW_PIXELS), "CIN": g.cin, "CV": cv}
    return Stored(node.library("conv", [x, f, b], _strips(g, vw * cv, ROW_PIXELS), defines, then_row=g.cout))


def _strips(g: ConvGeometry, channels: int, pix: int) -> int:
    """The work-items of a row-strip template (kernels/row_strips.h): a strip of `pix` pixels of
    a row times `channels` channels each."""
    return g.n * g.oh * -(-g.ow // pix) * (g.cout // channels)


def _strip_defines(g: ConvGeometry, vw: int, act: int, pix: int) -> dict[str, object]:
    """A row-strip template's #defines for the layer: its geometry, strips of `pix` pixels, and its
    activation's clamp."""
    win = g.win
    return dict(VW=vw, PIX=pix, N=g.n, H=g.h, W=g.w, C=g.cout, OH=g.oh, OW=g.ow, KH=g.kh, KW=g.kw,
                SH=win.stride_h, SW=win.stride_w, DH=win.dil_h, DW=win.dil_w, PT=win.pad_top, PL=win.pad_left,
                **activation_defines(act))


def _conv_gemm(node: OpNode, x: Tensor, b: Tensor, g: ConvGeometry) -> Compute | Stored:
    """CONV_2D as GEMM: patches [N*OH*OW, KH*KW*C] (the input itself for a 1x1 stride-1 unpadded
    conv) times the filter, then bias and activation in the epilogue. The filter [Cout, KH, KW, C]
    is B transposed as it stands, so the GEMM reads the model's weights in place."""
    m, k = g.n * g.oh * g.ow, g.kh * g.kw * g.cin
    w = node.constant(node.input(1).reshape(g.cout, k), F32)
    win = g.win
    direct = g.kh == g.kw == 1 and win.stride_h == win.stride_w == 1 and win.pad_top == win.pad_left == 0 \
        and (g.oh, g.ow) == (g.h, g.w)
    if direct:
        a = x if isinstance(x, BufferTensor) else node.materialize(x, "input", values=True)
    else:
        a = _im2col_library(node, x, g, m, k)
        if a is None:
            a = node.materialize(_im2col(node, x, g, m, k), "im2col", values=True)
    shape, act = node.out_shape(0), node.params.activation
    product = node.gemm(a, w, m, g.cout, k, b_transposed=True, epilogue=gemm_epilogue(b, act))
    if isinstance(product, Stored):
        return product
    return Compute(shape, "float", lambda c: activation(product.at(c.flat_in(shape)) + b.load(Coords(b.shape, [c[3]])),
                                                        act))


def _im2col_library(node: OpNode, x: Tensor, g: ConvGeometry, m: int, k: int) -> BufferTensor | None:
    """The patch matrix by the target's im2col kernel (a work-item per row of it), for a stored
    float input whose indices fit in 32 bits (float16 where the input is a relaxed temporary, or
    where the target stores those so); None where it does not apply."""
    if (not isinstance(x, BufferTensor) or x.buffer.storage not in FLOAT32_STORAGES or not node.has_library("im2col")
            or max(m * k, g.n * g.h * g.w * g.cin) >= 2 ** 31):
        return None
    win = g.win
    defines: dict[str, object] = dict(N=g.n, H=g.h, W=g.w, C=g.cin, OH=g.oh, OW=g.ow, KH=g.kh, KW=g.kw,
                                      SH=win.stride_h, SW=win.stride_w, DH=win.dil_h, DW=win.dil_w,
                                      PT=win.pad_top, PL=win.pad_left)
    return node.library("im2col", [x], m, defines, temp=(m, k), values=True)


def _im2col(node: OpNode, x: Tensor, g: ConvGeometry, m: int, k: int) -> Compute:
    """Row r = (batch, oy, ox), column (ky, kx, ic): the input under that tap, 0 in the padding."""
    geo = window_geometry(g.win, g.kh, g.kw, g.h, g.w)
    src = Image.of(node.in_shape(0), False)

    def value(c: Coords) -> Expr:
        row, col = c[0], c[1]
        ky, kx, ic = col / (g.cin * g.kw), (col / g.cin) % g.kw, col % g.cin
        ih, iw = tap_row((row / g.ow) % g.oh, ky, geo), tap_col(row % g.ow, kx, geo)
        return inside(ih, iw, geo).where(x.load(src.at(row / (g.ow * g.oh), ih, iw, ic)), 0.0)

    return Compute((m, k), "float", value)


def _quant_conv(kind: str):
    def build(node: OpNode, ins: list):
        x, f, b = ins[:3]
        p, g = node.params, _geometry(node, kind)
        per_channel = node.in_operand(1).type == PC
        zx = node.in_operand(0).zeroPoint
        zf = 0 if per_channel else node.in_operand(1).zeroPoint
        channel_dim = 3 if kind == "depthwise" else 0
        requant = requant_operands(node, *conv_requant_params(node, filter_scales(node, 1, channel_dim, g.cout),
                                                              per_channel))
        # int accumulation while the largest possible sum of 8-bit products fits
        acc = "int" if g.kh * g.kw * g.cg * 255 * 255 < 1 << 31 else "long"
        w_at = _filter_taps(node, f, kind, lambda w: (w.astype(np.int32) - zf, TI32))
        if not node.known(1):
            raw = w_at
            w_at = lambda *tap: raw(*tap) - zf  # noqa: E731

        def value(c: Coords) -> Expr:
            total = _window_sum(node, kind, c, lambda at: (x.load(at) - zx).cast(acc),
                                lambda *tap: w_at(*tap).cast(acc), lambda co: Const(0, acc))
            co = Image.of(node.out_shape(0), p.nchw).split(c)[3]
            m, s = requant(co)
            return requantize_device(total.cast("long") + b.load(Coords(b.shape, [co])), m, s, node, p.activation)

        return Compute(node.out_shape(0), "int", value)
    build.__name__ = f"quant_{kind}_conv"
    return build


def _quant_filter(node: OpNode) -> bool:
    t = node.in_operand(0).type
    return t in QUANT8 and node.in_operand(1).type in (t, PC) and node.out_operand(0).type == t


# --- signatures -------------------------------------------------------------------------------

_CONV_FORMS = (optional_forms([I32] * 7, HalVersion.V1_0, [[BOOL], [I32, I32]])
               + optional_forms([I32] * 4, HalVersion.V1_0, [[BOOL], [I32, I32]]))
_DEPTHWISE_FORMS = (optional_forms([I32] * 8, HalVersion.V1_0, [[BOOL], [I32, I32]])
                    + optional_forms([I32] * 5, HalVersion.V1_0, [[BOOL], [I32, I32]]))
_GROUPED_FORMS = [([I32] * 8 + [BOOL], HalVersion.V1_2), ([I32] * 5 + [BOOL], HalVersion.V1_2)]

for _op, _kind, _forms, _parse, _channel_dim in (
        (Op.CONV_2D, "conv", _CONV_FORMS, conv_params, 0),
        (Op.DEPTHWISE_CONV_2D, "depthwise", _DEPTHWISE_FORMS, depthwise_params, 3),
        (Op.GROUPED_CONV_2D, "grouped", _GROUPED_FORMS, grouped_params, 0)):
    _spec = register(OpSpec(_op, build_signatures(CONV_TENSOR_CONFIGS, _forms),
                            lambda ctx, _kind=_kind: _forward(ctx, _kind),
                            make_validate(_parse, _channel_dim, _kind != "grouped"),
                            shape=_shape(_kind), params=_parse, pattern=Pattern.REDUCTION, bind=_bind(_kind)))
    _spec.device(floats(0, 1, 2))(_float_conv(_kind))
    _spec.device(_quant_filter)(_quant_conv(_kind))
