"""The AIDL IExecution: a reusable execution. Its request is converted and checked against the
model once, at createReusableExecution (a bad one fails that call); each executeSynchronously or
executeFenced then reuses the check, as a burst repeating a packet does. On a device plan its
memory pools are registered with the backend once, as a burst's slots are
(driver/burst_executor.py): an execution then moves its inputs and outputs between them and the
plan's buffers on the device, with no host copy. The registrations go with the object."""
from __future__ import annotations

import threading
from dataclasses import replace

from ..driver.burst_executor import DriverBurstExecutor
from ..driver.deadline import deadline_ns
from ..driver.execution import Checked, Result, check
from ..driver.fenced import launch_fenced
from ..driver.prepared_model import PreparedModel
from ..hal.aidl import types as A
from ..hal.aidl.interfaces import IExecution
from ..hal.types import ErrorStatus, MeasureTiming, OptionalTimeoutDuration, Request
from ..validation import ValidationError
from ..validation.request import validate_request
from . import from_core, to_core
from .fenced import fenced_result


class AidlExecution(IExecution):
    def __init__(self, core: PreparedModel, request: Request, measure: MeasureTiming, loop: OptionalTimeoutDuration):
        checked = check(core.executor, request, measure, core.resolve_token, loop.nanoseconds)
        if isinstance(checked, Result):
            from_core.raise_for(checked.status, checked.reason)
        self._core = core
        self._slots = DriverBurstExecutor(core)
        for k, pool in enumerate(checked.pools):
            if pool.memory is not None:
                self._slots.add_cache_entry(pool.memory, k)
                pool.registered = self._slots.registration(k)
        self._checked: Checked = checked
        # The spec lets a client run one reusable execution once at a time.
        self._busy = threading.Lock()

    def __del__(self) -> None:
        slots = getattr(self, "_slots", None)
        if slots is not None:
            slots.remove_all_cache_entries()

    def _take(self, deadlineNs) -> Checked:
        limit = deadline_ns(to_core.deadline(deadlineNs))
        if not self._busy.acquire(blocking=False):
            raise A.ServiceSpecificError(ErrorStatus.INVALID_ARGUMENT, "this reusable execution is already running")
        return replace(self._checked.again(), deadline_ns=limit)

    def executeSynchronously(self, deadlineNs) -> A.ExecutionResult:
        checked = self._take(deadlineNs)
        try:
            result = checked.run()
        finally:
            self._busy.release()
        return from_core.execution_result(result.status, result.output_shapes, result.timing, result.reason)

    def executeFenced(self, waitFor, deadlineNs, durationNs) -> A.FencedExecutionResult:
        fences = to_core.handles(waitFor, "waitFor")
        duration = to_core.duration(durationNs).nanoseconds
        checked = self._take(deadlineNs)
        try:
            status, fence, callback = launch_fenced(checked, fences, duration, self._core.submit)
        finally:
            self._busy.release()
        return fenced_result(status, fence, callback)


class RemoteExecution(IExecution):
    """A reusable execution of a prepared model in another process (`nngpu connect`): its request
    is checked against the model here, at creation (the service checks it again, with its
    device buffers, at each execution), and each execution is a HIDL 1.3 call."""

    def __init__(self, prepared, request: Request, measure: MeasureTiming, loop: OptionalTimeoutDuration):
        if prepared.model is not None:
            try:
                validate_request(request, prepared.model)
            except ValidationError as e:
                raise to_core.invalid(str(e)) from e
        self._prepared, self._request, self._measure, self._loop = prepared, request, measure, loop

    def executeSynchronously(self, deadlineNs) -> A.ExecutionResult:
        return self._prepared.run(self._request, self._measure, self._loop, to_core.deadline(deadlineNs))

    def executeFenced(self, waitFor, deadlineNs, durationNs) -> A.FencedExecutionResult:
        return self._prepared.fenced(self._request, waitFor, self._measure, deadlineNs, self._loop, durationNs)
