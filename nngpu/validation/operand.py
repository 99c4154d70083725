"""Rules on one operand: type, rank, scale / zeroPoint, extraParams, lifetime and location
(types.hal Operand / OperandType / OperandLifeTime comments, 1.0-1.3)."""
from __future__ import annotations

from typing import Any

from ..hal.types import OperandExtraParams, OperandLifeTime as L, OperandType as T, OperandTypeRange
from ..modelutil import nbytes_of
from ..ops.lib.dtypes import is_tensor
from ..ops.registry import HalVersion
from .checks import finite_positive, int32, is_int, location_fields, real, seq, uint32, uint32_list
from .errors import ValidationError

V = HalVersion

OEM_TYPES = frozenset({T.OEM, T.TENSOR_OEM_BYTE})

# The HAL version whose OperandType enum first lists each type (1.1 added none).
TYPE_VERSION: dict[int, HalVersion] = {
    **{t: V.V1_0 for t in (T.FLOAT32, T.INT32, T.UINT32, T.TENSOR_FLOAT32, T.TENSOR_INT32,
                           T.TENSOR_QUANT8_ASYMM, T.OEM, T.TENSOR_OEM_BYTE)},
    **{t: V.V1_2 for t in (T.BOOL, T.TENSOR_QUANT16_SYMM, T.TENSOR_FLOAT16, T.TENSOR_BOOL8, T.FLOAT16,
                           T.TENSOR_QUANT8_SYMM_PER_CHANNEL, T.TENSOR_QUANT16_ASYMM, T.TENSOR_QUANT8_SYMM)},
    T.TENSOR_QUANT8_ASYMM_SIGNED: V.V1_3,
    T.SUBGRAPH: V.V1_3,
}

# Types that carry no quantization: scale and zeroPoint must both be 0.
NO_QUANT = frozenset({T.FLOAT32, T.INT32, T.UINT32, T.BOOL, T.FLOAT16, T.SUBGRAPH, T.TENSOR_FLOAT32,
                      T.TENSOR_FLOAT16, T.TENSOR_BOOL8, T.TENSOR_QUANT8_SYMM_PER_CHANNEL})
# Quantized types: scale > 0 and zeroPoint within [lo, hi].
ZERO_POINT_RANGE: dict[int, tuple[int, int]] = {
    T.TENSOR_QUANT8_ASYMM: (0, 255),
    T.TENSOR_QUANT8_ASYMM_SIGNED: (-128, 127),
    T.TENSOR_QUANT8_SYMM: (0, 0),
    T.TENSOR_QUANT16_ASYMM: (0, 65535),
    T.TENSOR_QUANT16_SYMM: (0, 0),
}

CONSTANT = frozenset({L.CONSTANT_COPY, L.CONSTANT_REFERENCE})
NO_LOCATION = frozenset({L.TEMPORARY_VARIABLE, L.SUBGRAPH_INPUT, L.SUBGRAPH_OUTPUT, L.NO_VALUE})
LIFETIME_VERSION = {**{lt: V.V1_0 for lt in (*CONSTANT, *NO_LOCATION)}, L.SUBGRAPH: V.V1_3}


def operand_type(x: Any, what: str) -> T:
    if not is_int(x):
        raise ValidationError(f"{what}: type must be an integer, got {x!r}")
    if x > OperandTypeRange.BASE_MAX:
        raise ValidationError(f"{what}: extension operand type {x:#x} (this driver supports no extensions)")
    if x not in TYPE_VERSION:
        raise ValidationError(f"{what}: invalid operand type {x}")
    return T(x)


def _check_quant(t: T, scale: float, zero_point: int, what: str) -> None:
    if t in OEM_TYPES:
        return  # OEM types carry driver-defined parameters
    if t in NO_QUANT:
        if scale != 0.0 or zero_point != 0:
            raise ValidationError(f"{what}: {t.name} needs scale 0 and zeroPoint 0, got {scale}, {zero_point}")
    elif t == T.TENSOR_INT32:
        # Bias tensors carry a scale (input scale * filter scale); never a zero point.
        if not (scale == 0.0 or finite_positive(scale)) or zero_point != 0:
            raise ValidationError(f"{what}: TENSOR_INT32 needs scale >= 0 and zeroPoint 0, got {scale}, {zero_point}")
    else:
        lo, hi = ZERO_POINT_RANGE[t]
        if not finite_positive(scale):
            raise ValidationError(f"{what}: {t.name} needs scale > 0, got {scale}")
        if not lo <= zero_point <= hi:
            raise ValidationError(f"{what}: {t.name} zeroPoint {zero_point} outside [{lo}, {hi}]")


def _check_extra_params(t: T, dims: list[int], extra: Any, what: str) -> None:
    if extra is None:
        extra = OperandExtraParams()
    if not isinstance(extra, OperandExtraParams):
        raise ValidationError(f"{what}: extraParams must be OperandExtraParams")
    if extra.extension is not None:
        raise ValidationError(f"{what}: extension extraParams on a non-extension type")
    cq = extra.channelQuant
    if t != T.TENSOR_QUANT8_SYMM_PER_CHANNEL:
        if cq is not None:
            raise ValidationError(f"{what}: channelQuant is only for TENSOR_QUANT8_SYMM_PER_CHANNEL")
        return
    if cq is None:
        raise ValidationError(f"{what}: TENSOR_QUANT8_SYMM_PER_CHANNEL needs channelQuant")
    try:
        scales, channel_dim = cq.scales, cq.channelDim
    except AttributeError:
        raise ValidationError(f"{what}: channelQuant is malformed") from None
    channel_dim = uint32(channel_dim, f"{what}: channelQuant.channelDim")
    if channel_dim >= len(dims):
        raise ValidationError(f"{what}: channelDim {channel_dim} not below rank {len(dims)}")
    if dims[channel_dim] == 0:
        raise ValidationError(f"{what}: the channel dimension {channel_dim} is unknown")
    scales = [real(s, f"{what}: channelQuant.scales[{i}]") for i, s in enumerate(seq(scales, f"{what}: scales"))]
    if len(scales) != dims[channel_dim]:
        raise ValidationError(f"{what}: {len(scales)} channel scales for {dims[channel_dim]} channels")
    bad = [i for i, s in enumerate(scales) if not finite_positive(s)]
    if bad:
        raise ValidationError(f"{what}: channel scale {bad[0]} is not positive")


def _check_location(operand: Any, t: T, lifetime: L, dims: list[int], ctx: "OperandSpace", what: str) -> None:
    pool, offset, length = location_fields(operand.location, f"{what}: location")
    if lifetime in NO_LOCATION:
        if pool or offset or length:
            raise ValidationError(f"{what}: a {lifetime.name} operand needs an all-zero location")
        return
    if lifetime == L.SUBGRAPH:
        if pool or length:
            raise ValidationError(f"{what}: a SUBGRAPH operand needs poolIndex 0 and length 0")
        if offset >= ctx.num_referenced:
            raise ValidationError(f"{what}: references subgraph {offset} of {ctx.num_referenced}")
        return
    if lifetime == L.CONSTANT_COPY:
        if pool:
            raise ValidationError(f"{what}: a CONSTANT_COPY operand needs poolIndex 0")
        size = ctx.values_size
    else:
        if pool >= len(ctx.pool_sizes):
            raise ValidationError(f"{what}: pool {pool} of {len(ctx.pool_sizes)}")
        size = ctx.pool_sizes[pool]
    if offset + length > size:
        raise ValidationError(f"{what}: [{offset}, {offset + length}) is outside its {size}-byte buffer")
    if t in OEM_TYPES:
        return  # OEM values have a driver-defined size
    if is_tensor(t) and (not dims or 0 in dims):
        raise ValidationError(f"{what}: a constant tensor needs fully specified dimensions, got {dims}")
    need = nbytes_of(t, dims)
    if length != need:
        raise ValidationError(f"{what}: location.length {length}, its type and shape need {need}")


class OperandSpace:
    """What an operand's location can point into."""

    def __init__(self, values_size: int, pool_sizes: list[int], num_referenced: int):
        self.values_size = values_size
        self.pool_sizes = pool_sizes
        self.num_referenced = num_referenced


def check_operand(operand: Any, space: OperandSpace, what: str) -> HalVersion:
    """Validate one operand; return the lowest HAL version that can express it."""
    try:
        fields = (operand.type, operand.dimensions, operand.numberOfConsumers, operand.scale,
                  operand.zeroPoint, operand.lifetime, operand.location)
    except AttributeError:
        raise ValidationError(f"{what} is not an Operand") from None
    t = operand_type(fields[0], what)
    version = TYPE_VERSION[t]
    dims = uint32_list(fields[1], f"{what}: dimensions")
    uint32(fields[2], f"{what}: numberOfConsumers")
    scale = real(fields[3], f"{what}: scale")
    zero_point = int32(fields[4], f"{what}: zeroPoint")
    lt = fields[5]
    if not is_int(lt) or lt not in LIFETIME_VERSION:
        raise ValidationError(f"{what}: invalid lifetime {lt!r}")
    lifetime = L(lt)
    version = max(version, LIFETIME_VERSION[lifetime])
    if is_tensor(t):
        if not dims:
            if lifetime in CONSTANT:
                raise ValidationError(f"{what}: a constant tensor needs a known rank")
            version = max(version, V.V1_2)  # unspecified rank is new in 1.2
    elif dims:
        raise ValidationError(f"{what}: scalar {t.name} has rank {len(dims)}")
    if (t == T.SUBGRAPH) != (lifetime == L.SUBGRAPH):
        raise ValidationError(f"{what}: SUBGRAPH type and SUBGRAPH lifetime go together")
    _check_quant(t, scale, zero_point, what)
    _check_extra_params(t, dims, getattr(operand, "extraParams", None), what)
    _check_location(operand, t, lifetime, dims, space, what)
    return version
