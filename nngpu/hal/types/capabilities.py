"""What a device reports about itself (types.hal 1.0-1.3): performance figures and vendor extensions."""
from __future__ import annotations

from dataclasses import dataclass, field

from .enums import OperandType


@dataclass
class PerformanceInfo:
    execTime: float = 1.0
    powerUsage: float = 1.0


@dataclass
class OperandPerformance:
    type: OperandType
    info: PerformanceInfo


@dataclass
class Capabilities:
    """1.3 shape. 1.0 had float32Performance and quantized8Performance; 1.1 added
    relaxedFloat32toFloat16Performance; 1.2 split it into Scalar/Tensor and added
    operandPerformance; 1.3 added ifPerformance and whilePerformance."""

    relaxedFloat32toFloat16PerformanceScalar: PerformanceInfo
    relaxedFloat32toFloat16PerformanceTensor: PerformanceInfo
    operandPerformance: list[OperandPerformance]
    ifPerformance: PerformanceInfo = field(default_factory=PerformanceInfo)
    whilePerformance: PerformanceInfo = field(default_factory=PerformanceInfo)


@dataclass
class Capabilities_1_0:
    float32Performance: PerformanceInfo
    quantized8Performance: PerformanceInfo


@dataclass
class Capabilities_1_1:
    float32Performance: PerformanceInfo
    quantized8Performance: PerformanceInfo
    relaxedFloat32toFloat16Performance: PerformanceInfo


@dataclass
class Capabilities_1_2:
    relaxedFloat32toFloat16PerformanceScalar: PerformanceInfo
    relaxedFloat32toFloat16PerformanceTensor: PerformanceInfo
    operandPerformance: list[OperandPerformance]


@dataclass
class OperandTypeInformation:
    type: int
    isTensor: bool
    byteSize: int


@dataclass
class Extension:
    name: str
    operandTypes: list[OperandTypeInformation] = field(default_factory=list)
