"""The AIDL NNAPI HAL's parcelables and unions (android.hardware.neuralnetworks, versions 1-4)
where they differ from the HIDL structs, with the spec's names; the enums are the HIDL ones
(hal.types), whose values the AIDL enums keep. No logic.

A union is a dataclass with one field per member, exactly one of them set. A
ParcelFileDescriptor is an int fd (ParcelFileDescriptor, which can hold the fd's owner) that
the caller keeps owning. Errors are raised as
ServiceSpecificError, the Python form of a ServiceSpecificException carrying an ErrorStatus."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..types.enums import (
    Constant,
    ErrorStatus,
    ExecutionPreference,
    LoopTimeoutDurationNs,
    OperandLifeTime,
    OperandType,
    OperationType,
    Priority,
)
from ..types.model import ExtensionNameAndPrefix, OperandExtraParams

# The AIDL constants that HIDL 1.2-1.3 defined already, with the same values.
BYTE_SIZE_OF_CACHE_TOKEN = int(Constant.BYTE_SIZE_OF_CACHE_TOKEN)
MAX_NUMBER_OF_CACHE_FILES = int(Constant.MAX_NUMBER_OF_CACHE_FILES)
DEFAULT_LOOP_TIMEOUT_DURATION_NS = int(LoopTimeoutDurationNs.DEFAULT)
MAXIMUM_LOOP_TIMEOUT_DURATION_NS = int(LoopTimeoutDurationNs.MAXIMUM)
# IDevice: an extension type or hint token is a 15-bit prefix (the sign bit stays 0) over a
# 16-bit type (HIDL 1.2 split it 16 / 16).
EXTENSION_TYPE_HIGH_BITS_PREFIX = 15
EXTENSION_TYPE_LOW_BITS_TYPE = 16
NO_TIME = -1            # a Timing field that was not measured; a deadline or duration omitted


class ServiceSpecificError(Exception):
    """A failed AIDL call: `status` is the ErrorStatus the spec names, `message` why."""

    def __init__(self, status: ErrorStatus, message: str = ""):
        super().__init__(f"{ErrorStatus(status).name}: {message}" if message else ErrorStatus(status).name)
        self.status = ErrorStatus(status)
        self.message = message


# --- memory ---------------------------------------------------------------------------------


class ParcelFileDescriptor(int):
    """An fd as a parcelable carries it: the number, keeping alive the object that owns the fd
    (`owner`), so that the fd is not closed, and its number reused, while a parcelable holds
    it. A plain int is accepted wherever one is, the caller then keeping its fd open."""

    owner: object

    def __new__(cls, fd: int, owner: object = None) -> "ParcelFileDescriptor":
        value = super().__new__(cls, fd)
        value.owner = owner
        return value


@dataclass
class Ashmem:
    """android.hardware.common.Ashmem: a shared-memory fd and its size in bytes."""

    fd: int
    size: int


@dataclass
class MappableFile:
    """android.hardware.common.MappableFile: `length` bytes of `fd` from `offset`, mapped with
    the PROT_* bits in `prot`."""

    length: int
    prot: int
    fd: int
    offset: int


@dataclass
class HardwareBuffer:
    """android.hardware.graphics.common.HardwareBuffer (AHardwareBuffer): none exist on Linux."""

    description: Any = None
    handle: Any = None


@dataclass
class Memory:
    """union Memory."""

    ashmem: Ashmem | None = None
    mappableFile: MappableFile | None = None
    hardwareBuffer: HardwareBuffer | None = None


# --- model ----------------------------------------------------------------------------------


@dataclass
class DataLocation:
    poolIndex: int = 0
    offset: int = 0
    length: int = 0
    padding: int = 0


@dataclass
class Operand:
    type: OperandType = OperandType.FLOAT32
    dimensions: list[int] = field(default_factory=list)
    scale: float = 0.0
    zeroPoint: int = 0
    lifetime: OperandLifeTime = OperandLifeTime.TEMPORARY_VARIABLE
    location: DataLocation = field(default_factory=DataLocation)
    extraParams: OperandExtraParams | None = None


@dataclass
class Operation:
    type: OperationType = OperationType.ADD
    inputs: list[int] = field(default_factory=list)
    outputs: list[int] = field(default_factory=list)


@dataclass
class Subgraph:
    operands: list[Operand] = field(default_factory=list)
    operations: list[Operation] = field(default_factory=list)
    inputIndexes: list[int] = field(default_factory=list)
    outputIndexes: list[int] = field(default_factory=list)


@dataclass
class Model:
    main: Subgraph = field(default_factory=Subgraph)
    referenced: list[Subgraph] = field(default_factory=list)
    operandValues: bytes = b""
    pools: list[Memory] = field(default_factory=list)
    relaxComputationFloat32toFloat16: bool = False
    extensionNameToPrefix: list[ExtensionNameAndPrefix] = field(default_factory=list)


# --- request and results --------------------------------------------------------------------


@dataclass
class RequestArgument:
    hasNoValue: bool = False
    location: DataLocation = field(default_factory=DataLocation)
    dimensions: list[int] = field(default_factory=list)


@dataclass
class RequestMemoryPool:
    """union RequestMemoryPool: a shared memory, or the token of an IDevice::allocate buffer."""

    pool: Memory | None = None
    token: int | None = None


@dataclass
class Request:
    inputs: list[RequestArgument] = field(default_factory=list)
    outputs: list[RequestArgument] = field(default_factory=list)
    pools: list[RequestMemoryPool] = field(default_factory=list)


@dataclass
class OutputShape:
    dimensions: list[int] = field(default_factory=list)
    isSufficient: bool = True


@dataclass
class Timing:
    """Nanoseconds; NO_TIME (-1) where not measured."""

    timeOnDeviceNs: int = NO_TIME
    timeInDriverNs: int = NO_TIME


@dataclass
class ExecutionResult:
    outputSufficientSize: bool = True
    outputShapes: list[OutputShape] = field(default_factory=list)
    timing: Timing = field(default_factory=Timing)


@dataclass
class FencedExecutionResult:
    """callback: an IFencedExecutionCallback; syncFence: a pollable fd (the caller's to close),
    or None when the execution has already finished."""

    callback: Any = None
    syncFence: int | None = None


@dataclass
class TokenValuePair:
    token: int = 0
    value: bytes = b""


@dataclass
class PrepareModelConfig:
    preference: ExecutionPreference = ExecutionPreference.FAST_SINGLE_ANSWER
    priority: Priority = Priority.MEDIUM
    deadlineNs: int = NO_TIME
    modelCache: list[int] = field(default_factory=list)
    dataCache: list[int] = field(default_factory=list)
    cacheToken: bytes = bytes(BYTE_SIZE_OF_CACHE_TOKEN)
    compilationHints: list[TokenValuePair] = field(default_factory=list)
    extensionNameToPrefix: list[ExtensionNameAndPrefix] = field(default_factory=list)


@dataclass
class ExecutionConfig:
    measureTiming: bool = False
    loopTimeoutDurationNs: int = NO_TIME
    executionHints: list[TokenValuePair] = field(default_factory=list)
    extensionNameToPrefix: list[ExtensionNameAndPrefix] = field(default_factory=list)


# --- device ---------------------------------------------------------------------------------


@dataclass
class PerformanceInfo:
    execTime: float = 0.0
    powerUsage: float = 0.0


@dataclass
class OperandPerformance:
    type: OperandType = OperandType.FLOAT32
    info: PerformanceInfo = field(default_factory=PerformanceInfo)


@dataclass
class Capabilities:
    relaxedFloat32toFloat16PerformanceScalar: PerformanceInfo = field(default_factory=PerformanceInfo)
    relaxedFloat32toFloat16PerformanceTensor: PerformanceInfo = field(default_factory=PerformanceInfo)
    operandPerformance: list[OperandPerformance] = field(default_factory=list)
    ifPerformance: PerformanceInfo = field(default_factory=PerformanceInfo)
    whilePerformance: PerformanceInfo = field(default_factory=PerformanceInfo)


@dataclass
class NumberOfCacheFiles:
    numModelCache: int = 0
    numDataCache: int = 0


@dataclass
class ExtensionOperandTypeInformation:
    type: int = 0
    isTensor: bool = False
    byteSize: int = 0


@dataclass
class Extension:
    name: str = ""
    operandTypes: list[ExtensionOperandTypeInformation] = field(default_factory=list)


@dataclass
class BufferDesc:
    dimensions: list[int] = field(default_factory=list)


@dataclass
class BufferRole:
    modelIndex: int = 0
    ioIndex: int = 0
    probability: float = 0.0


@dataclass
class DeviceBuffer:
    """allocate's result: the IBuffer and its positive token."""

    buffer: Any = None
    token: int = 0


@dataclass
class IPreparedModelParcel:
    preparedModel: Any = None
