"""The AIDL IPreparedModel over the driver core's prepared model: each call converts its
arguments (to_core), runs the core's execution, and converts the outcome back (from_core)."""
from __future__ import annotations

from ..driver.prepared_model import PreparedModel
from ..hal.aidl import types as A
from ..hal.aidl.interfaces import IBurst, IExecution, IPreparedModel
from ..hal.types import MeasureTiming, OptionalTimeoutDuration, OptionalTimePoint, Request
from . import from_core, to_core
from .fenced import fenced_result


class AidlPreparedModel(IPreparedModel):
    def __init__(self, core: PreparedModel):
        self.core = core

    def run(self, request: Request, measure: MeasureTiming, loop: OptionalTimeoutDuration,
            deadline: OptionalTimePoint) -> A.ExecutionResult:
        """A synchronous execution of a core request."""
        result = self.core.run(request, measure, loop, deadline)
        return from_core.execution_result(result.status, result.output_shapes, result.timing, result.reason)

    def executeSynchronously(self, request, measureTiming, deadlineNs, loopTimeoutDurationNs) -> A.ExecutionResult:
        return self.run(to_core.request(request), to_core.measure(measureTiming), to_core.loop_timeout(loopTimeoutDurationNs),
                        to_core.deadline(deadlineNs))

    def executeSynchronouslyWithConfig(self, request, config, deadlineNs) -> A.ExecutionResult:
        measure, loop = to_core.execution_config(config)
        return self.run(to_core.request(request), measure, loop, to_core.deadline(deadlineNs))

    def executeFenced(self, request, waitFor, measureTiming, deadlineNs, loopTimeoutDurationNs,
                      durationNs) -> A.FencedExecutionResult:
        return self._fenced(to_core.request(request), waitFor, to_core.measure(measureTiming), deadlineNs,
                            to_core.loop_timeout(loopTimeoutDurationNs), durationNs)

    def executeFencedWithConfig(self, request, waitFor, config, deadlineNs, durationNs) -> A.FencedExecutionResult:
        measure, loop = to_core.execution_config(config)
        return self._fenced(to_core.request(request), waitFor, measure, deadlineNs, loop, durationNs)

    def _fenced(self, request: Request, waitFor, measure: MeasureTiming, deadlineNs, loop: OptionalTimeoutDuration,
                durationNs) -> A.FencedExecutionResult:
        status, fence, callback = self.core.executeFenced(request, to_core.handles(waitFor, "waitFor"), measure,
                                                          to_core.deadline(deadlineNs), loop,
                                                          to_core.duration(durationNs))
        return fenced_result(status, fence, callback)

    def configureExecutionBurst(self) -> IBurst:
        from .burst import AidlBurst
        return AidlBurst(self)

    def createReusableExecution(self, request, config) -> IExecution:
        from .execution import AidlExecution
        measure, loop = to_core.execution_config(config)
        return AidlExecution(self.core, to_core.request(request), measure, loop)
