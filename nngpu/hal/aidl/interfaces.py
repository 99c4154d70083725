"""The AIDL NNAPI HAL's interfaces (IDevice, IPreparedModel, IBurst, IExecution, IBuffer and the
callbacks) as abstract classes with the spec's method names. A method returns its AIDL return
value (None for void) and raises ServiceSpecificError(status, message) where the spec names an
ErrorStatus; `out` parameters come back as a tuple."""
from __future__ import annotations

from abc import ABC, abstractmethod

from ..types.enums import DeviceType, ErrorStatus, ExecutionPreference, Priority
from .types import (
    BufferDesc,
    BufferRole,
    Capabilities,
    DeviceBuffer,
    ExecutionConfig,
    ExecutionResult,
    Extension,
    FencedExecutionResult,
    IPreparedModelParcel,
    Memory,
    Model,
    NumberOfCacheFiles,
    PrepareModelConfig,
    Request,
    Timing,
)


class IPreparedModelCallback(ABC):
    @abstractmethod
    def notify(self, status: ErrorStatus, preparedModel: "IPreparedModel | None") -> None: ...


class IFencedExecutionCallback(ABC):
    @abstractmethod
    def getExecutionInfo(self) -> tuple[ErrorStatus, Timing, Timing]:
        """(status, timingLaunched, timingFenced)."""


class IBuffer(ABC):
    @abstractmethod
    def copyFrom(self, src: Memory, dimensions: list[int]) -> None: ...

    @abstractmethod
    def copyTo(self, dst: Memory) -> None: ...


class IExecution(ABC):
    @abstractmethod
    def executeSynchronously(self, deadlineNs: int) -> ExecutionResult: ...

    @abstractmethod
    def executeFenced(self, waitFor: list[int], deadlineNs: int, durationNs: int) -> FencedExecutionResult: ...


class IBurst(ABC):
    @abstractmethod
    def executeSynchronously(self, request: Request, memoryIdentifierTokens: list[int], measureTiming: bool,
                             deadlineNs: int, loopTimeoutDurationNs: int) -> ExecutionResult: ...

    @abstractmethod
    def releaseMemoryResource(self, memoryIdentifierToken: int) -> None: ...

    @abstractmethod
    def executeSynchronouslyWithConfig(self, request: Request, memoryIdentifierTokens: list[int],
                                       config: ExecutionConfig, deadlineNs: int) -> ExecutionResult: ...


class IPreparedModel(ABC):
    @abstractmethod
    def executeSynchronously(self, request: Request, measureTiming: bool, deadlineNs: int,
                             loopTimeoutDurationNs: int) -> ExecutionResult: ...

    @abstractmethod
    def executeFenced(self, request: Request, waitFor: list[int], measureTiming: bool, deadlineNs: int,
                      loopTimeoutDurationNs: int, durationNs: int) -> FencedExecutionResult: ...

    @abstractmethod
    def configureExecutionBurst(self) -> IBurst: ...

    @abstractmethod
    def createReusableExecution(self, request: Request, config: ExecutionConfig) -> IExecution: ...

    @abstractmethod
    def executeSynchronouslyWithConfig(self, request: Request, config: ExecutionConfig,
                                       deadlineNs: int) -> ExecutionResult: ...

    @abstractmethod
    def executeFencedWithConfig(self, request: Request, waitFor: list[int], config: ExecutionConfig,
                                deadlineNs: int, durationNs: int) -> FencedExecutionResult: ...


class IDevice(ABC):
    @abstractmethod
    def allocate(self, desc: BufferDesc, preparedModels: list[IPreparedModelParcel], inputRoles: list[BufferRole],
                 outputRoles: list[BufferRole]) -> DeviceBuffer: ...

    @abstractmethod
    def getCapabilities(self) -> Capabilities: ...

    @abstractmethod
    def getNumberOfCacheFilesNeeded(self) -> NumberOfCacheFiles: ...

    @abstractmethod
    def getSupportedExtensions(self) -> list[Extension]: ...

    @abstractmethod
    def getSupportedOperations(self, model: Model) -> list[bool]: ...

    @abstractmethod
    def getType(self) -> DeviceType: ...

    @abstractmethod
    def getVersionString(self) -> str: ...

    @abstractmethod
    def prepareModel(self, model: Model, preference: ExecutionPreference, priority: Priority, deadlineNs: int,
                     modelCache: list[int], dataCache: list[int], token: bytes,
                     callback: IPreparedModelCallback) -> None: ...

    @abstractmethod
    def prepareModelFromCache(self, deadlineNs: int, modelCache: list[int], dataCache: list[int], token: bytes,
                              callback: IPreparedModelCallback) -> None: ...

    @abstractmethod
    def prepareModelWithConfig(self, model: Model, config: PrepareModelConfig,
                               callback: IPreparedModelCallback) -> None: ...
