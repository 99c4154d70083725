"""Reductions as per-output-element loops (float32 / float16, computed in float32 as the
reference does): MEAN, REDUCE_SUM / PROD / MAX / MIN over any axis set, and the per-axis
normalizations SOFTMAX, LOG_SOFTMAX, L2_NORMALIZATION and LOCAL_RESPONSE_NORMALIZATION, where
every element re-reads its slice (fine for the short axes of classifier heads and channel
vectors). Sums are compensated (Kahan), so their error stays below the reference's pairwise
float32 summation."""
from __future__ import annotations

import numpy as np

from ..hal.types import OperationType as Op
from ..ops import reduce
from ..ops.registry import OpContext
from .render import Dialect
from .templates import Template, template
from .templates_util import ctype, literal, nonempty, params_known, same_float, strides

_MAX_SLICE = 1 << 16      # longer softmax / L2 axes would make each thread's loop too long: host
_MAX_REDUCED = 1 << 20    # the same for the elements one reduction output reads

# acc update per value v, and the initial accumulator, per reduction
_UPDATE = {
    Op.MEAN: "sum", Op.REDUCE_SUM: "sum",
    Op.REDUCE_PROD: "acc *= v;",
    Op.REDUCE_MAX: "acc = (v != v || v > acc) ? v : acc;",   # NaN propagates, as np.max
    Op.REDUCE_MIN: "acc = (v != v || v < acc) ? v : acc;",
}
_INIT = {Op.MEAN: "0.0f", Op.REDUCE_SUM: "0.0f", Op.REDUCE_PROD: "1.0f",
         Op.REDUCE_MAX: "-(1.0f / 0.0f)", Op.REDUCE_MIN: "(1.0f / 0.0f)"}
_KAHAN = "{ float yk = v - comp; float tk = acc + yk; comp = (tk - acc) - yk; acc = tk; }"


def _offset_loop(var: str, axes: list[tuple[int, int]]) -> list[str]:
    """Unravel loop counter r over the reduced (extent, stride) axes into offset `var`."""
    lines = [f"long {var} = 0; long q = r;"]
    for extent, stride in reversed(axes):
        lines.append(f"{var} += (q % {extent}) * {stride}L; q /= {extent};")
    return lines


def _reduction(ctx: OpContext, shapes: dict) -> Template | None:
    kind = ctx.operation.type
    x, y = ctx.operation.inputs[0], ctx.operation.outputs[0]
    if not same_float(ctx, [0]) or not params_known(ctx, [1, 2]) or not nonempty(shapes, [x, y]):
        return None
    in_shape = tuple(shapes[x])
    axes = reduce._axes(ctx, len(in_shape))
    keep = ctx.scalar(2)
    keep = keep > 0 if kind == Op.MEAN else bool(keep)
    if reduce._out_shape(in_shape, axes, keep) != tuple(shapes[y]):
        return None
    s = strides(in_shape)
    kept = [k for k in range(len(in_shape)) if k not in axes]
    # output coordinate of each kept input axis: its own position when dims are kept
    coord = {k: (k if keep else n) for n, k in enumerate(kept)}
    base = " + ".join(f"c{coord[k]} * {s[k]}L" for k in kept if s[k] and in_shape[k] > 1) or "0"
    reduced = [(in_shape[a], s[a]) for a in axes]
    count = int(np.prod([e for e, _ in reduced], dtype=np.int64))
    if count > _MAX_REDUCED:
        return None
    t = ctype(ctx, 0)
    update = _KAHAN if _UPDATE[kind] == "sum" else _UPDATE[kind]

    def body(names: list[str], d: Dialect) -> list[str]:
        lines = [f"float acc = {_INIT[kind]}; float comp = 0.0f; long xb = {base};",
                 f"for (long r = 0; r < {count}; ++r) {{"]
        lines += ["  " + s for s in _offset_loop("off", reduced)]
        lines += [f"  float v = {d.load(t, names[0], 'xb + off')};", f"  {update}", "}", "(void)comp;"]
        if kind == Op.MEAN:
            lines.append(f"acc = acc / {literal(float(count))};")
        return lines

    return Template("reduce", [x], body)


for _op in _UPDATE:
    template(_op)(_reduction)


def _axis_op(ctx: OpContext, shapes: dict, axis_input: int, default_axis) -> tuple | None:
    """(input operand, axis extent, axis stride, storage type) of a per-axis normalization."""
    x, y = ctx.operation.inputs[0], ctx.operation.outputs[0]
    if not same_float(ctx, [0]) or not params_known(ctx, range(1, ctx.num_inputs)) or not nonempty(shapes, [x, y]):
        return None
    shape = tuple(shapes[x])
    if tuple(shapes[y]) != shape or not 1 <= len(shape) <= 4:
        return None
    axis = reduce.resolve_axis(int(ctx.scalar(axis_input, default_axis)), len(shape))
    if shape[axis] > _MAX_SLICE:
        return None
    return x, shape[axis], strides(shape)[axis], ctype(ctx, 0), axis


def _slice_loop(d: Dialect, t: str, name: str, extent: int, stride: int, statement: str) -> str:
    return (f"for (int j = 0; j < {extent}; ++j) {{ float v = {d.load(t, name, f'xb + j * {stride}L')}; "
            f"{statement} }}")


def _softmax(ctx: OpContext, shapes: dict, log: bool) -> Template | None:
    geo = _axis_op(ctx, shapes, 2, -1)
    if geo is None:
        return None
    x, extent, stride, t, axis = geo
    beta = literal(float(ctx.scalar(1)))

    def body(names: list[str], d: Dialect) -> list[str]:
        X = names[0]
        lines = [f"long xb = i - c{axis} * {stride}L;", "float mx = -(1.0f / 0.0f);",
                 _slice_loop(d, t, X, extent, stride, "mx = (v != v || v > mx) ? v : mx;"),
                 "float sum = 0.0f, comp = 0.0f;",
                 _slice_loop(d, t, X, extent, stride,
                             f"v = exp((v - mx) * {beta}); " + _KAHAN.replace("acc", "sum")),
                 f"float own = ({d.load(t, X, 'i')} - mx) * {beta};"]
        lines.append("float acc = own - log(sum);" if log else "float acc = exp(own) / sum;")
        return lines

    return Template("log_softmax" if log else "softmax", [x], body)


template(Op.SOFTMAX)(lambda ctx, shapes: _softmax(ctx, shapes, False))
template(Op.LOG_SOFTMAX)(lambda ctx, shapes: _softmax(ctx, shapes, True))


@template(Op.L2_NORMALIZATION)
def _l2_normalization(ctx: OpContext, shapes: dict) -> Template | None:
    geo = _axis_op(ctx, shapes, 1, -1)
    if geo is None:
        return None
    x, extent, stride, t, axis = geo

    def body(names: list[str], d: Dialect) -> list[str]:
        return [f"long xb = i - c{axis} * {stride}L;", "float sum = 0.0f, comp = 0.0f;",
                _slice_loop(d, t, names[0], extent, stride, "v = v * v; " + _KAHAN.replace("acc", "sum")),
                f"float acc = {d.load(t, names[0], 'i')} / fmax(sqrt(sum), 1e-6f);"]

    return Template("l2_normalization", [x], body)


@template(Op.LOCAL_RESPONSE_NORMALIZATION)
def _local_response_normalization(ctx: OpContext, shapes: dict) -> Template | None:
    """x * (bias + alpha * sum of squares over [c - radius, c + radius] on the axis) ^ -beta."""
    geo = _axis_op(ctx, shapes, 5, -1)
    if geo is None:
        return None
    x, extent, stride, t, axis = geo
    radius = int(ctx.scalar(1))
    bias, alpha, beta = (literal(float(np.float32(ctx.scalar(k)))) for k in (2, 3, 4))
    if radius < 0:
        return None

    def body(names: list[str], d: Dialect) -> list[str]:
        v = d.load(t, names[0], f"xb + j * {stride}L")
        return [f"long xb = i - c{axis} * {stride}L;", "float sum = 0.0f, comp = 0.0f;",
                f"int lo = (int)c{axis} - {radius}; lo = lo < 0 ? 0 : lo;",
                f"int hi = (int)c{axis} + {radius}; hi = hi > {extent - 1} ? {extent - 1} : hi;",
                f"for (int j = lo; j <= hi; ++j) {{ float v = {v}; v = v * v; {_KAHAN.replace('acc', 'sum')} }}",
                f"float acc = {d.load(t, names[0], 'i')} * pow({bias} + {alpha} * sum, -{beta});"]

    return Template("local_response_normalization", [x], body)
