"""Callback objects a client passes to prepareModel* / execute*: notified once, then wait()."""
from __future__ import annotations

import threading

from ..hal.interfaces import IExecutionCallback, IPreparedModel, IPreparedModelCallback
from ..hal.types import ErrorStatus, OutputShape, Timing


class _Once:
    def __init__(self) -> None:
        self._done = threading.Event()
        self._lock = threading.Lock()
        self.notify_count = 0

    def _set(self, **values) -> None:
        with self._lock:
            self.notify_count += 1
            if self._done.is_set():
                return  # only the first notification counts
            self.__dict__.update(values)
            self._done.set()

    def wait(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)

    @property
    def notified(self) -> bool:
        return self._done.is_set()


class PreparedModelCallback(_Once, IPreparedModelCallback):
    def __init__(self) -> None:
        super().__init__()
        self.status: ErrorStatus = ErrorStatus.GENERAL_FAILURE
        self.prepared_model: IPreparedModel | None = None
        self.reason = ""  # why preparation failed, set by an in-process Device before it notifies

    def notify(self, status, preparedModel) -> None:
        self._set(status=ErrorStatus(status), prepared_model=preparedModel)

    notify_1_2 = notify
    notify_1_3 = notify

    def get(self, timeout: float | None = None) -> tuple[ErrorStatus, IPreparedModel | None]:
        self.wait(timeout)
        return self.status, self.prepared_model


class ExecutionCallback(_Once, IExecutionCallback):
    def __init__(self) -> None:
        super().__init__()
        self.status: ErrorStatus = ErrorStatus.GENERAL_FAILURE
        self.output_shapes: list[OutputShape] = []
        self.timing: Timing = Timing()

    def notify(self, status) -> None:
        self._set(status=ErrorStatus(status))

    def notify_1_2(self, status, outputShapes, timing) -> None:
        self._set(status=ErrorStatus(status), output_shapes=list(outputShapes), timing=timing)

    notify_1_3 = notify_1_2

    def get(self, timeout: float | None = None) -> tuple[ErrorStatus, list[OutputShape], Timing]:
        self.wait(timeout)
        return self.status, self.output_shapes, self.timing
