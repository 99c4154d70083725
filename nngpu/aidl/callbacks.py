"""Callbacks across the AIDL face: the client's in-process IPreparedModelCallback, and the core
callback that turns the core's notification into the client's AIDL one."""
from __future__ import annotations

import threading
from typing import Callable

from ..driver.callbacks import PreparedModelCallback as CoreCallback
from ..hal.aidl.interfaces import IPreparedModel, IPreparedModelCallback
from ..hal.types import ErrorStatus


class PreparedModelCallback(IPreparedModelCallback):
    """An AIDL prepare callback to wait on: notified once (later notifications are counted and
    ignored); `reason` is the driver's why, set in process before it notifies."""

    def __init__(self) -> None:
        self._done = threading.Event()
        self._lock = threading.Lock()
        self.notify_count = 0
        self.status = ErrorStatus.GENERAL_FAILURE
        self.prepared_model: IPreparedModel | None = None
        self.reason = ""

    def notify(self, status: ErrorStatus, preparedModel: IPreparedModel | None) -> None:
        with self._lock:
            self.notify_count += 1
            if self._done.is_set():
                return
            self.status, self.prepared_model = ErrorStatus(status), preparedModel
            self._done.set()

    def get(self, timeout: float | None = None) -> tuple[ErrorStatus, IPreparedModel | None]:
        self._done.wait(timeout)
        return self.status, self.prepared_model


class Forward(CoreCallback):
    """The core's prepare callback for an AIDL client's: the prepared model goes out wrapped
    (`wrap`), with the reason where the client takes one."""

    def __init__(self, client: IPreparedModelCallback, wrap: Callable[[object], IPreparedModel]):
        super().__init__()
        self.client, self.wrap = client, wrap

    def notify(self, status, preparedModel) -> None:
        super().notify(status, preparedModel)
        if isinstance(self.client, PreparedModelCallback):
            self.client.reason = self.reason
        wrapped = self.wrap(preparedModel) if preparedModel is not None and status == ErrorStatus.NONE else None
        self.client.notify(ErrorStatus(status), wrapped)

    notify_1_2 = notify
    notify_1_3 = notify
