"""Axis and rank rules the reductions, softmax, normalisation and selection families share."""
from __future__ import annotations

from ..registry import HalVersion as V
from ..registry import OpContext, OpError

MAX_RANK = 4


def resolve_axis(axis: int, rank: int) -> int:
    """A single axis in [-rank, rank) as a non-negative index."""
    if not -rank <= axis < rank:
        raise OpError(f"axis {axis} out of range for rank {rank}")
    return axis % rank


def check_max_rank(ctx: OpContext, i: int = 0, max_rank: int = MAX_RANK) -> None:
    dims = ctx.in_operand(i).dimensions
    if dims and len(dims) > max_rank:
        raise OpError(f"input {i} has rank {len(dims)} > {max_rank}")


def ranks_before_v1_2(ctx: OpContext, ranks: tuple[int, ...]) -> None:
    """Model rule: before HAL 1.2 input 0 must have one of `ranks` (validation raises the version)."""
    dims = ctx.in_operand(0).dimensions
    if dims and ctx.version < V.V1_2 and len(dims) not in ranks:
        raise OpError(f"rank {len(dims)} needs HAL version 1.2")


def const_scalar(ctx: OpContext, i: int):
    """Input i as a Python scalar when it is known (constant at validation time), else None."""
    if i >= ctx.num_inputs or ctx.values[i] is None:
        return None
    return ctx.values[i].reshape(-1)[0].item()
