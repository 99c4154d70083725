"""Settle the operand shapes of a graph with dynamic extents.

A converter that saw an extent as dynamic (a None batch, a shape computed by SHAPE) stores 1 for
it in the tensor's shape and -1 in its shape_signature. Once rewrite.py has folded the shape
arithmetic, every extent is known; this pass recomputes, in operation order, each operation's
output shapes with nngpu's own shape functions, so the operands carry the real extents."""
from __future__ import annotations

import numpy as np

from ..hal.types import OperandLifeTime
from .context import OperandTable

L = OperandLifeTime


def _needs_settling(table: OperandTable) -> bool:
    g = table.g
    inputs = set(g.inputs)
    return any(t.dynamic for t in g.tensors if t.index not in inputs)


def settle_shapes(table: OperandTable) -> None:
    """Recompute the output dims of every operation table.b holds (a no-op for static graphs)."""
    if not _needs_settling(table):
        return
    from ..ops import load_all
    from ..ops.lib.dtypes import dtype_of
    from ..ops.node import DataDependent, NeedsValue, OpNode
    from ..ops.registry import OpError, lookup

    load_all()
    b = table.b
    operands = b.operands

    def value(i: int) -> np.ndarray | None:
        o = operands[i]
        if o.lifetime != L.CONSTANT_COPY:
            return None
        raw = b.values.read(o.location.offset, o.location.length)
        return np.frombuffer(raw, dtype_of(o.type)).reshape(o.dimensions or ())

    for operation in b.operations:
        spec = lookup(operation.type)
        if spec is None or spec.shape is None:
            continue
        shapes = {i: tuple(operands[i].dimensions) for i in operation.inputs if operands[i].lifetime != L.NO_VALUE}
        saved = [list(operands[i].dimensions) for i in operation.outputs]
        for i in operation.outputs:
            operands[i].dimensions = []
        try:
            node = OpNode(spec, 0, operation, operands, [value(i) for i in operation.inputs], shapes)
            settled = node.output_shapes()
        except (NeedsValue, DataDependent, OpError, ValueError, IndexError, KeyError):
            settled = [tuple(s) for s in saved]  # left as the file says: validation judges it
        for i, dims in zip(operation.outputs, settled):
            operands[i].dimensions = list(dims)
