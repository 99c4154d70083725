"""Buffer planning: every device tensor gets a slot; intermediates whose lifetimes do not
overlap share one. Model inputs, outputs and constants keep slots of their own."""
from __future__ import annotations

import numpy as np

from ..hal.types import OperandLifeTime, Subgraph
from ..ops.dtypes import dtype_of

_PINNED = {OperandLifeTime.SUBGRAPH_INPUT, OperandLifeTime.SUBGRAPH_OUTPUT, OperandLifeTime.CONSTANT_COPY,
           OperandLifeTime.CONSTANT_REFERENCE}


def nbytes(graph: Subgraph, idx: int, shapes: dict) -> int:
    return int(np.prod(shapes[idx], dtype=np.int64)) * dtype_of(graph.operands[idx].type).itemsize


def plan_buffers(spec, graph: Subgraph) -> None:
    """Fill spec.buffer_of and spec.slot_sizes (greedy first-fit over step order)."""
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for s, step in enumerate(spec.steps):
        used = step.args if hasattr(step, "args") else [*step.inputs, *step.outputs]
        for idx in used:
            idx = spec.aliases.get(idx, idx)  # a reshaped view lives in its source's buffer
            if idx in spec.device_tensors:
                first.setdefault(idx, s)
                last[idx] = s
    slot_sizes: list[int] = []
    free: list[int] = []
    release_at: dict[int, list[int]] = {}
    for idx in sorted(first, key=lambda i: (first[i], i)):
        s = first[idx]
        for t, slots in list(release_at.items()):
            if t < s:
                free.extend(slots)
                del release_at[t]
        size = max(nbytes(graph, idx, spec.shapes), 1)
        if graph.operands[idx].lifetime in _PINNED:
            spec.buffer_of[idx] = len(slot_sizes)
            slot_sizes.append(size)
            continue
        slot = free.pop(0) if free else None
        if slot is None:
            slot = len(slot_sizes)
            slot_sizes.append(size)
        else:
            slot_sizes[slot] = max(slot_sizes[slot], size)
        spec.buffer_of[idx] = slot
        release_at.setdefault(last[idx], []).append(slot)
    for view, source in spec.aliases.items():
        if source in spec.buffer_of:
            spec.buffer_of[view] = spec.buffer_of[source]
    spec.slot_sizes = slot_sizes
