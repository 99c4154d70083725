"""Fusion: maximal chains of elementwise operations become one kernel; a convolution, fully
connected or pooling operation heads a group and the elementwise chain after it becomes its
epilogue. A value stays inside a group only when nothing else needs it (one consumer, not a
model output), so every fused intermediate disappears from memory."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ..hal.types import Subgraph


@dataclass
class Group:
    head: int | None                 # a template op (conv, pool, ...) computing the first value
    ops: list[int] = field(default_factory=list)   # elementwise ops, in order
    output: int = -1                 # the operand the kernel stores

    @property
    def all_ops(self) -> list[int]:
        return ([self.head] if self.head is not None else []) + self.ops


def fuse(graph: Subgraph, exprs: dict, heavy: dict, shapes: dict, enabled: bool = True,
         skip: frozenset[int] | set[int] = frozenset()) -> list[Group | int]:
    """Steps in execution order: Groups (device kernels) and bare op indexes (host); ops in
    `skip` (folded at prepare) get none. With `enabled` False every device operation gets a
    kernel of its own (the baseline)."""
    consumers = Counter(i for op in graph.operations for i in op.inputs)
    model_outputs = set(graph.outputIndexes)
    items: list[Group | int] = []
    for k, op in enumerate(graph.operations):
        if k in skip:
            continue
        out = op.outputs[0]
        if k in heavy:
            items.append(Group(head=k, output=out))
            continue
        if k not in exprs:
            items.append(k)
            continue
        last = items[-1] if items else None
        if enabled and isinstance(last, Group) and _extends(last, op, consumers, model_outputs, shapes):
            last.ops.append(k)
            last.output = out
        else:
            items.append(Group(head=None, ops=[k], output=out))
    return items


def _extends(group: Group, op, consumers: Counter, model_outputs: set, shapes: dict) -> bool:
    """Whether `op` can consume the group's current output inside the same kernel."""
    t = group.output
    if t not in op.inputs or consumers[t] != 1 or t in model_outputs:
        return False
    if op.inputs.count(t) != 1:
        return False
    # The kernel iterates over the final output: an op that broadcast the group's value up to
    # a larger shape would recompute the whole chain (and its head) for every copy.
    return shapes.get(op.outputs[0]) == shapes.get(t)
