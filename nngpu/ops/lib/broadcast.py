"""Reference helpers the elementwise families (arithmetic, comparison, unary, activation,
quantize) share: rank and broadcast checks, per-type signatures, float16 computed in float32,
quantization parameters as the reference reads them."""
from __future__ import annotations

import numpy as np

try:  # the ufunc np.clip calls, without its Python wrapper (2 µs a call); the families import it from here
    from numpy._core.umath import clip as np_clip  # noqa: F401
except ImportError:  # numpy 1.x
    from numpy.core.umath import clip as np_clip  # noqa: F401

from ...hal.types import FusedActivationFunc as Act
from ...hal.types import OperandType as T
from ..registry import HalVersion as V
from ..registry import OpContext, OpError, broadcast_shapes, sig
from .axes import MAX_RANK, check_max_rank
from .quant import VALID_ACTIVATIONS

broadcast_two = broadcast_shapes(0, 1)


def check_rank(ctx: OpContext, indexes, max_rank: int = MAX_RANK) -> None:
    """Each listed input's rank, where the model gives it, is at most max_rank."""
    for i in indexes:
        check_max_rank(ctx, i, max_rank)


def validate_broadcast(ctx: OpContext) -> None:
    """Inputs 0 and 1 broadcast, when the model gives both shapes in full."""
    a, b = ctx.in_operand(0).dimensions, ctx.in_operand(1).dimensions
    if a and b and all(a) and all(b):
        try:
            np.broadcast_shapes(tuple(a), tuple(b))
        except ValueError:
            raise OpError(f"incompatible dimensions {list(a)} and {list(b)}") from None


def activation_of(ctx: OpContext, i: int, int_tensor: bool = False) -> int:
    act = ctx.scalar(i)
    if act not in VALID_ACTIVATIONS:
        raise OpError(f"invalid fused activation {act}")
    if int_tensor and act != Act.NONE:
        raise OpError("a TENSOR_INT32 operation needs fused activation NONE")
    return int(act)


def float_compute(x: np.ndarray) -> np.ndarray:
    """float16 values are computed in float32 and rounded back on output."""
    return x.astype(np.float32) if x.dtype == np.float16 else x


def same_type_sigs(types: list[tuple[T, V]], n_tensors: int, extra: tuple[T, ...] = (),
                   out: T | None = None) -> list:
    """One signature per tensor type: n_tensors inputs of that type, then `extra` scalars."""
    return [sig([t] * n_tensors + list(extra), [out if out is not None else t], v) for t, v in types]


def quant_params(ctx: OpContext, i: int, out: bool = False) -> tuple[float, int]:
    o = ctx.out_operand(i) if out else ctx.in_operand(i)
    return float(o.scale), int(o.zeroPoint)


def f32(x: float) -> float:
    """A scale as the reference reads it: a float32, widened to double."""
    return float(np.float32(x))
