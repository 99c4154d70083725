"""Request rules (types.hal Request / RequestArgument, 1.0-1.3), checked against the prepared
model before any input is read. A memory pool must hold what it declares (nngpu.memory's
`Memory.verify`). 1.3 token pools (driver-allocated buffers) are resolved and
checked by the driver's buffer table, so only their shape rules apply here."""
from __future__ import annotations

from typing import Any, Sequence

from ..hal.types import MemoryPool, Model, Model_1_3, Request
from ..memory import Memory, MemoryError_
from ..modelutil import as_model_1_3
from ..ops.lib.dtypes import is_tensor
from .checks import boolean, is_int, location_fields, memory_size, seq, uint32_list
from .errors import ValidationError

TOKEN = -1  # pool size marker: a driver-managed buffer


def _pool_sizes(pools: Any) -> list[int]:
    sizes = []
    for k, pool in enumerate(seq(pools, "request pools")):
        what = f"request pool {k}"
        if isinstance(pool, MemoryPool):
            has_mem, has_token = pool.hidlMemory is not None, pool.token is not None
            if has_mem == has_token:
                raise ValidationError(f"{what}: a MemoryPool holds exactly one of hidlMemory and token")
            if has_token:
                if not is_int(pool.token) or not 0 <= pool.token <= 0xFFFF_FFFF:
                    raise ValidationError(f"{what}: bad token {pool.token!r}")
                sizes.append(TOKEN)
                continue
            pool = pool.hidlMemory
        sizes.append(memory_size(pool, what))
        if isinstance(pool, Memory):
            try:  # the file must hold what the memory declares: arguments are checked against it
                pool.verify()
            except MemoryError_ as e:
                raise ValidationError(f"{what}: {e}") from None
    return sizes


def _check_dims(kind: str, k: int, operand: Any, dims: list[int], on_token: bool) -> None:
    what = f"request {kind} {k}"
    model_dims = list(operand.dimensions)
    if not is_tensor(operand.type):
        if dims:
            raise ValidationError(f"{what}: a scalar takes no dimensions, got {dims}")
        return
    if dims:
        if model_dims and len(dims) != len(model_dims):
            raise ValidationError(f"{what}: rank {len(dims)} differs from the model's {len(model_dims)}")
        for i, (m, r) in enumerate(zip(model_dims, dims)):
            if m and m != r:
                raise ValidationError(f"{what}: dimension {i} is {r}, the model says {m}")
        if kind == "input" and 0 in dims:
            raise ValidationError(f"{what}: dimensions {dims} leave an input extent unspecified")
    elif kind == "input" and not on_token and (not model_dims or 0 in model_dims):
        raise ValidationError(f"{what}: the model's dimensions {model_dims} are not fully specified "
                              "and the request gives none")


def _check_arguments(kind: str, args: Any, indexes: Sequence[int], operands: Sequence,
                     pool_sizes: list[int]) -> None:
    args = seq(args, f"request {kind}s")
    if len(args) != len(indexes):
        raise ValidationError(f"request has {len(args)} {kind}s, the model {len(indexes)}")
    for k, (arg, idx) in enumerate(zip(args, indexes)):
        what = f"request {kind} {k}"
        try:
            has_no_value, location, dims = arg.hasNoValue, arg.location, arg.dimensions
        except AttributeError:
            raise ValidationError(f"{what} is not a RequestArgument") from None
        pool, offset, length = location_fields(location, f"{what}: location")
        dims = uint32_list(dims, f"{what}: dimensions")
        if boolean(has_no_value, f"{what}: hasNoValue"):
            if pool or offset or length or dims:
                raise ValidationError(f"{what} has no value yet gives a location or dimensions")
            continue
        if pool >= len(pool_sizes):
            raise ValidationError(f"{what}: pool {pool} of {len(pool_sizes)}")
        size = pool_sizes[pool]
        if size != TOKEN and offset + length > size:
            raise ValidationError(f"{what}: [{offset}, {offset + length}) is outside pool {pool} of {size} bytes")
        _check_dims(kind, k, operands[idx], dims, size == TOKEN)


def validate_request(request: Request, model: Model_1_3 | Model) -> None:
    """`model` is the prepared (already validated) model."""
    try:
        if not isinstance(request, Request):
            raise ValidationError(f"not a Request: {type(request).__name__}")
        main = as_model_1_3(model).main
        sizes = _pool_sizes(request.pools)
        _check_arguments("input", request.inputs, main.inputIndexes, main.operands, sizes)
        _check_arguments("output", request.outputs, main.outputIndexes, main.operands, sizes)
    except ValidationError:
        raise
    except Exception as e:  # malformed structures are invalid arguments, never crashes
        raise ValidationError(f"malformed request: {type(e).__name__}: {e}") from e
