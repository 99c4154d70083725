"""The AIDL IPreparedModel over the driver core's prepared model (its core calls, nngpu.hidl):
each call converts its arguments (to_core), runs the core's execution, and converts the outcome
back (from_core).

In process that is the driver's PreparedModel. Over `nngpu connect` it is the service's proxy:
a synchronous or fenced execution is one message, with the service's bounds, and a reusable
execution or a burst is kept in the service (checked once, its pools registered there), as in
process."""
from __future__ import annotations

from ..driver.execution import Result
from ..hal.aidl import types as A
from ..hal.aidl.interfaces import IBurst, IExecution, IPreparedModel
from ..hal.types import MeasureTiming, OptionalTimeoutDuration, OptionalTimePoint, Request
from ..hidl.prepared_model import HidlPreparedModel
from . import from_core, to_core
from .burst import AidlBurst
from .execution import AidlExecution
from .fenced import fenced_result


class AidlPreparedModel(IPreparedModel):
    def __init__(self, core: HidlPreparedModel):
        """core: the driver core's prepared model, or the service's proxy of one."""
        self.core = core

    def run(self, request: Request, measure: MeasureTiming, loop: OptionalTimeoutDuration,
            deadline: OptionalTimePoint) -> A.ExecutionResult:
        """A synchronous execution of a core request."""
        result = self.core.run(request, measure, loop, deadline)
        return from_core.execution_result(result.status, result.output_shapes, result.timing, result.reason)

    def executeSynchronously(self, request, measureTiming, deadlineNs, loopTimeoutDurationNs) -> A.ExecutionResult:
        return self.run(to_core.request(request), to_core.measure(measureTiming),
                        to_core.loop_timeout(loopTimeoutDurationNs), to_core.deadline(deadlineNs))

    def executeSynchronouslyWithConfig(self, request, config, deadlineNs) -> A.ExecutionResult:
        measure, loop = to_core.execution_config(config)
        return self.run(to_core.request(request), measure, loop, to_core.deadline(deadlineNs))

    def executeFenced(self, request, waitFor, measureTiming, deadlineNs, loopTimeoutDurationNs,
                      durationNs) -> A.FencedExecutionResult:
        return self.fenced(to_core.request(request), waitFor, to_core.measure(measureTiming), deadlineNs,
                           to_core.loop_timeout(loopTimeoutDurationNs), durationNs)

    def executeFencedWithConfig(self, request, waitFor, config, deadlineNs, durationNs) -> A.FencedExecutionResult:
        measure, loop = to_core.execution_config(config)
        return self.fenced(to_core.request(request), waitFor, measure, deadlineNs, loop, durationNs)

    def fenced(self, request: Request, waitFor, measure: MeasureTiming, deadlineNs, loop: OptionalTimeoutDuration,
               durationNs) -> A.FencedExecutionResult:
        """A fenced execution of a core request (the AIDL fences, deadline and duration)."""
        status, fence, callback = self.core.executeFenced(request, to_core.handles(waitFor, "waitFor"), measure,
                                                          to_core.deadline(deadlineNs), loop,
                                                          to_core.duration(durationNs))
        return fenced_result(status, fence, callback)

    def configureExecutionBurst(self) -> IBurst:
        return AidlBurst(_created(self.core.token_burst()))

    def createReusableExecution(self, request, config) -> IExecution:
        measure, loop = to_core.execution_config(config)
        return AidlExecution(_created(self.core.reusable_execution(to_core.request(request), measure, loop)))


def _created(core):
    """A core object the core made, or the error of its refusal."""
    if isinstance(core, Result):
        from_core.raise_for(core.status, core.reason)
    return core
