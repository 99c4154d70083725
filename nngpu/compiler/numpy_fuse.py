"""Fusion of the numpy plan's 8-bit table lookups, after binding and before the memory layout.

An 8-bit elementwise operation of one tensor is a 256-entry table (ops/lib/byte_tables.py), and
of two tensors a 65,536-entry one. Where a table step reads only values derived by tables from
one tensor x, its result is a function of x alone, and its table composes at prepare:
    T2(T1(x))      -> table[b] = T2[byte of T1[b]]
    f(T1(x))       -> table[b] = f(T1[b])     (f elementwise: QUANTIZE of a DEQUANTIZE's table)
    P(x, T1(x))    -> table[b] = P[b * 256 + byte of T1[b]]       (and P(T1(x), x) likewise)
The swish of a quantized EfficientNet, MUL(x, LOGISTIC(x)), becomes one lookup in x. A step whose
every reader was fused away, and which is no graph output, is dropped. The tables are the
references' own, so the composition is exact."""
from __future__ import annotations

from dataclasses import replace
from typing import Sequence

import numpy as np

from ..ops.lib.byte_tables import ByteTable, ElementwiseMap, PairTable
from .steps import BoundStep


def _bytes(table: np.ndarray) -> np.ndarray:
    """A table's entries as the bytes that index the next table."""
    return table.view(np.uint8).astype(np.intp)


def _composed(step: BoundStep, producers: dict[int, BoundStep]) -> tuple[int, np.ndarray] | None:
    """(x, the table of `step` as a function of x's byte), when it is one."""
    kernel = step.kernel
    if isinstance(kernel, (ByteTable, ElementwiseMap)):
        inner = producers.get(step.inputs[0])
        if inner is None or not isinstance(inner.kernel, ByteTable):
            return None
        if isinstance(kernel, ElementwiseMap):
            return inner.inputs[0], kernel.fn(inner.kernel.table)
        return inner.inputs[0], kernel.table[_bytes(inner.kernel.table)]
    if not isinstance(kernel, PairTable) or step.inputs[0] == step.inputs[1]:
        return None
    every = np.arange(256, dtype=np.intp)
    for derived, other in ((1, 0), (0, 1)):
        inner = producers.get(step.inputs[derived])
        if inner is None or not isinstance(inner.kernel, ByteTable) or inner.inputs[0] != step.inputs[other]:
            continue
        y = _bytes(inner.kernel.table)
        index = every * 256 + y if derived == 1 else y * 256 + every
        return step.inputs[other], kernel.table[index]
    return None


def fuse_byte_tables(steps: list[BoundStep], graph_outputs: Sequence[int]) -> list[BoundStep]:
    """The steps with table lookups composed, and the steps left unread dropped."""
    producers: dict[int, BoundStep] = {}
    fused: list[BoundStep] = []
    for step in steps:
        composed = _composed(step, producers) if step.kernel is not None else None
        if composed is not None:
            x, table = composed
            step = replace(step, inputs=(x,), kernel=ByteTable(table), in_place=True)
        fused.append(step)
        if isinstance(step.kernel, ByteTable):
            producers[step.outputs[0]] = step
    read = {i for st in fused for i in st.inputs} | set(graph_outputs)
    # One backward sweep suffices: only table steps are dropped, and a table step's input is
    # still read by the step fused over it.
    return [st for st in fused if not isinstance(st.kernel, ByteTable) or st.outputs[0] in read]
