"""Fusion of the numpy plan's 8-bit table lookups, after binding and before the memory layout.

An 8-bit elementwise operation of one tensor is a 256-entry table (ops/lib/byte_tables.py), and
of two tensors a 65,536-entry one. Where a table step reads only values derived by tables from
one tensor x, its result is a function of x alone, and its table composes at prepare:
    T2(T1(x))      -> table[b] = T2[byte of T1[b]]
    f(T1(x))       -> table[b] = f(T1[b])     (f elementwise: QUANTIZE of a DEQUANTIZE's table)
    P(x, T1(x))    -> table[b] = P[b * 256 + byte of T1[b]]       (and P(T1(x), x) likewise)
The swish of a quantized EfficientNet, MUL(x, LOGISTIC(x)), becomes one lookup in x. A step whose
every reader was fused away, and which is no graph output, is dropped. Then a lookup that is
the only reader of a quantized convolution's output runs inside the convolution, on each byte
as it is written (fuse_table_epilogues). The tables are the references' own, so the
composition is exact."""
from __future__ import annotations

import logging
from collections import Counter
from dataclasses import replace
from typing import Sequence

import numpy as np

from ..ops.lib.byte_tables import ByteTable, ElementwiseMap, PairTable
from .steps import BoundStep

log = logging.getLogger("nngpu.numpy_plan")


def _bytes(table: np.ndarray) -> np.ndarray:
    """A table's entries as the bytes that index the next table."""
    return table.view(np.uint8).astype(np.intp)


def _composed(step: BoundStep, producers: dict[int, BoundStep]) -> tuple[int, np.ndarray] | None:
    """(x, the table of `step` as a function of x's byte), when it is one. `producers`: the
    table steps whose output only `step` reads (composing over one read elsewhere saves no
    pass, and would keep a convolution from taking its table: fuse_table_epilogues)."""
    kernel = step.kernel
    if isinstance(kernel, (ByteTable, ElementwiseMap)):
        inner = producers.get(step.inputs[0])
        if inner is None:
            return None
        if isinstance(kernel, ElementwiseMap):
            return inner.inputs[0], kernel.fn(inner.kernel.table)
        return inner.inputs[0], kernel.table[_bytes(inner.kernel.table)]
    if not isinstance(kernel, PairTable) or step.inputs[0] == step.inputs[1]:
        return None
    every = np.arange(256, dtype=np.intp)
    for derived, other in ((1, 0), (0, 1)):
        inner = producers.get(step.inputs[derived])
        if inner is None or inner.inputs[0] != step.inputs[other]:
            continue
        y = _bytes(inner.kernel.table)
        index = every * 256 + y if derived == 1 else y * 256 + every
        return step.inputs[other], kernel.table[index]
    return None


def _readers(steps: list[BoundStep], graph_outputs: Sequence[int]) -> Counter:
    """How many steps read each operand; a graph output counts as one more reader."""
    readers = Counter(i for st in steps for i in st.inputs)
    readers.update(graph_outputs)
    return readers


def fuse_byte_tables(steps: list[BoundStep], graph_outputs: Sequence[int]) -> list[BoundStep]:
    """The steps with table lookups composed, and the steps left unread dropped."""
    readers = _readers(steps, graph_outputs)
    producers: dict[int, BoundStep] = {}
    fused: list[BoundStep] = []
    for step in steps:
        composed = _composed(step, producers) if step.kernel is not None else None
        if composed is not None:
            x, table = composed
            step = replace(step, inputs=(x,), kernel=ByteTable(table), in_place=True)
        fused.append(step)
        if isinstance(step.kernel, ByteTable) and readers[step.outputs[0]] == 1:
            producers[step.outputs[0]] = step
    read = {i for st in fused for i in st.inputs} | set(graph_outputs)
    # One backward sweep suffices: only table steps are dropped, and a table step's input is
    # still read by the step fused over it.
    kept = [st for st in fused if not isinstance(st.kernel, ByteTable) or st.outputs[0] in read]
    return fuse_table_epilogues(kept, graph_outputs)


def fuse_table_epilogues(steps: list[BoundStep], graph_outputs: Sequence[int]) -> list[BoundStep]:
    """A table step whose input only it reads, written by a kernel that takes a table on its
    output (`then`: the quantized convolutions, which `warm` up), becomes part of that kernel:
    the kernel writes the table's entries straight into the table step's output, and the
    intermediate tensor and its pass are gone."""
    readers = _readers(steps, graph_outputs)
    writer = {st.outputs[0]: n for n, st in enumerate(steps) if st.kernel is not None and len(st.outputs) == 1}
    out: list[BoundStep | None] = list(steps)
    for n, step in enumerate(steps):
        if not isinstance(step.kernel, ByteTable) or readers[step.inputs[0]] != 1:
            continue
        table = step.kernel.table
        if table.dtype != step.dtypes[0] or table.dtype.itemsize not in (1, 2, 4, 8):
            continue                  # the kernel writes the entries as words of the output's type
        w = writer.get(step.inputs[0])
        producer = out[w] if w is not None else None
        then = getattr(producer.kernel, "then", None) if producer is not None else None
        if then is None or producer.view or producer.in_place:
            continue
        fused = then(table)
        try:
            fused.warm()                # compiled now, at prepare; one that fails stays apart
        except Exception:
            log.exception("operation %d: the lookup of operation %d not fused", producer.k, step.k)
            continue
        out[w] = replace(producer, outputs=step.outputs, kernel=fused, shapes=step.shapes, dtypes=step.dtypes)
        out[n] = None
        writer[step.outputs[0]] = w
    return [st for st in out if st is not None]
