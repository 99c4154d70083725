"""Capabilities of a device: performance per operand type, in each HAL version's shape."""
from __future__ import annotations

from ..hal.types import (
    Capabilities,
    Capabilities_1_0,
    Capabilities_1_1,
    Capabilities_1_2,
    OperandPerformance,
    OperandType,
    PerformanceInfo,
)

# Operand types each HAL version knows (OEM types included, as the reference drivers list them).
_TYPES_1_2 = [t for t in OperandType if t <= OperandType.TENSOR_QUANT8_SYMM or t >= OperandType.OEM]
# SUBGRAPH is no data type: VTS requires it to be absent from operandPerformance.
_TYPES_1_3 = sorted(t for t in OperandType if t != OperandType.SUBGRAPH)


def _operand_performance(types, info: PerformanceInfo) -> list[OperandPerformance]:
    return [OperandPerformance(t, PerformanceInfo(info.execTime, info.powerUsage)) for t in sorted(types)]


def capabilities(info: PerformanceInfo, version: int):
    """Capabilities for HAL `version` (10, 11, 12, 13) with the same figure for every type."""
    p = lambda: PerformanceInfo(info.execTime, info.powerUsage)  # noqa: E731
    if version == 10:
        return Capabilities_1_0(p(), p())
    if version == 11:
        return Capabilities_1_1(p(), p(), p())
    if version == 12:
        return Capabilities_1_2(p(), p(), _operand_performance(_TYPES_1_2, info))
    return Capabilities(p(), p(), _operand_performance(_TYPES_1_3, info), p(), p())
