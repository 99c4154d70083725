"""Kernels folded into the GEMM (or hand-written kernel) next to them, on a segment's finished
steps, before its memory plan: each producer's epilogue is known there, and so are every reader
and writer of each tensor. In each case a launch goes, and a tensor is never stored.
- An ADD whose one input is a GEMM's output, read by nothing else, and whose other is a float
  tensor of the same shape (a residual connection: MobileNet v2's and the MediaPipe detectors'
  blocks) folds into that GEMM's epilogue (kernels/gemm.cl RESIDUAL). The same bits:
  clamp(C + bias) as the GEMM stored it, plus the residual (addition commutes exactly), then the
  ADD's own activation, as its kernel computed them.
- Any other elementwise float kernel that alone reads a GEMM's, a depthwise convolution's or a
  max pool's output, at its own element, runs as that producer stores (THEN: the kernel as a C
  function, compiler/render_epilogue.py), the producer then storing the kernel's output as the
  kernel did (a relaxed model's float16 temporary where the producer can store one; the value
  the kernel reads is then the producer's float32 one, not its float16 rounding).
- A kernel storing x[i] * s[i % K] that a GEMM alone reads as its A scales A's columns as the
  GEMM reads them (SCALE_A)."""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Callable

from ..ir.expr import Binary, Const, Expr, Load, Reduce, ReduceOut, Select, walk
from ..ir.kernel import Kernel
from ..ir.storage import FLOAT32_STORAGES
from ..ir.vectorize import row_period
from .library import output_type, respecialise
from .render_epilogue import reads_only_own_element, render_then
from .steps import GemmStep, KernelStep, Step, TemplateStep, TensorInfo, reads, writes
from .target import Target


def fold_residual_adds(steps: list[Step], tensors: dict[int, TensorInfo], aliases: dict[int, int],
                       keep: set[int]) -> list[Step]:
    """`steps` with each foldable ADD kernel merged into the GEMM it reads; the GEMM outputs
    that are no longer stored leave `tensors`. `keep`: tensors read after the segment."""
    writers, readers = positions(steps, writes), positions(steps, reads)
    viewed = set(aliases.values()) | set(aliases)
    out = list(steps)
    for at, step in enumerate(steps):
        if not isinstance(step, KernelStep):
            continue
        found = _residual_add(step.kernel)
        if found is None:
            continue
        a, b, bounds = found
        for y, r in ((a, b), (b, a)):
            gemm_at = only_one(writers.get(y))
            if gemm_at is None or gemm_at > at or not isinstance(out[gemm_at], GemmStep):
                continue
            gemm = out[gemm_at]
            residual_at = writers.get(r, [])
            foldable = (gemm.bounds is not None and gemm.residual is None and gemm.m * gemm.n == step.kernel.size
                        and len(readers.get(y, [])) == 1 and y not in keep and y not in viewed and r != y
                        and len(residual_at) <= 1 and all(w < gemm_at for w in residual_at)
                        and all(tensors.get(t) is not None and tensors[t].storage == "float"
                                for t in (r, step.args[-1])))
            if foldable:
                a_, b_, bias, _ = gemm.args
                out[gemm_at] = replace(gemm, args=[a_, b_, bias, r, step.args[-1]], residual=bounds,
                                       ops=sorted(gemm.ops + step.ops))
                out[at] = None
                del tensors[y]
                break
    return [s for s in out if s is not None]


def fold_elementwise_consumers(steps: list[Step], tensors: dict[int, TensorInfo], aliases: dict[int, int],
                               keep: set[int], target: Target) -> list[Step]:
    """`steps` with each GEMM or template kernel (a depthwise convolution) whose output one
    elementwise float kernel alone reads (every load at its own element: a swish, a hard-swish,
    the face detector's PAD+ADD+RELU) computing that kernel as it stores (GemmStep.then, a
    template's THEN), in the kernel's place; the outputs no longer stored leave `tensors`.
    `keep`: tensors read after the segment."""
    writers, readers = positions(steps, writes), positions(steps, reads)
    viewed = set(aliases.values()) | set(aliases)
    out = list(steps)
    for at, step in enumerate(steps):
        if not isinstance(step, KernelStep) or tensors.get(step.args[-1]) is None:
            continue
        kernel, stored = step.kernel, tensors[step.args[-1]].storage
        if kernel.out.storage != stored or kernel.value.dtype != "float" or stored not in FLOAT32_STORAGES:
            continue
        if any(isinstance(node, (Reduce, ReduceOut)) for node in walk(kernel.value)):
            continue
        for y in step.args[:-1]:
            producer_at = only_one(writers.get(y))
            if producer_at is None or out[producer_at] is None or tensors.get(y) is None:
                continue
            producer = out[producer_at]
            row = _then_row(producer)
            foldable = (row is not None and (stored == "float" or _stores_half(producer, target))
                        and math.prod(tensors[y].shape) == kernel.size and len(readers.get(y, [])) == 1
                        and y not in keep and y not in viewed and reads_only_own_element(kernel, y)
                        and all(len(writers.get(t, [])) <= 1 for t in producer.args[:-1]))
            if not foldable:
                continue
            vectors = isinstance(producer, TemplateStep) or target.schedule.vector > 1
            then = render_then(target.renderer, kernel, y, row, vectors)
            others = [t for t in step.args[:-1] if t != y]
            args = [*producer.args[:-1], *others, step.args[-1]]
            ops = sorted(producer.ops + step.ops)
            # at the kernel's place: the producer's inputs, written once and before it, are still there
            if isinstance(producer, GemmStep):
                out[at] = replace(producer, args=args, then=then, folded=(kernel, y), ops=ops)
            else:   # a template now stores the kernel's output, of the kernel's storage, not its own
                typed = output_type(producer.kind)
                retyped = (producer if typed is None
                           else respecialise(target, producer, {**producer.defines, typed: stored}))
                out[at] = replace(retyped, args=args, source=then + retyped.source, ops=ops, then_row=None)
            out[producer_at] = None
            del tensors[y]
            break
    return [s for s in out if s is not None]


def fold_column_scales(steps: list[Step], tensors: dict[int, TensorInfo], aliases: dict[int, int],
                       keep: set[int]) -> list[Step]:
    """`steps` with each float kernel storing x[i] * s[i % K] that a GEMM alone reads, as its A
    [M, K] (a squeeze-and-excite block's channel gate before a 1x1 convolution), merged into that
    GEMM: it reads x and multiplies each element by s[k] as it loads it (GemmStep.scale_a, the
    same product), and the product is never stored. After the other folds: s joins the GEMM's
    arguments last before C."""
    readers = positions(steps, reads)
    viewed = set(aliases.values()) | set(aliases)
    out = list(steps)
    for at, step in enumerate(steps):
        found = _column_scale(step.kernel) if isinstance(step, KernelStep) else None
        if found is None:
            continue
        y = step.args[-1]
        gemm_at = only_one(readers.get(y))
        if gemm_at is None or y in keep or y in viewed or not isinstance(out[gemm_at], GemmStep):
            continue
        x, gate, period = found
        gemm = out[gemm_at]
        if (gemm.scale_a or gemm.args[0] != y or y in gemm.args[1:] or gemm.k != period
                or gemm.m * gemm.k != step.kernel.size or not _scalable(tensors, x, gate, y, gemm)):
            continue
        out[gemm_at] = replace(gemm, args=[x, *gemm.args[1:-1], gate, gemm.args[-1]], scale_a=True,
                               ops=sorted(gemm.ops + step.ops))
        out[at] = None
        del tensors[y]
    return [s for s in out if s is not None]


def _scalable(tensors: dict[int, TensorInfo], x: int, gate: int, y: int, gemm: GemmStep) -> bool:
    """Whether the GEMM can read x for its A, y, and the gate as its scale: x stored as y is (a
    relaxed model's float16 temporaries read as float16 A), and a float16 gate only by a GEMM of
    float16 matrices (a GPU's, kernels/gemm.cl SCALE_T)."""
    if any(tensors.get(t) is None or tensors[t].storage not in FLOAT32_STORAGES for t in (x, gate, y)):
        return False
    return tensors[x].storage == tensors[y].storage and (tensors[gate].storage == "float" or gemm.half)


def _column_scale(kernel: Kernel) -> tuple[int, int, int] | None:
    """(x, s, K) of a kernel storing x[i] * s[i % K] in float, either factor first."""
    value = kernel.value
    if not (isinstance(value, Binary) and value.op == "*" and value.dtype == "float"):
        return None
    for own, row in ((value.a, value.b), (value.b, value.a)):
        if (isinstance(own, Load) and isinstance(row, Load) and own.index is kernel.index
                and own.dtype == row.dtype == "float" and own.buffer.key != row.buffer.key):
            period = row_period(row.index, kernel)
            if period is not None:
                return own.buffer.key, row.buffer.key, period
    return None


def _stores_half(step: Step, target: Target) -> bool:
    """Whether `step` can store a float16 output: a template with an output type, or a GEMM whose
    epilogue stores one (its C's storage is bound as the segment holds it)."""
    if isinstance(step, TemplateStep):
        return output_type(step.kind) is not None
    return isinstance(step, GemmStep) and target.gemm_half_output


def _then_row(step: Step) -> int | None:
    """The length of the rows a step that can take a folded kernel stores its vectors within;
    None for any other step."""
    if isinstance(step, GemmStep) and step.bounds is not None and step.residual is None and step.then is None:
        return step.n
    if isinstance(step, TemplateStep):
        return step.then_row
    return None


def positions(steps: list[Step], uses: Callable[[Step], list[int]]) -> dict[int, list[int]]:
    """Each tensor's steps (by position) among those that `uses` (reads, writes) names it for."""
    at: dict[int, list[int]] = {}
    for k, step in enumerate(steps):
        for t in uses(step):
            at.setdefault(t, []).append(k)
    return at


def only_one(at: list[int] | None) -> int | None:
    """The one position of a tensor's uses; None for none or several."""
    return at[0] if at is not None and len(at) == 1 else None


def _residual_add(kernel: Kernel) -> tuple[int, int, tuple[float, float]] | None:
    """(the two buffers, the activation's bounds) of a kernel storing act(x[i] + y[i]) in float,
    both read at its own element; None for any other kernel."""
    value, bounds = _unclamp(kernel.value)
    if not (isinstance(value, Binary) and value.op == "+" and value.dtype == "float"):
        return None
    loads = [value.a, value.b]
    if not all(isinstance(x, Load) and x.dtype == "float" and x.index is kernel.index for x in loads):
        return None
    return loads[0].buffer.key, loads[1].buffer.key, bounds


def _unclamp(value: Expr) -> tuple[Expr, tuple[float, float]]:
    """The value inside a fused activation (ops/lib/device.activation: `x < lo ? lo : x`, then
    `v > hi ? hi : v`), and its bounds (the infinities where there is none)."""
    lo, hi = float("-inf"), float("inf")
    if _clamps(value, ">"):
        hi, value = float(value.a.value), value.b
    if _clamps(value, "<"):
        lo, value = float(value.a.value), value.b
    return value, (lo, hi)


def _clamps(value: Expr, op: str) -> bool:
    """`value` is `x OP c ? c : x` for a constant c."""
    if not (isinstance(value, Select) and isinstance(value.cond, Binary) and value.cond.op == op):
        return False
    bound, limit = value.a, value.cond.b
    return (value.cond.a is value.b and isinstance(bound, Const) and isinstance(limit, Const)
            and bound.value == limit.value and bound.dtype == "float")
