"""Which operations of a valid model this driver runs, and why not where it does not.

An operation is supported when its operand types match one of its signatures, every operation of
the subgraphs it references (IF, WHILE) is supported, and nothing fixed before execution exceeds
what it runs: its shape function, given the operand shapes the model fixes and its small
constants, raises RankLimit (RESHAPE to rank 5, say). Such an operation would fail at every
execution, so it is refused where a client can still place it elsewhere: at
getSupportedOperations and prepare."""
from __future__ import annotations

from ..hal.types import Model_1_3, Operation, OperandLifeTime, OperationType, Subgraph
from ..modelutil import read_constant
from ..ops.lib.dtypes import is_tensor
from ..ops.node import OpNode
from ..ops.registry import OpSpec, RankLimit, lookup

# Constants up to this size are read for the check (shape vectors, axes, scalars); a shape
# function that needs a larger one cannot be decided here, and the operation is left to run.
SMALL_CONSTANT_BYTES = 4096

_CONSTANT = (OperandLifeTime.CONSTANT_COPY, OperandLifeTime.CONSTANT_REFERENCE)


def unsupported_reason(model: Model_1_3, op: Operation, graph: Subgraph | None = None,
                       seen: frozenset = frozenset()) -> str | None:
    """None when this driver executes `op` of `graph` (the main graph by default), else why not."""
    graph = graph or model.main
    spec = lookup(op.type)
    if spec is None:
        return "no implementation of this operation type"
    operands = graph.operands
    if spec.match([operands[i].type for i in op.inputs], [operands[i].type for i in op.outputs]) is None:
        return "its operand types match no signature this driver runs"
    for i in op.inputs:
        if operands[i].lifetime == OperandLifeTime.SUBGRAPH:
            ref = operands[i].location.offset
            if ref in seen or not 0 <= ref < len(model.referenced):
                return f"subgraph {ref} is referenced recursively or does not exist"
            sub = model.referenced[ref]
            for k, inner in enumerate(sub.operations):
                why = unsupported_reason(model, inner, sub, seen | {ref})
                if why is not None:
                    return f"subgraph {ref} operation {k} ({OperationType(inner.type).name}): {why}"
    return _static_limit(model, spec, op, graph)


def _static_limit(model: Model_1_3, spec: OpSpec, op: Operation, graph: Subgraph) -> str | None:
    """The RankLimit the shape function raises from what the model fixes, else None (anything
    else it raises depends on the execution, or is the execution's to report)."""
    if spec.shape is None:
        return None
    operands = graph.operands
    shapes = {}
    values = []
    for i in op.inputs:
        operand = operands[i]
        dims = tuple(operand.dimensions)
        if not is_tensor(operand.type):
            shapes[i] = ()
        elif dims and all(dims):
            shapes[i] = dims
        small = operand.lifetime in _CONSTANT and operand.location.length <= SMALL_CONSTANT_BYTES
        values.append(_read(model, operand) if small else None)
    node = OpNode(spec, -1, op, operands, values, shapes, model.relaxComputationFloat32toFloat16)
    try:
        node.output_shapes()
    except RankLimit as e:
        return str(e)
    except Exception:  # undecidable before execution (a missing shape or value), or its own error
        return None
    return None


def _read(model: Model_1_3, operand):
    try:
        return read_constant(model, operand)
    except Exception:  # a constant that cannot be read is validation's (or the execution's) to report
        return None
