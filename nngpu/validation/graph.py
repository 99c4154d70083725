"""Whole-graph rules: subgraph inputs/outputs agree with lifetimes, operations are in execution
order (each operand written exactly once, before it is read), numberOfConsumers is exact, and
(1.3) subgraph references have no cycles."""
from __future__ import annotations

from typing import Any, Sequence

from ..hal.types import OperandLifeTime as L
from .checks import uint32_list
from .errors import ValidationError

# Lifetimes whose value exists before the first operation runs.
KNOWN_AT_START = frozenset({L.SUBGRAPH_INPUT, L.CONSTANT_COPY, L.CONSTANT_REFERENCE, L.NO_VALUE, L.SUBGRAPH})
WRITABLE = frozenset({L.TEMPORARY_VARIABLE, L.SUBGRAPH_OUTPUT})


def check_io_indexes(indexes: Any, operands: Sequence, lifetime: L, what: str) -> list[int]:
    """inputIndexes / outputIndexes: in range, of `lifetime`, unique, and listing every such operand."""
    kind = "input" if lifetime == L.SUBGRAPH_INPUT else "output"
    idx = uint32_list(indexes, f"{what}: {kind}Indexes")
    if not idx:
        raise ValidationError(f"{what}: needs at least one {kind}")
    for k, i in enumerate(idx):
        if i >= len(operands):
            raise ValidationError(f"{what}: {kind} {k} is operand {i} of {len(operands)}")
        if operands[i].lifetime != lifetime:
            raise ValidationError(f"{what}: {kind} {k} (operand {i}) has lifetime {L(operands[i].lifetime).name}")
    if len(set(idx)) != len(idx):
        raise ValidationError(f"{what}: an operand is listed twice as a {kind}")
    listed = set(idx)
    for i, o in enumerate(operands):
        if o.lifetime == lifetime and i not in listed:
            raise ValidationError(f"{what}: operand {i} is a {lifetime.name} missing from {kind}Indexes")
    return idx


def check_execution_order(operations: Sequence, operands: Sequence, what: str) -> None:
    """Operation operand indexes are already range-checked here."""
    known = [o.lifetime in KNOWN_AT_START for o in operands]
    consumers = [0] * len(operands)
    for k, op in enumerate(operations):
        for j, i in enumerate(op.inputs):
            if not known[i]:
                raise ValidationError(f"{what}: operation {k} input {j} (operand {i}) is read before it is written")
            consumers[i] += 1
        for j, i in enumerate(op.outputs):
            if operands[i].lifetime not in WRITABLE:
                raise ValidationError(f"{what}: operation {k} output {j} writes operand {i} of lifetime "
                                      f"{L(operands[i].lifetime).name}")
            if known[i]:
                raise ValidationError(f"{what}: operation {k} output {j} (operand {i}) is already written")
            known[i] = True
    for i, o in enumerate(operands):
        if o.numberOfConsumers != consumers[i]:
            raise ValidationError(f"{what}: operand {i} has numberOfConsumers {o.numberOfConsumers}, "
                                  f"the operations read it {consumers[i]} times")
    for i, k in enumerate(known):
        if not k:
            raise ValidationError(f"{what}: operand {i} is never written")


def check_no_reference_cycles(graphs: Sequence) -> None:
    """graphs[0] is main, graphs[1 + r] is referenced[r]; SUBGRAPH offsets are already in range."""
    edges = [sorted({o.location.offset + 1 for o in g.operands if o.lifetime == L.SUBGRAPH}) for g in graphs]
    state = [0] * len(graphs)  # 0 unvisited, 1 on the current path, 2 done
    for root in range(len(graphs)):
        if state[root]:
            continue
        stack = [(root, iter(edges[root]))]
        state[root] = 1
        while stack:  # iterative DFS: nesting depth is caller-controlled
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[node] = 2
                stack.pop()
            elif state[nxt] == 1:
                raise ValidationError(f"subgraph reference cycle through referenced subgraph {nxt - 1}")
            elif state[nxt] == 0:
                state[nxt] = 1
                stack.append((nxt, iter(edges[nxt])))
