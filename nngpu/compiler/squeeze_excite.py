"""A squeeze-and-excite head folded into one kernel (kernels/squeeze_excite.cl), on a segment's
finished steps after compiler/gemm_fold.py: a float MEAN of one batch (column_sum.cl's
TemplateStep) that alone feeds a GEMM of one row (a 1x1 convolution of the pooled pixel), and
that GEMM's output alone feeding a second one, each with the elementwise kernel folded into it,
if any (MobileNet v3: RELU in the first's clamp, a hard sigmoid folded into the second;
EfficientNet B0: a swish folded into the first, a sigmoid into the second). The three launches
become one, in the last GEMM's place, where every tensor it reads has been written; the mean
and the first layer's output are never stored. Only on a target with the template (a CPU
device: its one work-group runs on one thread, which is all the work needs).
Where the mean pools the output of a depthwise convolution's template kernel (MobileNet v3's and
EfficientNet's blocks), launched in work-groups of the head's size, and everything else the head
reads is there before that kernel, the head runs in that kernel's launch instead
(kernels/depthwise.cl EXCITE_HEAD): its last work-group to finish runs it, counted in a buffer of
one int of its own (a constant 0 the kernel sets back to 0). One launch fewer again."""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import numpy as np

from ..ops.lib.device import channel_lanes, largest_divisor
from .gemm_fold import only_one, positions
from .library import folded_prefix, has_template, specialise
from .render import float_literal
from .render_epilogue import then_source
from .steps import GemmStep, Step, TemplateStep, TensorInfo, reads, writes
from .target import Target

GROUP = 64        # the work-items of the kernel's one work-group
MOST_CHAINS = 8   # sums of a mean a work-item keeps side by side (MCV vectors of MRV sets of rows)
# the largest layer it takes, in weights: one thread reads them (MobileNet v3's largest
# squeeze-and-excite layer has 576 x 144; its classifier's 576 x 1024 stays a GEMM)
MOST_WEIGHTS = 1 << 17


@dataclass
class _Head:
    """A head's kernel, but for its input and output: the folded kernels' preludes (each once) and
    functions, its #defines, the tensors it reads after its input, its operations, its output."""

    preludes: list[str]
    functions: list[str]
    defines: dict[str, object]
    params: list[int]
    ops: list[int]
    out: int

    def text(self, beside: str = "") -> str:
        """The folded kernels' source, less the preludes `beside` (a kernel's text) already has."""
        if not self.functions:
            return ""
        return "\n".join([*(p for p in self.preludes if p not in beside), *self.functions]) + "\n"


def fold_squeeze_excite(steps: list[Step], tensors: dict[int, TensorInfo], aliases: dict[int, int],
                        keep: set[int], target: Target, constants: dict[int, np.ndarray],
                        new_id: Callable[[], int]) -> list[Step]:
    """`steps` with each squeeze-and-excite head (the module's docstring) one TemplateStep, or
    run by the depthwise kernel whose output it pools; the tensors no longer stored leave
    `tensors`, a depthwise kernel's count joins them and `constants` (ids from `new_id`).
    `keep`: tensors read after the segment."""
    if not has_template(target, "squeeze_excite"):
        return steps
    readers, writers = positions(steps, reads), positions(steps, writes)
    viewed = set(aliases.values()) | set(aliases)
    out: list[Step | None] = list(steps)
    for at, mean in enumerate(steps):
        if not (isinstance(mean, TemplateStep) and mean.kind == "column_sum" and mean.defines.get("B") == 1):
            continue
        chain: list[int] = []
        y, width = mean.args[-1], int(mean.defines["C"])
        while len(chain) < 2:
            layer_at = only_one(readers.get(y))
            if layer_at is None or y in keep or y in viewed or not _one_row_layer(out[layer_at], y, width):
                break
            chain.append(layer_at)
            y, width = out[layer_at].args[-1], out[layer_at].n
        if not chain:
            continue
        layers = [out[k] for k in chain]
        head = _head(mean, layers, target)
        producer_at = _pooled_depthwise(out, writers, mean, head)
        if producer_at is None:
            out[chain[-1]] = _alone(mean, head, target)
        else:
            arrived = new_id()
            tensors[arrived] = TensorInfo((1,), "int", pinned=True)
            constants[arrived] = np.zeros(1, np.int32)
            out[producer_at] = _in_depthwise(out[producer_at], head, arrived, target)
            out[chain[-1]] = None
        out[at] = None
        for k in chain[:-1]:
            out[k] = None
        for t in [mean.args[-1], *(layer.args[-1] for layer in layers[:-1])]:
            del tensors[t]
    return [s for s in out if s is not None]


def _one_row_layer(step: Step | None, a: int, k: int) -> bool:
    """Whether `step` is a GEMM of one row that reads `a` [1, k] as A, its weights [N, K] in the
    model's layout, and stores clamp(C + bias) (perhaps through a folded kernel)."""
    return (isinstance(step, GemmStep) and step.m == 1 and step.k == k and step.args[0] == a
            and a not in step.args[1:] and step.b_transposed and step.bounds is not None and step.residual is None
            and (step.then is None or step.folded is not None) and not step.scale_a and step.ldb is None
            and step.n * k <= MOST_WEIGHTS)


def _head(mean: TemplateStep, layers: list[GemmStep], target: Target) -> _Head:
    c = int(mean.defines["C"])
    mv = int(mean.defines["VW"])   # the mean's own vectors: its sums lane for lane (MRV 1) as column_sum.cl's
    cv = largest_divisor(c // mv, MOST_CHAINS)
    defines: dict[str, object] = dict(GROUP=GROUP, R=mean.defines["R"], C=c, MV=mv, MCV=cv, MRV=MOST_CHAINS // cv)
    if "COUNT" in mean.defines:
        defines["COUNT"] = mean.defines["COUNT"]
    params: list[int] = []
    preludes: list[str] = []
    functions: list[str] = []
    for n, layer in enumerate(layers, 1):
        lo, hi = layer.bounds
        defines.update({f"N{n}": layer.n, f"LO{n}": float_literal(lo), f"HI{n}": float_literal(hi)})
        params += layer.args[1:3]   # its weights, its bias
        if layer.folded is not None:   # the folded kernel's function (FIRST before a second layer), its buffers
            kernel, key = layer.folded
            macro = "EXCITE" if n == len(layers) else "FIRST"
            prelude, function = then_source(target.renderer, kernel, key, layer.n, False, macro)
            preludes, functions = preludes + prelude, functions + function
            params += layer.args[3:-1]
    if len(layers) == 2:
        defines["HV"] = channel_lanes(layers[0].n) or 1   # 1: scalars
    ops = sorted(mean.ops + [k for layer in layers for k in layer.ops])
    return _Head(list(dict.fromkeys(preludes)), functions, defines, params, ops, layers[-1].args[-1])


def _alone(mean: TemplateStep, head: _Head, target: Target) -> TemplateStep:
    name = f"{mean.name}_excite"
    source = head.text() + specialise(target, "squeeze_excite", name, head.defines)
    return TemplateStep(name, source, GROUP, [mean.args[0], *head.params, head.out], head.ops,
                        target.schedule.flat(GROUP, GROUP), None, "squeeze_excite", head.defines)


def _pooled_depthwise(steps: list[Step | None], writers: dict[int, list[int]], mean: TemplateStep,
                      head: _Head) -> int | None:
    """The position of the depthwise template kernel that alone writes the mean's input, all of it,
    where it runs in work-groups of GROUP and everything else the head reads is written before it;
    None where there is none."""
    at = only_one(writers.get(mean.args[0]))
    dw = None if at is None else steps[at]
    if not (isinstance(dw, TemplateStep) and dw.kind == "depthwise" and dw.outputs == 1
            and dw.grid.group == (GROUP,) and dw.defines.get("N") == 1
            and dw.defines.get("C") == head.defines["C"]
            and int(dw.defines["OH"]) * int(dw.defines["OW"]) == int(head.defines["R"])):
        return None
    if any(w >= at for t in head.params for w in writers.get(t, [])):
        return None
    return at


def _in_depthwise(dw: TemplateStep, head: _Head, arrived: int, target: Target) -> TemplateStep:
    """The depthwise kernel `dw` running the head in its last work-group (EXCITE_HEAD): its own
    buffers, the head's, then its output, the head's output and the count, all three written."""
    folded = folded_prefix(target, dw)
    defines = {**dw.defines, **{k: v for k, v in head.defines.items() if k != "C"}, "EXCITE_HEAD": 1}
    source = head.text(folded) + folded + specialise(target, dw.kind, dw.name, defines)
    args = [*dw.args[:-1], *head.params, dw.args[-1], head.out, arrived]
    return replace(dw, source=source, args=args, ops=sorted(dw.ops + head.ops), then_row=None, defines=defines,
                   outputs=3)
