"""IDevice::allocate argument rules (1.3): roles, their operands, and the buffer's dimensions."""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..hal.types import BufferDesc, BufferRole, Operand
from ..modelutil import merge_dims
from ..ops.lib.dtypes import is_tensor
from .buffer import Role


class AllocateError(Exception):
    pass


@dataclass
class BufferPlan:
    operand: Operand
    dims: list[int]
    roles: set[Role]


def plan_buffer(desc: BufferDesc, prepared_models: list, input_roles: list[BufferRole],
                output_roles: list[BufferRole], is_ours) -> BufferPlan:
    """Check the allocate arguments; the operand properties, dims and roles of the buffer."""
    if not isinstance(desc, BufferDesc):
        raise AllocateError("desc is not a BufferDesc")
    if not input_roles and not output_roles:
        raise AllocateError("at least one role is needed")
    for pm in prepared_models:
        if not is_ours(pm):
            raise AllocateError("a prepared model is not from this device")
    seen: set[Role] = set()
    operand: Operand | None = None
    dims = list(desc.dimensions)
    for io, roles in (("input", input_roles), ("output", output_roles)):
        for role in roles:
            if not isinstance(role, BufferRole) or not 0 <= role.modelIndex < len(prepared_models):
                raise AllocateError(f"{io} role names no prepared model")
            if not (isinstance(role.frequency, (int, float)) and 0.0 < role.frequency <= 1.0) or math.isnan(role.frequency):
                raise AllocateError(f"{io} role frequency {role.frequency} outside (0, 1]")
            executor = prepared_models[role.modelIndex].executor
            indexes = executor.model.main.inputIndexes if io == "input" else executor.model.main.outputIndexes
            if not 0 <= role.ioIndex < len(indexes):
                raise AllocateError(f"{io} role index {role.ioIndex} out of range")
            key = Role(executor, io, role.ioIndex)
            if key in seen:
                raise AllocateError(f"{io} role {role.ioIndex} given twice")
            seen.add(key)
            candidate = executor.model.main.operands[indexes[role.ioIndex]]
            if operand is None:
                operand = candidate
            elif (candidate.type, candidate.scale, candidate.zeroPoint, candidate.extraParams) != \
                    (operand.type, operand.scale, operand.zeroPoint, operand.extraParams):
                raise AllocateError("roles disagree in type, scale, zeroPoint or extraParams")
            merged = merge_dims(dims, candidate.dimensions)
            if merged is None:
                raise AllocateError(f"{io} role {role.ioIndex} dimensions {candidate.dimensions} conflict with {dims}")
            dims = merged
    assert operand is not None
    if not is_tensor(operand.type) and desc.dimensions:
        raise AllocateError(f"dimensions {list(desc.dimensions)} for a scalar role")
    return BufferPlan(operand, dims, seen)
