"""IF and WHILE (HAL 1.3): run referenced subgraphs through the executor.

A SUBGRAPH operand's location.offset is the index of the referenced subgraph. WHILE loops are
bounded by the execution's loop timeout (LoopTimeoutDurationNs::DEFAULT unless the request
gives one): past it the execution is aborted with MISSED_DEADLINE_TRANSIENT. Their output
shapes are those the subgraphs compute, known only once the operation has run."""
from __future__ import annotations

import time
from typing import Sequence

import numpy as np

from ..hal.types import ErrorStatus, LoopTimeoutDurationNs, Operand, OperationType, Subgraph
from ..hal.types import OperandType as T
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


def _extra(o: Operand) -> tuple | None:
    """extraParams as a comparable value (an empty union is none)."""
    e = o.extraParams
    if e is None or (e.channelQuant is None and e.extension is None):
        return None
    q = e.channelQuant
    return (None if q is None else (tuple(q.scales), q.channelDim)), e.extension


def _check_compatible(inner: Operand, outer: Operand, what: str) -> None:
    """The spec's signature rule for IF / WHILE: the same type, rank and dimensions (where both
    specify them), scale, zeroPoint and extraParams."""
    problem = None
    if inner.type != outer.type:
        problem = f"type {T(inner.type).name} != {T(outer.type).name}"
    elif inner.dimensions and outer.dimensions and (
            len(inner.dimensions) != len(outer.dimensions)
            or any(a and b and a != b for a, b in zip(inner.dimensions, outer.dimensions))):
        problem = f"dimensions {list(inner.dimensions)} != {list(outer.dimensions)}"
    elif inner.scale != outer.scale or inner.zeroPoint != outer.zeroPoint:
        problem = f"scale / zeroPoint {inner.scale}/{inner.zeroPoint} != {outer.scale}/{outer.zeroPoint}"
    elif _extra(inner) != _extra(outer):
        problem = "extraParams differ"
    if problem:
        raise OpError(f"{what}: {problem}")


def _check_condition(o: Operand, what: str) -> None:
    if o.type != T.TENSOR_BOOL8 or list(o.dimensions) != [1]:
        raise OpError(f"{what} must be a TENSOR_BOOL8 of shape [1]")


def _io(g: Subgraph) -> tuple[list[Operand], list[Operand]]:
    return [g.operands[i] for i in g.inputIndexes], [g.operands[i] for i in g.outputIndexes]


def _validate_if(ctx: OpContext) -> None:
    _check_condition(ctx.in_operand(0), "IF condition")
    if ctx.subgraphs is None:
        return
    outer_in = [ctx.in_operand(i) for i in range(3, ctx.num_inputs)]
    outer_out = [ctx.out_operand(i) for i in range(ctx.num_outputs)]
    for i, branch in ((1, "then"), (2, "else")):
        ins, outs = _io(ctx.subgraphs[_subgraph_index(ctx, i)])
        if len(ins) != len(outer_in) or len(outs) != len(outer_out):
            raise OpError(f"IF {branch} branch has the wrong number of inputs or outputs")
        for k, (inner, outer) in enumerate(zip(ins, outer_in)):
            _check_compatible(inner, outer, f"IF {branch} branch input {k}")
        for k, (inner, outer) in enumerate(zip(outs, outer_out)):
            _check_compatible(inner, outer, f"IF {branch} branch output {k}")


def _validate_while(ctx: OpContext) -> None:
    if ctx.subgraphs is None:
        return
    cond_in, cond_out = _io(ctx.subgraphs[_subgraph_index(ctx, 0)])
    body_in, body_out = _io(ctx.subgraphs[_subgraph_index(ctx, 1)])
    outer_in = [ctx.in_operand(i) for i in range(2, ctx.num_inputs)]
    m = ctx.num_outputs
    if len(cond_in) != len(outer_in) or len(cond_out) != 1:
        raise OpError("WHILE condition subgraph has the wrong signature")
    if len(body_in) != len(outer_in) or not m <= len(body_out) <= len(outer_in):
        raise OpError("WHILE body subgraph has the wrong signature")
    _check_condition(cond_out[0], "WHILE condition output")
    for k, outer in enumerate(outer_in):
        _check_compatible(cond_in[k], outer, f"WHILE condition input {k}")
        _check_compatible(body_in[k], outer, f"WHILE body input {k}")
    for k in range(m):
        _check_compatible(body_out[k], ctx.out_operand(k), f"WHILE body output {k}")
    for k, out in enumerate(body_out):  # input-output and state-only values loop back
        _check_compatible(body_in[k], out, f"WHILE body input {k} against body output {k}")


def _if_shape(node: OpContext) -> list[tuple[int, ...]]:
    raise DataDependent("IF: the outputs are those the branch taken computes")


def _while_shape(node: OpContext) -> list[tuple[int, ...]]:
    raise DataDependent("WHILE: the outputs are those the last iteration computes")


register(OpSpec(OperationType.IF, [], _if, _validate_if, shape=_if_shape, matcher=_if_matcher, foldable=False))
register(OpSpec(OperationType.WHILE, [], _while, _validate_while, shape=_while_shape, matcher=_while_matcher,
                foldable=False))
