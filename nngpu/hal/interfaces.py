"""The HAL interfaces (I*.hal 1.0-1.3) as abstract classes with the spec's method names.

A method that `generates (status, x, y)` returns the tuple `(status, x, y)`; one that generates
only a status returns it. `oneway` callback methods return None.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

from .types import (
    BufferDesc,
    BufferRole,
    DeviceStatus,
    ErrorStatus,
    ExecutionPreference,
    MeasureTiming,
    Model,
    Model_1_3,
    NativeHandle,
    OptionalTimeoutDuration,
    OptionalTimePoint,
    OutputShape,
    Priority,
    Request,
    Timing,
)


class IPreparedModelCallback(ABC):
    @abstractmethod
    def notify(self, status: ErrorStatus, preparedModel: "IPreparedModel | None") -> None: ...

    @abstractmethod
    def notify_1_2(self, status: ErrorStatus, preparedModel: "IPreparedModel | None") -> None: ...

    @abstractmethod
    def notify_1_3(self, status: ErrorStatus, preparedModel: "IPreparedModel | None") -> None: ...


class IExecutionCallback(ABC):
    @abstractmethod
    def notify(self, status: ErrorStatus) -> None: ...

    @abstractmethod
    def notify_1_2(self, status: ErrorStatus, outputShapes: list[OutputShape], timing: Timing) -> None: ...

    @abstractmethod
    def notify_1_3(self, status: ErrorStatus, outputShapes: list[OutputShape], timing: Timing) -> None: ...


class IBurstCallback(ABC):
    @abstractmethod
    def getMemories(self, slots: list[int]) -> tuple[ErrorStatus, list[Any]]: ...


class IBurstContext(ABC):
    @abstractmethod
    def freeMemory(self, slot: int) -> None: ...


class IBuffer(ABC):
    @abstractmethod
    def copyTo(self, dst: Any) -> ErrorStatus: ...

    @abstractmethod
    def copyFrom(self, src: Any, dimensions: list[int]) -> ErrorStatus: ...


class IFencedExecutionCallback(ABC):
    @abstractmethod
    def getExecutionInfo(self) -> tuple[ErrorStatus, Timing, Timing]: ...


class IPreparedModel(ABC):
    # 1.0
    @abstractmethod
    def execute(self, request: Request, callback: IExecutionCallback) -> ErrorStatus: ...

    # 1.2
    @abstractmethod
    def execute_1_2(self, request: Request, measure: MeasureTiming, callback: IExecutionCallback) -> ErrorStatus: ...

    @abstractmethod
    def executeSynchronously(
        self, request: Request, measure: MeasureTiming
    ) -> tuple[ErrorStatus, list[OutputShape], Timing]: ...

    @abstractmethod
    def configureExecutionBurst(
        self, callback: IBurstCallback, requestChannel: Any, resultChannel: Any
    ) -> tuple[ErrorStatus, IBurstContext | None]: ...

    # 1.3
    @abstractmethod
    def execute_1_3(
        self,
        request: Request,
        measure: MeasureTiming,
        deadline: OptionalTimePoint,
        loopTimeoutDuration: OptionalTimeoutDuration,
        callback: IExecutionCallback,
    ) -> ErrorStatus: ...

    @abstractmethod
    def executeSynchronously_1_3(
        self,
        request: Request,
        measure: MeasureTiming,
        deadline: OptionalTimePoint,
        loopTimeoutDuration: OptionalTimeoutDuration,
    ) -> tuple[ErrorStatus, list[OutputShape], Timing]: ...

    @abstractmethod
    def executeFenced(
        self,
        request: Request,
        waitFor: list[NativeHandle],
        measure: MeasureTiming,
        deadline: OptionalTimePoint,
        loopTimeoutDuration: OptionalTimeoutDuration,
        duration: OptionalTimeoutDuration,
    ) -> tuple[ErrorStatus, NativeHandle, IFencedExecutionCallback | None]: ...


class IDevice(ABC):
    # 1.0
    @abstractmethod
    def getCapabilities(self) -> tuple[ErrorStatus, Any]: ...

    @abstractmethod
    def getSupportedOperations(self, model: Model) -> tuple[ErrorStatus, list[bool]]: ...

    @abstractmethod
    def prepareModel(self, model: Model, callback: IPreparedModelCallback) -> ErrorStatus: ...

    @abstractmethod
    def getStatus(self) -> DeviceStatus: ...

    # 1.1
    @abstractmethod
    def getCapabilities_1_1(self) -> tuple[ErrorStatus, Any]: ...

    @abstractmethod
    def getSupportedOperations_1_1(self, model: Model) -> tuple[ErrorStatus, list[bool]]: ...

    @abstractmethod
    def prepareModel_1_1(
        self, model: Model, preference: ExecutionPreference, callback: IPreparedModelCallback
    ) -> ErrorStatus: ...

    # 1.2
    @abstractmethod
    def getVersionString(self) -> tuple[ErrorStatus, str]: ...

    @abstractmethod
    def getType(self) -> tuple[ErrorStatus, Any]: ...

    @abstractmethod
    def getCapabilities_1_2(self) -> tuple[ErrorStatus, Any]: ...

    @abstractmethod
    def getSupportedExtensions(self) -> tuple[ErrorStatus, list]: ...

    @abstractmethod
    def getSupportedOperations_1_2(self, model: Model) -> tuple[ErrorStatus, list[bool]]: ...

    @abstractmethod
    def getNumberOfCacheFilesNeeded(self) -> tuple[ErrorStatus, int, int]: ...

    @abstractmethod
    def prepareModel_1_2(
        self,
        model: Model,
        preference: ExecutionPreference,
        modelCache: list,
        dataCache: list,
        token: bytes,
        callback: IPreparedModelCallback,
    ) -> ErrorStatus: ...

    @abstractmethod
    def prepareModelFromCache(
        self, modelCache: list, dataCache: list, token: bytes, callback: IPreparedModelCallback
    ) -> ErrorStatus: ...

    # 1.3
    @abstractmethod
    def getCapabilities_1_3(self) -> tuple[ErrorStatus, Any]: ...

    @abstractmethod
    def getSupportedOperations_1_3(self, model: Model_1_3) -> tuple[ErrorStatus, list[bool]]: ...

    @abstractmethod
    def prepareModel_1_3(
        self,
        model: Model_1_3,
        preference: ExecutionPreference,
        priority: Priority,
        deadline: OptionalTimePoint,
        modelCache: list,
        dataCache: list,
        token: bytes,
        callback: IPreparedModelCallback,
    ) -> ErrorStatus: ...

    @abstractmethod
    def prepareModelFromCache_1_3(
        self,
        deadline: OptionalTimePoint,
        modelCache: list,
        dataCache: list,
        token: bytes,
        callback: IPreparedModelCallback,
    ) -> ErrorStatus: ...

    @abstractmethod
    def allocate(
        self,
        desc: BufferDesc,
        preparedModels: list[IPreparedModel],
        inputRoles: list[BufferRole],
        outputRoles: list[BufferRole],
    ) -> tuple[ErrorStatus, IBuffer | None, int]: ...
