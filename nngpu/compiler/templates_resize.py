"""RESIZE_BILINEAR and RESIZE_NEAREST_NEIGHBOR (float32 / float16, NHWC or NCHW, every
align_corners / half_pixel_centers combination, size by shape or by scale).

The source coordinates are computed per element in float32 with the reference's operation
order. Nearest neighbour is a discontinuous function of them, so its rounding is written to be
exact (no fused multiply-add can form, align_corners' round-half-up is done on the exact
fraction) and checked against the reference's own index tables before the template is used."""
from __future__ import annotations

import numpy as np

from ..hal.types import OperationType as Op
from ..ops import resize
from ..ops.registry import OpContext, OpError
from .render import Dialect
from .templates import Template, template
from .templates_util import ctype, literal, nonempty, params_known, same_copy_type, same_float

F32 = np.float32


def _nearest_device(out_size: int, in_size: int, align: bool, half: bool) -> np.ndarray:
    """What the kernel below computes per output coordinate, in numpy float32."""
    scale = resize._scale(in_size, out_size, align)
    v = np.arange(out_size, dtype=F32)
    pos = ((v + F32(0.5)) * scale) if half else v * scale
    k = np.floor(pos)
    idx = (k + (pos - k >= F32(0.5))) if align else k
    idx = np.minimum(idx.astype(np.int64), in_size - 1)
    return np.maximum(idx, 0)


def _nearest_axis(c: str, out_size: int, in_size: int, align: bool, half: bool, name: str) -> list[str]:
    s = literal(resize._scale(in_size, out_size, align))
    pos = f"((float){c} + 0.5f) * {s}" if half else f"(float){c} * {s}"
    lines = [f"float p{name} = {pos}; float k{name} = floor(p{name});"]
    rounded = f"k{name} + (p{name} - k{name} >= 0.5f ? 1.0f : 0.0f)" if align else f"k{name}"
    lines.append(f"int {name} = (int)({rounded}); {name} = {name} > {in_size - 1} ? {in_size - 1} : "
                 f"({name} < 0 ? 0 : {name});")
    return lines


def _bilinear_axis(c: str, out_size: int, in_size: int, align: bool, half: bool, name: str) -> list[str]:
    """Source position, its two neighbours and the fraction (ComputeInterpolationValues)."""
    s = literal(resize._scale(in_size, out_size, align))
    pos = f"((float){c} + 0.5f) * {s} - 0.5f" if half else f"(float){c} * {s}"
    return [f"float f{name} = {pos};",
            f"int {name}0 = (int)floor(f{name}); {name}0 = {name}0 < 0 ? 0 : {name}0;",
            f"int {name}1 = (int)ceil(f{name}); {name}1 = {name}1 > {in_size - 1} ? {in_size - 1} : {name}1;",
            f"float d{name} = f{name} - (float){name}0;"]


def _resize(ctx: OpContext, shapes: dict, kind: Op) -> Template | None:
    x, y = ctx.operation.inputs[0], ctx.operation.outputs[0]
    copies = kind == Op.RESIZE_NEAREST_NEIGHBOR  # quant8 nearest neighbour is a pure copy
    types_ok = (same_copy_type if copies else same_float)(ctx, [0])
    if not types_ok or not params_known(ctx, range(1, ctx.num_inputs)) or not nonempty(shapes, [x, y]):
        return None
    if len(shapes[x]) != 4:
        return None
    nchw = bool(ctx.scalar(3, False))
    align, half = bool(ctx.scalar(4, False)), bool(ctx.scalar(5, False))
    if align and half:
        raise OpError("align_corners and half_pixel_centers cannot both be set")
    if nchw:
        n, c, in_h, in_w = shapes[x]
    else:
        n, in_h, in_w, c = shapes[x]
    out_h, out_w = resize._output_size(ctx, in_h, in_w)
    if tuple(shapes[y]) != ((n, c, out_h, out_w) if nchw else (n, out_h, out_w, c)):
        return None
    ch, cy, cx = ("c1", "c2", "c3") if nchw else ("c3", "c1", "c2")

    def at(row: str, col: str) -> str:
        if nchw:
            return f"((c0 * {c} + {ch}) * {in_h} + {row}) * (long){in_w} + {col}"
        return f"((c0 * {in_h} + {row}) * (long){in_w} + {col}) * {c} + {ch}"

    t = ctype(ctx, 0)
    if kind == Op.RESIZE_NEAREST_NEIGHBOR:
        for o, i in ((out_h, in_h), (out_w, in_w)):
            if not np.array_equal(_nearest_device(o, i, align, half), resize._nearest_axis(o, i, align, half)):
                return None  # float rounding would differ from the reference: stay on the host

        def nearest(names: list[str], d: Dialect) -> list[str]:
            rows = _nearest_axis(cy, out_h, in_h, align, half, "sy")
            cols = _nearest_axis(cx, out_w, in_w, align, half, "sx")
            return rows + cols + [f"float acc = {d.load(t, names[0], at('sy', 'sx'))};"]

        return Template("resize_nearest", [x], nearest)

    def bilinear(names: list[str], d: Dialect) -> list[str]:
        ld = lambda r, col: d.load(t, names[0], at(r, col))  # noqa: E731
        return (_bilinear_axis(cy, out_h, in_h, align, half, "y") + _bilinear_axis(cx, out_w, in_w, align, half, "x")
                + [f"float acc = {ld('y0', 'x0')} * (1.0f - dy) * (1.0f - dx) + {ld('y1', 'x0')} * dy * (1.0f - dx)"
                   f" + {ld('y0', 'x1')} * (1.0f - dy) * dx + {ld('y1', 'x1')} * dy * dx;"])

    return Template("resize_bilinear", [x], bilinear)


template(Op.RESIZE_BILINEAR)(lambda ctx, shapes: _resize(ctx, shapes, Op.RESIZE_BILINEAR))
template(Op.RESIZE_NEAREST_NEIGHBOR)(lambda ctx, shapes: _resize(ctx, shapes, Op.RESIZE_NEAREST_NEIGHBOR))
