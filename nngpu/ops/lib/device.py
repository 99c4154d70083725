"""Helpers the op families' device implementations share (registers nothing): applicability
predicates over operand types, fused activations, and lookup tables (an 8-bit input has 256
values, so an operation mapping each element on its own can be its reference's table)."""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from ...hal.types import FusedActivationFunc as Act
from ...hal.types import OperandType as T
from ...ir import BufferTensor, Compute, Expr, Tensor, clamp
from ..node import OpNode
from ..registry import OpContext
from .dtypes import dtype_of, quant_range

FLOATS = frozenset({T.TENSOR_FLOAT32, T.TENSOR_FLOAT16})
QUANT8 = frozenset({T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED})
# Types a data-movement kernel copies as stored (quantized ones keep their scale and zero point).
COPYABLE = FLOATS | QUANT8 | {T.TENSOR_INT32, T.TENSOR_BOOL8}


def floats(*positions: int) -> Callable[[OpNode], bool]:
    """Applies when output 0 and the listed inputs are float32 / float16 tensors of one type."""
    def applies(node: OpNode) -> bool:
        t = node.out_operand(0).type
        return t in FLOATS and all(node.in_operand(p).type == t for p in positions)
    return applies


def types_in(allowed: frozenset, *positions: int) -> Callable[[OpNode], bool]:
    """Applies when the listed inputs and every output have one type of `allowed`."""
    def applies(node: OpNode) -> bool:
        t = node.out_operand(0).type
        return t in allowed and all(node.in_operand(p).type == t for p in positions) and \
            all(node.out_operand(k).type == t for k in range(node.num_outputs))
    return applies


_BOUNDS = {Act.RELU: (0.0, np.inf), Act.RELU1: (-1.0, 1.0), Act.RELU6: (0.0, 6.0)}


def activation_bounds(code: int) -> tuple[float, float] | None:
    """(lowest, highest) that a fused float activation clamps to, None for NONE."""
    if code == Act.NONE:
        return None
    if code not in _BOUNDS:
        raise ValueError(f"fused activation {code}")
    return _BOUNDS[code]


def channel_lanes(channels: int, narrowest: int = 4) -> int | None:
    """The widest vector of 16, 8, 4 (or 2, with `narrowest` 2) floats that divides `channels` (a
    template's VW), None if none does."""
    return next((v for v in (16, 8, 4, 2) if v >= narrowest and channels % v == 0), None)


def largest_divisor(n: int, most: int, fits: Callable[[int], bool] = lambda d: True) -> int:
    """The largest d up to `most` that divides `n` and `fits` (1 always: a template's count of
    vectors a work-item takes, say, where `fits` asks that enough work-items are left)."""
    return max(d for d in range(1, most + 1) if n % d == 0 and (d == 1 or fits(d)))


def activation_defines(code: int) -> dict[str, str]:
    """A template's #defines LO and HI for a fused float activation (none for NONE)."""
    bounds = activation_bounds(code)
    if bounds is None:
        return {}
    return dict(LO=f"{bounds[0]:.1f}f", HI="INFINITY" if bounds[1] == float("inf") else f"{bounds[1]:.1f}f")


def gemm_epilogue(bias: Tensor, code: int) -> tuple[BufferTensor, tuple[float, float]] | None:
    """What a GEMM's epilogue takes (OpNode.gemm): the stored float bias and the fused activation's
    bounds (none: the infinities); None where the bias is not a stored float tensor."""
    if not isinstance(bias, BufferTensor) or bias.buffer.storage != "float":
        return None
    return bias, activation_bounds(code) or (-np.inf, np.inf)


def activation(x: Expr, code: int) -> Expr:
    """A fused activation on a float value, by comparisons so that NaN stays NaN (as np.clip)."""
    bounds = activation_bounds(code)
    if bounds is None:
        return x
    lo, hi = bounds
    return (x < lo).where(lo, x) if hi == np.inf else clamp(x, lo, hi)


def known_scalars(node: OpNode, positions: Sequence[int]) -> bool:
    """The listed inputs are omitted or known at compile time."""
    return all(p >= node.num_inputs or node.known(p) for p in positions)


def reference_table(node: OpNode, position: int = 0) -> np.ndarray:
    """The operation's reference applied to every value of its 8-bit input `position` (the
    other inputs as known at compile time): output element k is the result for the k-th
    smallest stored value. Exact by construction for operations that map elements on their own."""
    t = node.in_operand(position).type
    lo, hi = quant_range(t)
    values = list(node.values)
    values[position] = np.arange(lo, hi + 1, dtype=np.int64).astype(dtype_of(t))
    ctx = OpContext(node.operation, node.operands, values, node.relaxed, node.version)
    with np.errstate(all="ignore"):
        return np.asarray(node.spec.reference(ctx)[0])


def lookup(node: OpNode, position: int, x: Tensor, table: np.ndarray, operand_type: int) -> Compute:
    """out = table[x - the smallest value of input `position`'s 8-bit type], with `x` that
    input's tensor and the table (of `operand_type`) a device constant."""
    lo = quant_range(node.in_operand(position).type)[0]
    t = node.constant(table, operand_type)
    return Compute(x.shape, t.dtype, lambda c: t.at((x.load(c) - lo).cast("long")))
