"""Shape inference and constant folding over a run of operations, from the shape functions.

Starting at an operation with what is known (every operand shape so far, the values known at
compile time), each operation's shape function gives its output shapes. Inference stops at
the first operation whose shapes depend on data:
- its shape function needs a value not known yet (NeedsValue): the next segment starts at that
  operation, specialised on that value;
- its shapes are known only once it has run (DataDependent, no shape function, or inputs the
  shape function rejects): it runs on the host, and the next segment is specialised on the
  shapes it produced.
Operations whose inputs are all known are computed here, once (folding)."""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np

from ..hal.types import OperandLifeTime, Subgraph
from ..ops.lib.dtypes import is_tensor
from ..ops.node import DataDependent, NeedsValue, OpNode
from ..ops.registry import OpError, lookup
from ..runtime.interpreter import GraphRunner
from .steps import Known, Stop

log = logging.getLogger("nngpu.compiler")


@dataclass
class Inference:
    ops: list[int] = field(default_factory=list)      # the segment's operations, in order
    nodes: dict[int, OpNode] = field(default_factory=dict)
    folded: set[int] = field(default_factory=set)     # computed here, no step at run time
    host_only: set[int] = field(default_factory=set)  # must run on the host
    stop: Stop | None = None


def initial_known(runner: GraphRunner, input_shapes: dict[int, tuple[int, ...]]) -> Known:
    """Shapes and values of the main graph's constants, plus the given input shapes."""
    graph = runner.model.main
    shapes: dict[int, tuple[int, ...]] = dict(input_shapes)
    values: dict[int, np.ndarray] = {}
    for idx, operand in enumerate(graph.operands):
        if operand.lifetime in (OperandLifeTime.CONSTANT_COPY, OperandLifeTime.CONSTANT_REFERENCE):
            values[idx] = runner.context.constant(idx)
            shapes[idx] = tuple(values[idx].shape)
        elif operand.lifetime == OperandLifeTime.NO_VALUE or not is_tensor(operand.type):
            shapes.setdefault(idx, ())
    return Known(shapes, values, set(), set(graph.inputIndexes))


def node_of(runner: GraphRunner, k: int, known: Known) -> OpNode:
    graph = runner.model.main
    op = graph.operations[k]
    values = [known.values.get(i) for i in op.inputs]
    return OpNode(lookup(op.type), k, op, graph.operands, values, known.shapes, runner.context.relaxed, runner.context.version)


def infer(runner: GraphRunner, start: int, known: Known) -> Inference:
    """Infer (and fold) from operation `start` until the shapes depend on data; updates `known`."""
    graph: Subgraph = runner.model.main
    out = Inference()
    for k in range(start, len(graph.operations)):
        op = graph.operations[k]
        node = node_of(runner, k, known)
        try:
            shapes = node.output_shapes()
        except NeedsValue as e:
            if k == start and e.operand in known.values:  # a shape function bug: do not loop
                log.error("operation %d: shape function asks for a known value", k)
                return _run_on_host(out, node, k)
            out.stop = Stop(k, values=(e.operand,))
            return out
        except (DataDependent, OpError) as e:
            log.debug("operation %d (%s): output shapes known after it runs: %s", k, op.type.name, e)
            return _run_on_host(out, node, k)
        known.shapes.update(zip(op.outputs, shapes))
        out.ops.append(k)
        out.nodes[k] = node
        if node.spec.foldable and all(node.known(i) for i in range(node.num_inputs)):
            _fold(runner, node, known, out)
    return out


def _run_on_host(out: Inference, node: OpNode, k: int) -> Inference:
    out.ops.append(k)
    out.nodes[k] = node
    out.host_only.add(k)
    out.stop = Stop(k + 1, shapes=tuple(node.operation.outputs))
    return out


def _fold(runner: GraphRunner, node: OpNode, known: Known, out: Inference) -> None:
    k, op = node.index, node.operation
    try:
        with np.errstate(all="ignore"):
            values = runner.run_operation(k, list(node.values))
    except Exception as e:  # it fails at run time too: leave it to the execution to report
        log.debug("operation %d: not folded: %s", k, e)
        out.host_only.add(k)
        return
    for idx, value in zip(op.outputs, values):
        if is_tensor(graph_type := runner.model.main.operands[idx].type) and tuple(value.shape) != known.shapes[idx]:
            log.error("operation %d (%s): shape function gave %s, the reference %s (type %s)", k, op.type.name,
                      known.shapes[idx], value.shape, graph_type)
            known.shapes[idx] = tuple(value.shape)
        known.values[idx] = value
    out.folded.add(k)
