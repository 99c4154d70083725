"""A MAX_POOL_2D folded into the depthwise convolution that reads the same input through windows
that hold the pool's, on a segment's finished steps after the other folds: the MediaPipe
detectors' blocks that halve the image take a depthwise convolution at stride 2 of their input
(the face detector's 3x3, from the window's first tap; palm detection's 5x5, padded by 1) and,
for the residual, a 2x2 max pool at stride 2 of it. The depthwise template kernel then also
writes the pool's output (kernels/depthwise.cl POOL_KH / POOL_KW from tap POOL_Y0 / POOL_X0),
with the operations and order of the pool's own kernel, so the same bits: one launch, one read
of the input, in the place of the first of the two."""
from __future__ import annotations

from dataclasses import replace

from .gemm_fold import positions
from .library import folded_prefix, respecialise
from .steps import Step, TemplateStep, reads, writes
from .target import Target

_SAME = ("N", "H", "W", "C", "OH", "OW", "SH", "SW")   # #defines the two kernels share


def fold_sibling_pools(steps: list[Step], target: Target) -> list[Step]:
    """`steps` with each plain float max pool that a depthwise template kernel can compute beside
    its own output (_shares_windows) computed there."""
    writers = positions(steps, writes)
    out: list[Step | None] = list(steps)
    for at, pool in enumerate(steps):
        if not _plain_max_pool(pool, target):
            continue
        for dw_at, dw in enumerate(out):
            if not (isinstance(dw, TemplateStep) and _shares_windows(dw, pool)):
                continue
            first = min(at, dw_at)
            later = out[max(at, dw_at)]
            # the later one runs at the first's place: what it reads must be written before it
            if any(w >= first for t in reads(later) for w in writers.get(t, [])):
                continue
            out[first], out[max(at, dw_at)] = _with_pool(dw, pool, target), None
            break
    return [s for s in out if s is not None]


def _plain_max_pool(step: Step, target: Target) -> bool:
    """A max pool template kernel with no activation and no kernel folded into its stores."""
    return (isinstance(step, TemplateStep) and step.kind == "max_pool" and step.outputs == 1
            and "LO" not in step.defines and "HI" not in step.defines
            and not folded_prefix(target, step))


def _shares_windows(dw: TemplateStep, pool: TemplateStep) -> bool:
    """Whether `dw`, a depthwise template kernel writing one output, reads the pool's input as its
    own, for outputs of the same shape, through windows at the same strides (dilation 1) that hold
    the pool's: its padding at least the pool's, by as few taps as its window is larger."""
    d, p = dw.defines, pool.defines
    return (dw.kind == "depthwise" and dw.outputs == 1 and dw.args[0] == pool.args[0]
            and all(d.get(k) == p.get(k) for k in _SAME) and d.get("DH") == d.get("DW") == 1
            and 0 <= int(d["PT"]) - int(p["PT"]) <= int(d["KH"]) - int(p["KH"])
            and 0 <= int(d["PL"]) - int(p["PL"]) <= int(d["KW"]) - int(p["KW"]))


def _with_pool(dw: TemplateStep, pool: TemplateStep, target: Target) -> TemplateStep:
    d, p = dw.defines, pool.defines
    defines = {**d, "POOL_KH": p["KH"], "POOL_KW": p["KW"], "POOL_Y0": int(d["PT"]) - int(p["PT"]),
               "POOL_X0": int(d["PL"]) - int(p["PL"]), "POOLED_T": p["OUT_T"]}
    return replace(respecialise(target, dw, defines), args=[*dw.args, pool.args[-1]], ops=sorted(dw.ops + pool.ops),
                   outputs=2)
