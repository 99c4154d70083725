"""Which of a relaxed model's tensors a target stores as float16 (Target.relaxed_storage).

relaxComputationFloat32toFloat16 lets a model's float32 be computed with float16's range and
precision. On a GPU the generated kernels' time is mostly memory traffic, so the float32
temporaries are stored as float16 there, halving it, while every kernel still computes float32
(its loads widen, its stores round). What a client gives or reads stays float32: the model's
inputs and outputs, and its constants; and what an operation reads as bits rather than as a value
(LSH_PROJECTION hashes its input's bytes), and the sources of views of it. A view (RESHAPE)
shares its source's buffer, so it is float16 only where its source is."""
from __future__ import annotations

from ..hal.types import OperandLifeTime, OperandType, OperationType, Subgraph
from ..ops.registry import Alias, lookup
from .target import Target

READS_BITS = {OperationType.LSH_PROJECTION}   # operations whose float inputs' bytes matter


def float16_temporaries(graph: Subgraph, relaxed: bool, target: Target) -> frozenset[int]:
    """The operands of `graph` that `target` stores as float16: none unless the model is relaxed
    and the target says so."""
    if not (relaxed and target.relaxed_storage):
        return frozenset()
    views = [_is_view(op.type) for op in graph.operations]
    bits = {i for op in graph.operations if op.type in READS_BITS for i in op.inputs}
    for op, view in zip(reversed(graph.operations), reversed(views)):   # a view's bits are its source's
        if view and op.outputs[0] in bits:
            bits.add(op.inputs[0])
    half: set[int] = set()
    for op, view in zip(graph.operations, views):   # in order: a view's source is decided before the view
        for t in op.outputs:
            operand = graph.operands[t]
            if (operand.type == OperandType.TENSOR_FLOAT32 and operand.lifetime == OperandLifeTime.TEMPORARY_VARIABLE
                    and t not in bits and (not view or op.inputs[0] in half)):
                half.add(t)
    return frozenset(half)


def _is_view(op_type: OperationType) -> bool:
    spec = lookup(op_type)
    return spec is not None and spec.alias == Alias.VIEW
