"""The execution structs of types.hal 1.0-1.3: requests, their results and timing, driver-managed
buffers, deadlines, and the datums of the 1.2 burst FMQs."""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from .enums import UINT64_MAX, ErrorStatus
from .model import DataLocation


@dataclass
class RequestArgument:
    hasNoValue: bool = False
    location: DataLocation = field(default_factory=DataLocation)
    dimensions: list[int] = field(default_factory=list)


@dataclass
class MemoryPool:
    """1.3 Request.MemoryPool safe_union: a shared memory, or a driver-allocated buffer token."""

    hidlMemory: Any = None
    token: int | None = None


@dataclass
class Request:
    """`pools` holds Memory objects (1.0-1.2) or MemoryPool values (1.3)."""

    inputs: list[RequestArgument]
    outputs: list[RequestArgument]
    pools: list[Any] = field(default_factory=list)


@dataclass
class OutputShape:
    dimensions: list[int]
    isSufficient: bool = True


@dataclass
class Timing:
    timeOnDevice: int = UINT64_MAX
    timeInDriver: int = UINT64_MAX


NO_TIMING = Timing()


@dataclass
class BufferDesc:
    dimensions: list[int] = field(default_factory=list)


@dataclass
class BufferRole:
    modelIndex: int
    ioIndex: int
    frequency: float


@dataclass
class OptionalTimePoint:
    nanosecondsSinceEpoch: int | None = None


@dataclass
class OptionalTimeoutDuration:
    nanoseconds: int | None = None


@dataclass
class NativeHandle:
    """A hidl `handle` (native_handle_t): file descriptors and ints. A cache file is a handle of
    exactly one fd; a sync fence is a handle of one pollable fd, or of none when already done.
    The caller keeps ownership of the fds it passes; a handle the driver returns is the caller's
    to close."""

    fds: list[int] = field(default_factory=list)
    ints: list[int] = field(default_factory=list)


# --- FMQ data (1.2) ---------------------------------------------------------------------------


@dataclass
class FmqRequestPacketInformation:
    packetSize: int
    numberOfInputOperands: int
    numberOfOutputOperands: int
    numberOfPools: int


@dataclass
class FmqRequestOperandInformation:
    hasNoValue: bool
    location: DataLocation
    numberOfDimensions: int


class FmqRequestDatumKind(IntEnum):
    """safe_union discriminator, in declaration order."""

    packetInformation = 0
    inputOperandInformation = 1
    inputOperandDimensionValue = 2
    outputOperandInformation = 3
    outputOperandDimensionValue = 4
    poolIdentifier = 5
    measureTiming = 6


@dataclass
class FmqRequestDatum:
    """One element of the request channel: `kind` says which union member `value` holds."""

    kind: FmqRequestDatumKind
    value: Any


@dataclass
class FmqResultPacketInformation:
    packetSize: int
    errorStatus: ErrorStatus
    numberOfOperands: int


@dataclass
class FmqResultOperandInformation:
    isSufficient: bool
    numberOfDimensions: int


class FmqResultDatumKind(IntEnum):
    packetInformation = 0
    operandInformation = 1
    operandDimensionValue = 2
    executionTiming = 3


@dataclass
class FmqResultDatum:
    kind: FmqResultDatumKind
    value: Any
