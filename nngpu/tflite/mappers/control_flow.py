"""WHILE and IF: their TFLite subgraphs become NNAPI referenced subgraphs (HAL 1.3).

TFLite's WHILE carries every input through the body: NNAPI's m input-output operands with no
state-only or input-only ones (k = n = 0). IF's condition is a TFLite bool scalar, which is a
TENSOR_BOOL8 of shape [1] here (tensors.nn_dims), the shape NNAPI's IF wants."""
from __future__ import annotations

from ...hal.types import OperationType
from ..context import OpCtx
from .common import registry

Op = OperationType
MAPPERS, mapper = registry()


def _ref(c: OpCtx, tflite_index: int) -> int:
    index = c.table.subgraph(tflite_index)
    if index is None:
        c.unsupported("its subgraphs can be referenced only from a whole-model import")
    return c.b.subgraph_ref(index)


def _ins(c: OpCtx, first: int) -> list[int]:
    return [c.inp(k) for k in range(first, len(c.op.inputs))]


def _outs(c: OpCtx) -> list[int]:
    return [c.out(k) for k in range(len(c.op.outputs))]


@mapper("WHILE")
def _while(c: OpCtx) -> None:
    o = c.opts
    if len(c.op.inputs) != len(c.op.outputs):
        c.unsupported("inputs and outputs differ in number")
    cond, body = _ref(c, int(o.CondSubgraphIndex())), _ref(c, int(o.BodySubgraphIndex()))
    c.emit(Op.WHILE, [cond, body] + _ins(c, 0), _outs(c))


@mapper("IF")
def _if(c: OpCtx) -> None:
    o = c.opts
    then, other = _ref(c, int(o.ThenSubgraphIndex())), _ref(c, int(o.ElseSubgraphIndex()))
    c.emit(Op.IF, [c.inp(0), then, other] + _ins(c, 1), _outs(c))
