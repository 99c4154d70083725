"""Model rules (placeholder being completed: operation signatures only)."""
from __future__ import annotations

from ..hal.types import ExecutionPreference, Model, Model_1_3, Priority
from ..modelutil import as_model_1_3
from ..hal.types import OperationType
from ..ops.registry import HalVersion, introduced_in, lookup
from .errors import ValidationError


def validate_model(model: Model | Model_1_3) -> HalVersion:
    m = as_model_1_3(model)
    version = HalVersion.V1_0
    for graph in [m.main, *m.referenced]:
        for k, op in enumerate(graph.operations):
            if op.type not in OperationType._value2member_map_:
                raise ValidationError(f"operation {k}: unknown type {op.type}")
            spec = lookup(op.type)
            if spec is None:  # a valid type this driver has no kernel for: unsupported, not invalid
                version = max(version, introduced_in(op.type))
                continue
            s = spec.match([graph.operands[i].type for i in op.inputs], [graph.operands[i].type for i in op.outputs])
            if s is None:
                raise ValidationError(f"operation {k} ({spec.type.name}): operand types match no signature")
            version = max(version, s.version)
    return version


def validate_execution_preference(preference: int) -> None:
    if preference not in {int(p) for p in ExecutionPreference}:
        raise ValidationError(f"bad execution preference {preference}")


def validate_priority(priority: int) -> None:
    if priority not in {int(p) for p in Priority}:
        raise ValidationError(f"bad priority {priority}")
