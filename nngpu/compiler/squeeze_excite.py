"""A squeeze-and-excite head folded into one kernel (kernels/squeeze_excite.cl), on a segment's
finished steps after compiler/gemm_fold.py: a float MEAN of one batch (column_sum.cl's
TemplateStep) that alone feeds a GEMM of one row (a 1x1 convolution of the pooled pixel), and
that GEMM's output alone feeding a second one, each with the elementwise kernel folded into it,
if any (MobileNet v3: RELU in the first's clamp, a hard sigmoid folded into the second;
EfficientNet B0: a swish folded into the first, a sigmoid into the second). The three launches
become one, in the last GEMM's place, where every tensor it reads has been written; the mean
and the first layer's output are never stored. Only on a target with the template (a CPU
device: its one work-group runs on one thread, which is all the work needs)."""
from __future__ import annotations

from ..ops.lib.device import channel_lanes, largest_divisor
from .gemm_fold import only_one, positions, reads
from .library import has_template, specialise
from .render import float_literal
from .render_epilogue import then_source
from .steps import GemmStep, Step, TemplateStep, TensorInfo
from .target import Target

GROUP = 64        # the work-items of the kernel's one work-group
MOST_CHAINS = 8   # sums of a mean a work-item keeps side by side (MCV vectors of MRV sets of rows)
# the largest layer it takes, in weights: one thread reads them (MobileNet v3's largest
# squeeze-and-excite layer has 576 x 144; its classifier's 576 x 1024 stays a GEMM)
MOST_WEIGHTS = 1 << 17


def fold_squeeze_excite(steps: list[Step], tensors: dict[int, TensorInfo], aliases: dict[int, int],
                        keep: set[int], target: Target) -> list[Step]:
    """`steps` with each squeeze-and-excite head (the module's docstring) one TemplateStep; the
    tensors no longer stored leave `tensors`. `keep`: tensors read after the segment."""
    if not has_template(target, "squeeze_excite"):
        return steps
    readers = positions(steps, reads)
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
        out[chain[-1]] = _head(mean, layers, target)
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


def _head(mean: TemplateStep, layers: list[GemmStep], target: Target) -> TemplateStep:
    c = int(mean.defines["C"])
    mv = int(mean.defines["VW"])   # the mean's own vectors: its sums lane for lane (RV 1) as column_sum.cl's
    cv = largest_divisor(c // mv, MOST_CHAINS)
    defines: dict[str, object] = dict(GROUP=GROUP, R=mean.defines["R"], C=c, MV=mv, MCV=cv, MRV=MOST_CHAINS // cv)
    if "COUNT" in mean.defines:
        defines["COUNT"] = mean.defines["COUNT"]
    args, heads, bodies = [mean.args[0]], [], []
    for n, layer in enumerate(layers, 1):
        lo, hi = layer.bounds
        defines.update({f"N{n}": layer.n, f"LO{n}": float_literal(lo), f"HI{n}": float_literal(hi)})
        args += layer.args[1:3]   # its weights, its bias
        if layer.folded is not None:   # the folded kernel's function (FIRST before a second layer), its buffers
            kernel, key = layer.folded
            macro = "EXCITE" if n == len(layers) else "FIRST"
            head, body = then_source(target.renderer, kernel, key, layer.n, False, macro)
            heads, bodies = heads + head, bodies + body
            args += layer.args[3:-1]
    if len(layers) == 2:
        defines["HV"] = channel_lanes(layers[0].n) or 1   # 1: scalars
    args.append(layers[-1].args[-1])
    name = f"{mean.name}_excite"
    then = "\n".join([*dict.fromkeys(heads), *bodies]) + "\n" if bodies else ""
    source = then + specialise(target, "squeeze_excite", name, defines)
    ops = sorted(mean.ops + [k for layer in layers for k in layer.ops])
    return TemplateStep(name, source, GROUP, args, ops, target.schedule.flat(GROUP, GROUP), None,
                        "squeeze_excite", defines)
