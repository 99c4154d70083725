"""RESIZE_BILINEAR and RESIZE_NEAREST_NEIGHBOR, as the TFLite reference kernels compute them
(float32 arithmetic; quantized bilinear in the reference's operation order, then truncated
toward zero as its static_cast does; float bilinear separably, columns then rows, within the
corpus tolerance of that order). Output size by shape (INT32) or by scale (FLOAT32 / FLOAT16),
optional NCHW layout (1.2), align_corners and half_pixel_centers (1.3).

On the device, nearest neighbour is a copy (INJECTIVE) whose source index is computed per
element in float32; it is a discontinuous function of the position, so the rounding is written
to be exact (a product that is never contracted, align_corners' round-half-up on the exact
fraction) and checked against the reference's index table before the kernel is used.
Bilinear (a 2x2 window: REDUCTION) reads its neighbours and weights per output row and column
from tables the reference's own functions compute, and sums the four products in the
reference's order without contraction: bit-exact with the quantized reference, so quantized
inputs run there too."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..hal.types import OperandType as T
from ..hal.types import OperationType as Op
from ..ir import BufferTensor, Compute, Expr, Stored, clamp, fn
from ..ir.storage import FLOAT32_STORAGES
from ..ir.window import Image
from .lib.device import COPYABLE, FLOATS, channel_lanes, types_in
from .lib.dtypes import quant_range
from .lib.layout import QUANT8, V, from_nhwc, layout_dims, nhwc_dims, rules, to_nhwc
from .lib.reduce_device import mul_rn
from .node import OpNode
from .registry import Kernel, OpContext, OpError, OpSpec, Pattern, register, sig

F32 = np.float32


def _output_size(ctx: OpContext, in_h: int, in_w: int) -> tuple[int, int]:
    if ctx.in_operand(1).type == T.INT32:
        h, w = int(ctx.scalar(2)), int(ctx.scalar(1))
    else:  # new size = floor(size * scale), the product formed in float32
        h = math.floor(F32(in_h) * F32(ctx.scalar(2)))
        w = math.floor(F32(in_w) * F32(ctx.scalar(1)))
    if h <= 0 or w <= 0:
        raise OpError(f"output size {h}x{w} must be positive")
    return h, w


def _scale(in_size: int, out_size: int, align_corners: bool) -> np.float32:
    if align_corners and out_size > 1:
        return F32(in_size - 1) / F32(out_size - 1)
    return F32(in_size) / F32(out_size)


def _bilinear_axis(out_size: int, in_size: int, align: bool, half: bool):
    """Per output coordinate: the source position and its two neighbours (ComputeInterpolationValues)."""
    scale = _scale(in_size, out_size, align)
    v = np.arange(out_size, dtype=F32)
    pos = (v + F32(0.5)) * scale - F32(0.5) if half else v * scale
    lo = np.maximum(np.floor(pos).astype(np.int64), 0)
    hi = np.minimum(np.ceil(pos).astype(np.int64), in_size - 1)
    return pos.astype(F32), lo, hi


def _neighbours(x: np.ndarray, out_h: int, out_w: int, align: bool, half: bool):
    """(lower, upper source index, fraction d) per output row, then per output column; the
    fractions shaped to broadcast over an NHWC image."""
    fy, y0, y1 = _bilinear_axis(out_h, x.shape[1], align, half)
    fx, x0, x1 = _bilinear_axis(out_w, x.shape[2], align, half)
    return ((y0, y1, (fy - y0.astype(F32)).reshape(1, out_h, 1, 1)),
            (x0, x1, (fx - x0.astype(F32)).reshape(1, 1, out_w, 1)))


def _bilinear(x: np.ndarray, out_h: int, out_w: int, align: bool, half: bool,
              out: np.ndarray | None = None) -> np.ndarray:
    """Float inputs: separable, columns then rows, each a gather of the two neighbours and one
    weighted sum (a few ulp from the reference's four-term sum, within the corpus tolerance).
    Columns first: their gather copies C-long pieces, the rows' whole image rows, so the slower
    gather runs on the smaller image when upsampling. `out`: a float32 NHWC buffer to fill."""
    (y0, y1, dy), (x0, x1, dx) = _neighbours(x, out_h, out_w, align, half)
    cols = _lerp(x.astype(F32, copy=False), x0, x1, dx, axis=2)
    return _lerp(cols, y0, y1, dy, axis=1, out=out)


def _lerp(x: np.ndarray, lo: np.ndarray, hi: np.ndarray, d: np.ndarray, axis: int,
          out: np.ndarray | None = None) -> np.ndarray:
    """x[lo] * (1 - d) + x[hi] * d along `axis`, in `out` (or a new buffer) and one more. The
    indices are in range: mode="clip" only spares np.take its buffered bounds check."""
    out = np.take(x, lo, axis=axis, out=out, mode="clip")
    out *= F32(1) - d
    far = np.take(x, hi, axis=axis, mode="clip")
    far *= d
    out += far
    return out


def _bilinear_exact(x: np.ndarray, out_h: int, out_w: int, align: bool, half: bool) -> np.ndarray:
    """Quantized inputs: the reference's four terms ((v * wy) * wx) summed in its order in
    float32, so the truncation that follows sees the reference's value bit for bit."""
    (y0, y1, dy), (x0, x1, dx) = _neighbours(x, out_h, out_w, align, half)
    xf = x.astype(F32)
    one = F32(1)
    rows = (np.take(xf, y0, axis=1), np.take(xf, y1, axis=1))
    wy, wx = (one - dy, dy), (one - dx, dx)
    out = None
    for i, j, cols in ((0, 0, x0), (1, 0, x0), (0, 1, x1), (1, 1, x1)):   # the reference's order
        term = np.take(rows[i], cols, axis=2)
        term *= wy[i]
        term *= wx[j]
        out = term if out is None else np.add(out, term, out=out)
    return out


def _nearest_axis(out_size: int, in_size: int, align: bool, half: bool) -> np.ndarray:
    """GetNearestNeighbor for every output coordinate."""
    scale = _scale(in_size, out_size, align)
    pos = (np.arange(out_size, dtype=F32) + F32(0.5 if half else 0.0)) * scale
    pos = pos.astype(np.float64)
    idx = (np.sign(pos) * np.floor(np.abs(pos) + 0.5)) if align else np.floor(pos)
    idx = np.minimum(idx.astype(np.int64), in_size - 1)
    return np.maximum(idx, 0) if half else idx


@dataclass(frozen=True)
class ResizeParams:
    nchw: bool
    align: bool           # align_corners
    half: bool            # half_pixel_centers
    in_h: int
    in_w: int
    out_h: int
    out_w: int


def _params(ctx: OpContext) -> ResizeParams:
    shape = ctx.in_shape(0)
    if len(shape) != 4:
        raise OpError(f"input rank {len(shape)} is not 4")
    nchw = bool(ctx.scalar(3, False))
    align, half = bool(ctx.scalar(4, False)), bool(ctx.scalar(5, False))
    if align and half:
        raise OpError("align_corners and half_pixel_centers cannot both be set")
    _, in_h, in_w, c = nhwc_dims(shape, nchw)
    if in_h <= 0 or in_w <= 0 or c <= 0:
        raise OpError(f"input image {in_h}x{in_w}x{c} must not be empty")
    return ResizeParams(nchw, align, half, in_h, in_w, *_output_size(ctx, in_h, in_w))


def _shape(ctx: OpContext) -> list[tuple[int, ...]]:
    p = ctx.params
    n, _, _, c = nhwc_dims(ctx.in_shape(0), p.nchw)
    return [layout_dims(n, p.out_h, p.out_w, c, p.nchw)]


def _resize(kind: Op):
    def reference(ctx: OpContext) -> list[np.ndarray]:
        x, p = ctx.input(0), ctx.params
        img = to_nhwc(x, p.nchw)
        if kind == Op.RESIZE_NEAREST_NEIGHBOR:
            rows = _nearest_axis(p.out_h, p.in_h, p.align, p.half)
            out = img[:, rows][:, :, _nearest_axis(p.out_w, p.in_w, p.align, p.half)]
        elif ctx.in_operand(0).type in QUANT8:  # static_cast<T>(float): truncation toward zero
            out = _bilinear_exact(img, p.out_h, p.out_w, p.align, p.half)
            info = np.iinfo(x.dtype)
            out = np.clip(np.trunc(out, out=out), info.min, info.max, out=out).astype(x.dtype)
        else:
            out = _bilinear(img, p.out_h, p.out_w, p.align, p.half)
        return [from_nhwc(out, p.nchw)]
    return reference


def _bilinear_bind(node: OpNode) -> Kernel | None:
    """The numpy plan's float32 NHWC RESIZE_BILINEAR, straight into its output buffer."""
    p = node.params
    if node.in_operand(0).type != T.TENSOR_FLOAT32 or p.nchw:
        return None

    def kernel(ins, outs: list[np.ndarray]) -> list[np.ndarray]:
        _bilinear(ins[0], p.out_h, p.out_w, p.align, p.half, out=outs[0])
        return outs
    return kernel


# ---- device ----------------------------------------------------------------------------------
def _nearest_device(out_size: int, in_size: int, align: bool, half: bool) -> np.ndarray:
    """What `_nearest_index` computes per output coordinate, in numpy float32."""
    scale = _scale(in_size, out_size, align)
    pos = (np.arange(out_size, dtype=F32) + F32(0.5 if half else 0.0)) * scale
    k = np.floor(pos)
    idx = (k + (pos - k >= F32(0.5))) if align else k
    return np.clip(idx.astype(np.int64), 0, in_size - 1)


def _nearest_index(coord: Expr, out_size: int, in_size: int, align: bool, half: bool) -> Expr:
    """The source row (column) of output row `coord`, exactly as `_nearest_device`."""
    pos = coord.cast("float")
    pos = mul_rn(pos + 0.5 if half else pos, float(_scale(in_size, out_size, align)))
    k = fn("floor", pos)
    if align:
        k = (pos - k >= 0.5).where(k + 1.0, k)
    return clamp(k.cast("long"), 0, in_size - 1)


def _image(node: OpNode, p: ResizeParams) -> tuple[Image, Image]:
    """The input and output images; ValueError (host) when empty."""
    if 0 in node.in_shape(0):
        raise ValueError("empty input")
    return Image.of(node.in_shape(0), p.nchw), Image.of(node.out_shape(0), p.nchw)


def _nearest_device_build(node: OpNode, ins: list) -> Compute:
    x, p = ins[0], node.params
    src, dst = _image(node, p)
    for o, i in ((p.out_h, p.in_h), (p.out_w, p.in_w)):
        if not np.array_equal(_nearest_device(o, i, p.align, p.half), _nearest_axis(o, i, p.align, p.half)):
            raise ValueError("float rounding would differ from the reference")

    def value(c):
        b, row, col, ch = dst.split(c)
        return x.load(src.at(b, _nearest_index(row, p.out_h, p.in_h, p.align, p.half),
                             _nearest_index(col, p.out_w, p.in_w, p.align, p.half), ch))

    return Compute(dst.shape, x.dtype, value)


def _bilinear_tables(node: OpNode, out_size: int, in_size: int, p: ResizeParams):
    """Per output coordinate: its two source coordinates and their weights (1 - d, d)."""
    pos, lo, hi = _bilinear_axis(out_size, in_size, p.align, p.half)
    d = pos - lo.astype(F32)
    return (node.constant(np.stack([lo, hi], axis=1).astype(np.int32), T.TENSOR_INT32),
            node.constant(np.stack([F32(1) - d, d], axis=1), T.TENSOR_FLOAT32))


def _bilinear_library(node: OpNode, x, tables: list) -> Stored | None:
    """The target's resize_bilinear kernel (kernels/resize_bilinear.cl: channel vectors of one
    output pixel a work-item, the generated kernel's bits) for a stored float32 NHWC image whose
    channels 4 divides; None where it does not apply."""
    p, (n, h, w, c) = node.params, node.in_shape(0)
    if (p.nchw or node.in_operand(0).type != T.TENSOR_FLOAT32 or c % 4 or not isinstance(x, BufferTensor)
            or not {x.buffer.storage, node.out_storage(0)} <= FLOAT32_STORAGES
            or max(n * h * w * c, n * p.out_h * p.out_w * c) >= 2 ** 31
            or not node.has_library("resize_bilinear")):
        return None
    vw = channel_lanes(c)
    defines = dict(VW=vw, N=n, H=h, W=w, C=c, OH=p.out_h, OW=p.out_w)
    return Stored(node.library("resize_bilinear", [x, *tables], n * p.out_h * p.out_w * (c // vw), defines))


def _bilinear_device(node: OpNode, ins: list) -> Compute | Stored:
    x, p, t = ins[0], node.params, node.in_operand(0).type
    src, dst = _image(node, p)
    rows, row_w = _bilinear_tables(node, p.out_h, p.in_h, p)
    cols, col_w = _bilinear_tables(node, p.out_w, p.in_w, p)
    stored = _bilinear_library(node, x, [rows, row_w, cols, col_w])
    if stored is not None:
        return stored

    def value(c):
        b, row, col, ch = dst.split(c)
        ys, wy = [rows.at(row * 2 + k) for k in (0, 1)], [row_w.at(row * 2 + k) for k in (0, 1)]
        xs, wx = [cols.at(col * 2 + k) for k in (0, 1)], [col_w.at(col * 2 + k) for k in (0, 1)]
        total = None
        for i, j in ((0, 0), (1, 0), (0, 1), (1, 1)):  # the reference's order of the four terms
            term = mul_rn(mul_rn(x.load(src.at(b, ys[i], xs[j], ch)), wy[i]), wx[j])
            total = term if total is None else total + term
        return clamp(total.cast("int"), *quant_range(t)) if t in QUANT8 else total

    return Compute(dst.shape, x.dtype, value)


def _signatures(kind: Op) -> list:
    """Scalars are INT32 (by shape) or the input's float type (by scale, since 1.2); input 3 is the
    layout flag (1.2; required for NEAREST_NEIGHBOR), inputs 4-5 align_corners and
    half_pixel_centers (1.3)."""
    first = V.V1_0 if kind == Op.RESIZE_BILINEAR else V.V1_2
    types = [(T.TENSOR_FLOAT32, V.V1_0), (T.TENSOR_FLOAT16, V.V1_2), (T.TENSOR_QUANT8_ASYMM, V.V1_2),
             (T.TENSOR_QUANT8_ASYMM_SIGNED, V.V1_3)]
    count_version = {3: V.V1_0, 4: V.V1_2, 5: V.V1_3, 6: V.V1_3}
    out = []
    for t, tv in types:
        for s, sv in ((T.INT32, V.V1_0), (T.FLOAT16 if t == T.TENSOR_FLOAT16 else T.FLOAT32, V.V1_2)):
            for count in range(3 if kind == Op.RESIZE_BILINEAR else 4, 7):
                version = max(first, tv, sv, count_version[count])
                out.append(sig([t, s, s] + [T.BOOL] * (count - 3), [t], version))
    return out


for _kind, _pattern, _types, _build, _bind in (
        (Op.RESIZE_BILINEAR, Pattern.REDUCTION, FLOATS | QUANT8, _bilinear_device, _bilinear_bind),
        (Op.RESIZE_NEAREST_NEIGHBOR, Pattern.INJECTIVE, COPYABLE, _nearest_device_build, None)):
    register(OpSpec(_kind, _signatures(_kind), _resize(_kind), rules(min_rank=4), shape=_shape, params=_params,
                    pattern=_pattern, bind=_bind)).device(types_in(_types, 0))(_build)
