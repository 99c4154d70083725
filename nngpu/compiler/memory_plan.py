"""Buffer planning for a segment: every device tensor it creates gets a slot; intermediates
whose lifetimes (first to last step that touches them) do not overlap share one. Model inputs
and outputs, constants and values read after the segment keep slots of their own."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..hal.types import OperandLifeTime, Subgraph

if TYPE_CHECKING:
    from .lower import SegmentSpec

_PINNED = {OperandLifeTime.SUBGRAPH_INPUT, OperandLifeTime.SUBGRAPH_OUTPUT, OperandLifeTime.CONSTANT_COPY,
           OperandLifeTime.CONSTANT_REFERENCE}


def plan_slots(spec: "SegmentSpec", graph: Subgraph, needed_after: set[int]) -> None:
    """Fill spec.slot_of and spec.slot_sizes (greedy first fit in step order)."""
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for s, step in enumerate(spec.steps):
        for t in step.tensors:
            t = spec.aliases.get(t, t)  # a view lives in its source's buffer
            if t in spec.tensors:
                first.setdefault(t, s)
                last[t] = s
    needed = {spec.aliases.get(t, t) for t in needed_after}
    sizes: list[int] = []
    free: list[int] = []
    release_at: dict[int, list[int]] = {}
    for t in sorted(first, key=lambda i: (first[i], i)):
        s = first[t]
        for at in [a for a in release_at if a < s]:
            free.extend(release_at.pop(at))
        size = max(spec.tensors[t].nbytes, 1)
        pinned = spec.tensors[t].pinned or t in needed or (t < len(graph.operands) and graph.operands[t].lifetime in _PINNED)
        if pinned or not free:
            spec.slot_of[t] = len(sizes)
            sizes.append(size)
        else:
            slot = free.pop(0)
            sizes[slot] = max(sizes[slot], size)
            spec.slot_of[t] = slot
        if not pinned:
            release_at.setdefault(last[t], []).append(spec.slot_of[t])
    spec.slot_sizes = sizes
