"""IF and WHILE (HAL 1.3): run referenced subgraphs through the executor.

A SUBGRAPH operand's location.offset is the index of the referenced subgraph. WHILE loops are
bounded by the execution's loop timeout (LoopTimeoutDurationNs::DEFAULT unless the request
gives one): past it the execution is aborted with MISSED_DEADLINE_TRANSIENT. Their output
shapes are those the subgraphs compute, known only once the operation has run."""
from __future__ import annotations

import time
from typing import Sequence

import numpy as np

from ..hal.types import ErrorStatus, LoopTimeoutDurationNs, OperandType as T, OperationType
from .node import DataDependent
from .registry import HalVersion, OpContext, OpError, OpSpec, register


def _subgraph_index(ctx: OpContext, i: int) -> int:
    operand = ctx.in_operand(i)
    if operand.type != T.SUBGRAPH:
        raise OpError(f"input {i} is not a SUBGRAPH operand")
    return operand.location.offset


def _condition(value: np.ndarray) -> bool:
    return bool(np.asarray(value).reshape(-1)[0])


def _if_matcher(in_types: Sequence[int], out_types: Sequence[int]) -> HalVersion | None:
    ok = len(in_types) >= 3 and in_types[0] == T.TENSOR_BOOL8 and in_types[1] == in_types[2] == T.SUBGRAPH \
        and len(out_types) >= 1
    return HalVersion.V1_3 if ok else None


def _while_matcher(in_types: Sequence[int], out_types: Sequence[int]) -> HalVersion | None:
    ok = len(in_types) >= 3 and in_types[0] == in_types[1] == T.SUBGRAPH and len(out_types) >= 1
    return HalVersion.V1_3 if ok else None


def _if(ctx: OpContext) -> list[np.ndarray]:
    branch = _subgraph_index(ctx, 1 if _condition(ctx.input(0)) else 2)
    return ctx.executor(branch, list(ctx.values[3:]))


def _while(ctx: OpContext) -> list[np.ndarray]:
    cond, body = _subgraph_index(ctx, 0), _subgraph_index(ctx, 1)
    m = ctx.num_outputs
    body_graph = ctx.subgraphs[body]
    k = len(body_graph.outputIndexes) - m
    if k < 0:
        raise OpError("body subgraph has fewer outputs than WHILE")
    deadline = ctx.deadline_ns or time.monotonic_ns() + int(LoopTimeoutDurationNs.DEFAULT)
    values = list(ctx.values[2:])
    while _condition(ctx.executor(cond, values)[0]):
        if time.monotonic_ns() > deadline:
            raise OpError("WHILE loop exceeded the loop timeout", ErrorStatus.MISSED_DEADLINE_TRANSIENT)
        values[: m + k] = ctx.executor(body, values)
    return values[:m]


def _validate_if(ctx: OpContext) -> None:
    if ctx.subgraphs is None:
        return
    for i in (1, 2):
        g = ctx.subgraphs[_subgraph_index(ctx, i)]
        if len(g.inputIndexes) != ctx.num_inputs - 3 or len(g.outputIndexes) != ctx.num_outputs:
            raise OpError(f"IF branch {i} has the wrong number of inputs or outputs")


def _validate_while(ctx: OpContext) -> None:
    if ctx.subgraphs is None:
        return
    cond = ctx.subgraphs[_subgraph_index(ctx, 0)]
    body = ctx.subgraphs[_subgraph_index(ctx, 1)]
    n_in = ctx.num_inputs - 2
    if len(cond.inputIndexes) != n_in or len(cond.outputIndexes) != 1:
        raise OpError("WHILE condition subgraph has the wrong signature")
    if len(body.inputIndexes) != n_in or not ctx.num_outputs <= len(body.outputIndexes) <= n_in:
        raise OpError("WHILE body subgraph has the wrong signature")


def _if_shape(node: OpContext) -> list[tuple[int, ...]]:
    raise DataDependent("IF: the outputs are those the branch taken computes")


def _while_shape(node: OpContext) -> list[tuple[int, ...]]:
    raise DataDependent("WHILE: the outputs are those the last iteration computes")


register(OpSpec(OperationType.IF, [], _if, _validate_if, shape=_if_shape, matcher=_if_matcher, foldable=False))
register(OpSpec(OperationType.WHILE, [], _while, _validate_while, shape=_while_shape, matcher=_while_matcher,
                foldable=False))
