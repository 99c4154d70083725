"""Buffer planning: tensors whose lifetimes (first to last step that touches them) do not
overlap share one slot, chosen greedily first fit in step order. `first_fit` is the pure
planner; `plan_slots` applies it to a device segment, where model inputs and outputs,
constants and values read after the segment keep slots of their own (the numpy plan,
compiler/numpy_bind.py, applies it to the host buffers of one execution)."""
from __future__ import annotations

from typing import Callable, Mapping

from ..hal.types import OperandLifeTime, Subgraph
from .steps import SegmentSpec

_PINNED = {OperandLifeTime.SUBGRAPH_INPUT, OperandLifeTime.SUBGRAPH_OUTPUT, OperandLifeTime.CONSTANT_COPY,
           OperandLifeTime.CONSTANT_REFERENCE}


def first_fit(first: Mapping[int, int], last: Mapping[int, int], size: Callable[[int], int],
              pinned: Callable[[int], bool]) -> tuple[dict[int, int], list[int]]:
    """(slot of each tensor, slot sizes) for tensors live from step first[t] to last[t]: a slot
    freed after step s is reused from step s + 1 (the first freed first, grown to fit); a
    pinned tensor gets a slot of its own, never reused."""
    slot_of: dict[int, int] = {}
    sizes: list[int] = []
    free: list[int] = []
    release_at: dict[int, list[int]] = {}
    for t in sorted(first, key=lambda i: (first[i], i)):
        s = first[t]
        for at in [a for a in release_at if a < s]:
            free.extend(release_at.pop(at))
        n = size(t)
        keep = pinned(t)
        if keep or not free:
            slot_of[t] = len(sizes)
            sizes.append(n)
        else:
            slot = free.pop(0)
            sizes[slot] = max(sizes[slot], n)
            slot_of[t] = slot
        if not keep:
            release_at.setdefault(last[t], []).append(slot_of[t])
    return slot_of, sizes


def plan_slots(spec: "SegmentSpec", graph: Subgraph, needed_after: set[int]) -> None:
    """Fill spec.slot_of and spec.slot_sizes."""
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for s, step in enumerate(spec.steps):
        for t in step.tensors:
            t = spec.aliases.get(t, t)  # a view lives in its source's buffer
            if t in spec.tensors:
                first.setdefault(t, s)
                last[t] = s
    needed = {spec.aliases.get(t, t) for t in needed_after}

    def pinned(t: int) -> bool:
        return (spec.tensors[t].pinned or t in needed
                or (t < len(graph.operands) and graph.operands[t].lifetime in _PINNED))

    slot_of, spec.slot_sizes = first_fit(first, last, lambda t: max(spec.tensors[t].nbytes, 1), pinned)
    spec.slot_of.update(slot_of)
