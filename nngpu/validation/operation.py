"""Rules on one operation: a known type, operand indexes in range, operand types matching one of
its signatures, and the op's own rules (OpSpec.validate)."""
from __future__ import annotations

import logging
from typing import Any, Callable, Sequence

import numpy as np

from ..hal.types import OperandLifeTime as L, OperationType, OperationTypeRange
from ..ops.registry import HalVersion, OpContext, OpError, introduced_in, lookup
from .checks import is_int, seq, uint32
from .errors import ValidationError

log = logging.getLogger("nngpu.validation")

_VALID_TYPES = frozenset(int(t) for t in OperationType)


def operation_type(x: Any, what: str) -> int:
    if not is_int(x):
        raise ValidationError(f"{what}: type must be an integer, got {x!r}")
    if x > OperationTypeRange.BASE_MAX:
        raise ValidationError(f"{what}: extension operation type {x:#x} (this driver supports no extensions)")
    if x not in _VALID_TYPES:
        raise ValidationError(f"{what}: invalid operation type {x}")
    return int(x)


def operand_indexes(op: Any, num_operands: int, what: str) -> tuple[list[int], list[int]]:
    try:
        inputs, outputs = op.inputs, op.outputs
    except AttributeError:
        raise ValidationError(f"{what} is not an Operation") from None
    lists = []
    for name, vals in (("input", inputs), ("output", outputs)):
        idx = [uint32(v, f"{what} {name} {j}") for j, v in enumerate(seq(vals, f"{what} {name}s"))]
        for j, i in enumerate(idx):
            if i >= num_operands:
                raise ValidationError(f"{what} {name} {j} is operand {i} of {num_operands}")
        lists.append(idx)
    return lists[0], lists[1]


def check_signature(op: Any, op_type: int, operands: Sequence, what: str) -> HalVersion:
    """The version the operation's operand types need; unregistered types are unsupported, not
    invalid, so only their enum version counts (an AIDL one for BATCH_MATMUL, PACK, MIRROR_PAD
    and REVERSE)."""
    spec = lookup(op_type)
    if spec is None:
        return introduced_in(op_type)
    in_types = [operands[i].type for i in op.inputs]
    out_types = [operands[i].type for i in op.outputs]
    s = spec.match(in_types, out_types)
    if s is None:
        names = lambda ts: ",".join(getattr(t, "name", str(t)) for t in ts)  # noqa: E731
        raise ValidationError(f"{what} ({spec.type.name}): operand types ({names(in_types)}) -> "
                              f"({names(out_types)}) match no signature")
    return max(s.version, introduced_in(op_type))


def check_op_rules(op: Any, op_type: int, operands: Sequence, version: HalVersion,
                   read_value: Callable[[Any], np.ndarray | None], relaxed: bool, subgraphs: Sequence,
                   what: str) -> HalVersion:
    """Run OpSpec.validate; a rule that holds only from a later HAL version raises the version."""
    spec = lookup(op_type)
    if spec is None or spec.validate is None:
        return version
    values = [read_value(operands[i]) for i in op.inputs]
    first_error = None
    for v in (v for v in HalVersion if v >= version):
        ctx = OpContext(op, operands, values, relaxed, v, subgraphs)
        try:
            spec.validate(ctx)
            return v
        except OpError as e:
            first_error = first_error or e
        except Exception as e:  # a bug in an op's rules must not escape a HAL method
            log.warning("%s (%s): validate raised", what, spec.type.name, exc_info=True)
            raise ValidationError(f"{what} ({spec.type.name}): {type(e).__name__}: {e}") from e
    raise ValidationError(f"{what} ({spec.type.name}): {first_error}")


def constant_reader(read: Callable[[Any], np.ndarray]) -> Callable[[Any], np.ndarray | None]:
    """Values for OpContext at validation time: constants only (None for everything else)."""
    cache: dict[int, np.ndarray | None] = {}

    def value(operand: Any) -> np.ndarray | None:
        if operand.lifetime not in (L.CONSTANT_COPY, L.CONSTANT_REFERENCE):
            return None
        key = id(operand)  # operands outlive the validation call, so ids are stable
        if key not in cache:
            try:
                cache[key] = read(operand)
            except Exception:  # OEM and other types without a storage dtype
                cache[key] = None
        return cache[key]
    return value
