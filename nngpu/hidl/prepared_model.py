"""IPreparedModel 1.0-1.3 over the driver core's calls: an asynchronous execution is `launch`
with the HAL version whose notify method its callback hears, a synchronous one is `run`. The
driver's PreparedModel (nngpu.driver.prepared_model) and the service's proxy
(nngpu.service.proxy) provide them. executeFenced and configureExecutionBurst exist in one
version each and are the core's own calls."""
from __future__ import annotations

from abc import abstractmethod
from typing import Any

from ..hal.interfaces import IPreparedModel
from ..hal.types import ErrorStatus, MeasureTiming, OptionalTimeoutDuration, OptionalTimePoint, Request


class HidlPreparedModel(IPreparedModel):
    # ---- the core's calls ---------------------------------------------------------------------
    @abstractmethod
    def launch(self, version: int, request: Request, measure: MeasureTiming, callback: Any,
               loop: OptionalTimeoutDuration | None = None, deadline: OptionalTimePoint | None = None) -> ErrorStatus:
        """Start an execution; the launch status now, the callback's notify of `version` later."""

    @abstractmethod
    def run(self, request: Request, measure: MeasureTiming, loop: OptionalTimeoutDuration | None = None,
            deadline: OptionalTimePoint | None = None) -> Any:
        """A synchronous execution: its driver.execution.Result (status, shapes, timing, reason)."""

    # ---- the HIDL methods ---------------------------------------------------------------------
    def execute(self, request, callback):
        return self.launch(10, request, MeasureTiming.NO, callback)

    def execute_1_2(self, request, measure, callback):
        return self.launch(12, request, measure, callback)

    def execute_1_3(self, request, measure, deadline, loopTimeoutDuration, callback):
        return self.launch(13, request, measure, callback, loopTimeoutDuration, deadline)

    def executeSynchronously(self, request, measure):
        return self.run(request, measure).as_tuple()

    def executeSynchronously_1_3(self, request, measure, deadline, loopTimeoutDuration):
        return self.run(request, measure, loopTimeoutDuration, deadline).as_tuple()
