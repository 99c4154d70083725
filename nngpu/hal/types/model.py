"""The model structs of types.hal 1.0-1.3: operands, operations, subgraphs and models."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .enums import OperandLifeTime, OperandType, OperationType


@dataclass
class DataLocation:
    poolIndex: int = 0
    offset: int = 0
    length: int = 0


@dataclass
class SymmPerChannelQuantParams:
    scales: list[float]
    channelDim: int


@dataclass
class OperandExtraParams:
    """safe_union: exactly one of channelQuant / extension is set, or neither (none)."""

    channelQuant: SymmPerChannelQuantParams | None = None
    extension: bytes | None = None


@dataclass
class Operand:
    type: OperandType
    dimensions: list[int]
    numberOfConsumers: int
    scale: float
    zeroPoint: int
    lifetime: OperandLifeTime
    location: DataLocation = field(default_factory=DataLocation)
    extraParams: OperandExtraParams | None = None


@dataclass
class Operation:
    type: OperationType
    inputs: list[int]
    outputs: list[int]


@dataclass
class ExtensionNameAndPrefix:
    name: str
    prefix: int


@dataclass
class Model:
    """The 1.0-1.2 model: one flat graph. `pools` holds Memory objects (nngpu.memory)."""

    operands: list[Operand]
    operations: list[Operation]
    inputIndexes: list[int]
    outputIndexes: list[int]
    operandValues: bytes = b""
    pools: list[Any] = field(default_factory=list)
    relaxComputationFloat32toFloat16: bool = False
    extensionNameToPrefix: list[ExtensionNameAndPrefix] = field(default_factory=list)


@dataclass
class Subgraph:
    operands: list[Operand]
    operations: list[Operation]
    inputIndexes: list[int]
    outputIndexes: list[int]


@dataclass
class Model_1_3:
    """The 1.3 model: a main subgraph plus the subgraphs IF/WHILE reference."""

    main: Subgraph
    referenced: list[Subgraph] = field(default_factory=list)
    operandValues: bytes = b""
    pools: list[Any] = field(default_factory=list)
    relaxComputationFloat32toFloat16: bool = False
    extensionNameToPrefix: list[ExtensionNameAndPrefix] = field(default_factory=list)
