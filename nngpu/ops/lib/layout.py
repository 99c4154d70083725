"""Helpers shared by the shape / data-movement op families (not an op family itself).

Type tables with the HAL version each operand type became legal, a signature for variadic
operand lists (CONCATENATION's inputs, SPLIT's outputs), layout conversion (of arrays and of
shapes), the checks shape functions and references apply to shape-describing inputs, and the
registration of an injective (data-movement) spec.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import numpy as np

from ...hal.types import OperandType as T
from ..registry import HalVersion, OpContext, OpError, OpSpec, Pattern, Signature, register

V = HalVersion

# (operand type, first HAL version that lists it) for the common tensor-type families.
CORE4 = ((T.TENSOR_FLOAT32, V.V1_0), (T.TENSOR_QUANT8_ASYMM, V.V1_0),
         (T.TENSOR_FLOAT16, V.V1_2), (T.TENSOR_QUANT8_ASYMM_SIGNED, V.V1_3))
CORE4_I32 = CORE4 + ((T.TENSOR_INT32, V.V1_2),)
QUANT8 = frozenset({T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED})


def typed(table: Iterable[tuple[T, HalVersion]], op_version: HalVersion) -> list[tuple[T, HalVersion]]:
    """Each type of `table` with the version it needs in an op introduced at `op_version`."""
    return [(t, max(v, op_version)) for t, v in table]


@dataclass(frozen=True)
class Variadic(Signature):
    """A signature with a run of one repeated operand type: `count_min`+ inputs of `in_repeat`
    before `inputs` (CONCATENATION), or `count_min`+ outputs of `out_repeat` (SPLIT)."""

    in_repeat: T | None = None
    out_repeat: T | None = None
    count_min: int = 1

    def matches(self, in_types: Sequence[int], out_types: Sequence[int]) -> bool:
        ins, outs = tuple(in_types), tuple(out_types)
        if self.in_repeat is not None:
            k = len(ins) - len(self.inputs)
            if k < self.count_min or any(t != self.in_repeat for t in ins[:k]) or ins[k:] != self.inputs:
                return False
        elif ins != self.inputs:
            return False
        if self.out_repeat is not None:
            return len(outs) >= self.count_min and all(t == self.out_repeat for t in outs)
        return outs == self.outputs


def pad_constant(x: np.ndarray, pads: Sequence[tuple[int, int]], value=0,
                 out: np.ndarray | None = None) -> np.ndarray:
    """np.pad with a constant, as one slice copy into an empty buffer (or `out`, of the padded
    shape) and a fill of only the border slabs (several times faster than np.pad on the small
    tensors of a model)."""
    pads = [(int(a), int(b)) for a, b in pads]
    if out is None:
        out = np.empty(tuple(d + a + b for d, (a, b) in zip(x.shape, pads)), dtype=x.dtype)
    out[tuple(slice(a, a + d) for d, (a, _) in zip(x.shape, pads))] = x
    for k, (d, (a, b)) in enumerate(zip(x.shape, pads)):
        lead = (slice(None),) * k           # corners are filled once per axis they pad
        if a:
            out[lead + (slice(0, a),)] = value
        if b:
            out[lead + (slice(a + d, None),)] = value
    return out


def check_shape_rank(shape: Sequence[int], lo: int = 0, hi: int = 4, what: str = "input") -> None:
    """OpError unless a tensor of `shape` has a rank in [lo, hi]."""
    if not lo <= len(shape) <= hi:
        raise OpError(f"{what} rank {len(shape)} outside [{lo}, {hi}]")


def check_rank(x: np.ndarray, lo: int = 0, hi: int = 4, what: str = "input") -> None:
    check_shape_rank(x.shape, lo, hi, what)


def int_vector(ctx: OpContext, i: int, length: int | None = None, what: str = "") -> np.ndarray:
    """Input i as a 1-D int64 vector, checking its length when given."""
    v = np.asarray(ctx.input(i))
    if v.ndim != 1:
        raise OpError(f"{what or f'input {i}'} must be 1-D, has rank {v.ndim}")
    if length is not None and v.shape[0] != length:
        raise OpError(f"{what or f'input {i}'} has {v.shape[0]} entries, expected {length}")
    return v.astype(np.int64)


def nchw_flag(ctx: OpContext, i: int) -> bool:
    return bool(ctx.scalar(i, False))


def nhwc_dims(shape: Sequence[int], nchw: bool) -> tuple[int, int, int, int]:
    """(batch, height, width, depth) of a 4-D shape in either layout."""
    n, a, b, c = (int(d) for d in shape)
    return (n, b, c, a) if nchw else (n, a, b, c)


def layout_dims(n: int, h: int, w: int, c: int, nchw: bool) -> tuple[int, int, int, int]:
    """A 4-D shape in the layout, from its batch, height, width and depth."""
    return (n, c, h, w) if nchw else (n, h, w, c)


def to_nhwc(x: np.ndarray, nchw: bool) -> np.ndarray:
    return x.transpose(0, 2, 3, 1) if nchw else x


def from_nhwc(x: np.ndarray, nchw: bool) -> np.ndarray:
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2) if nchw else x)


def zero_value(ctx: OpContext, i: int = 0):
    """The value that represents real 0 in input i: its zeroPoint for quantized tensors."""
    operand = ctx.in_operand(i)
    return operand.zeroPoint if operand.type in QUANT8 else 0


def same_quant(ctx: OpContext, in_idx: int = 0, out_idx: int = 0) -> None:
    """Model rule: a quantized output keeps its input's scale and zeroPoint."""
    a, b = ctx.in_operand(in_idx), ctx.out_operand(out_idx)
    if a.type in QUANT8 and (a.scale != b.scale or a.zeroPoint != b.zeroPoint):
        raise OpError(f"output {out_idx} scale/zeroPoint ({b.scale}, {b.zeroPoint}) differ from "
                      f"input {in_idx} ({a.scale}, {a.zeroPoint})")


def known_rank(ctx: OpContext, i: int) -> int | None:
    """The model's rank of input i, or None when its dimensions are not given."""
    dims = ctx.in_operand(i).dimensions
    return len(dims) if dims else None


def nonzero_quant8_offset_needs_v1_2(ctx: OpContext) -> None:
    """PAD / SPACE_TO_BATCH_ND: before 1.2 a TENSOR_QUANT8_ASYMM input had to have zeroPoint 0
    (the pad value was undefined otherwise); validation retries at later versions."""
    operand = ctx.in_operand(0)
    if operand.type == T.TENSOR_QUANT8_ASYMM and operand.zeroPoint != 0 and ctx.version < V.V1_2:
        raise OpError("a quant8 input with a non-zero zeroPoint needs HAL 1.2")


def rules(in_idx: int = 0, outputs: int | None = 1, max_rank: int | None = 4, min_rank: int = 0,
          extra: Callable[[OpContext], None] | None = None):
    """A `validate` for the rules these ops share: every quantized output (all outputs when
    `outputs` is None) keeps input `in_idx`'s scale and zeroPoint, and input 0's rank, when the
    model gives it, lies in [min_rank, max_rank]; `extra` adds an op's own rule."""
    def validate(ctx: OpContext) -> None:
        rank = known_rank(ctx, 0)
        if rank is not None and (rank < min_rank or (max_rank is not None and rank > max_rank)):
            raise OpError(f"input rank {rank} outside [{min_rank}, {max_rank}]")
        for k in range(ctx.num_outputs if outputs is None else outputs):
            same_quant(ctx, in_idx, k)
        if extra is not None:
            extra(ctx)
    return validate


def register_injective(op: int, signatures: list[Signature], reference: Callable, validate: Callable,
                       shape: Callable) -> OpSpec:
    """Register a data-movement operation: each output element a copy of one input element."""
    return register(OpSpec(op, signatures, reference, validate, shape=shape, pattern=Pattern.INJECTIVE))
