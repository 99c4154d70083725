"""A reusable execution (AIDL IExecution) in the driver core: its request is checked against the
model once, at creation; each run or fenced run then reuses the check, as a burst repeating a
packet does. On a device plan its memory pools are registered with the backend once, at
creation, through the device's registry (driver/pool_registry.py): an execution then moves its
inputs and outputs between them and the plan's buffers on the device, with no host copy. A
registration lasts while its memory does, so a fenced run still waiting for its fences when the
execution is closed or collected keeps what it uses."""
from __future__ import annotations

import threading
from dataclasses import replace

from ..hal.interfaces import IFencedExecutionCallback
from ..hal.types import (ErrorStatus, MeasureTiming, NativeHandle, OptionalTimePoint, OptionalTimeoutDuration,
                         Request, Timing)
from ..validation import ValidationError
from .deadline import deadline_ns
from .execution import Checked, Result, check
from .fenced import launch_fenced, timeout_ns

FencedOutcome = tuple[ErrorStatus, NativeHandle, IFencedExecutionCallback | None]
_BUSY = "this reusable execution is already running"


class ReusableExecution:
    """One request on one prepared model (driver.prepared_model.PreparedModel), checked once.
    The spec lets a client run it once at a time: a run while another is under way is
    INVALID_ARGUMENT."""

    def __init__(self, prepared, checked: Checked):
        self._prepared = prepared
        self._checked: Checked | None = checked
        self._busy = threading.Lock()

    @classmethod
    def create(cls, prepared, request: Request, measure: MeasureTiming,
               loop: OptionalTimeoutDuration) -> "ReusableExecution | Result":
        """The execution, or the failed check's Result (a bad request fails here, once)."""
        try:
            loop_ns = timeout_ns(loop, "loop timeout")
        except ValidationError as e:
            return Result(ErrorStatus.INVALID_ARGUMENT, [], Timing(), str(e))
        checked = check(prepared.executor, request, measure, prepared.resolve_token, loop_ns,
                        register=prepared.register)
        return checked if isinstance(checked, Result) else cls(prepared, checked)

    def __len__(self) -> int:
        """How many memories it keeps."""
        return 0 if self._checked is None else sum(pool.memory is not None for pool in self._checked.pools)

    def close(self) -> None:
        """Give up the pools (their registrations go once nothing uses their memories); a run
        after this is INVALID_ARGUMENT."""
        self._checked = None

    def _take(self, deadline: OptionalTimePoint) -> Checked | Result:
        """The check, for one more execution by `deadline`, with the busy lock held; a Result
        (nothing held) when the deadline is malformed or another execution is under way."""
        try:
            limit = deadline_ns(deadline)
        except ValidationError as e:
            return Result(ErrorStatus.INVALID_ARGUMENT, [], Timing(), str(e))
        if not self._busy.acquire(blocking=False):
            return Result(ErrorStatus.INVALID_ARGUMENT, [], Timing(), _BUSY)
        checked = self._checked
        if checked is None:
            self._busy.release()
            return Result(ErrorStatus.INVALID_ARGUMENT, [], Timing(), "this reusable execution is closed")
        return replace(checked.again(), deadline_ns=limit)

    def run(self, deadline: OptionalTimePoint) -> Result:
        checked = self._take(deadline)
        if isinstance(checked, Result):
            return checked
        try:
            return checked.run()
        finally:
            self._busy.release()

    def fenced(self, waitFor: list[NativeHandle], deadline: OptionalTimePoint,
               duration: OptionalTimeoutDuration) -> FencedOutcome:
        """A fenced run: it starts once every waitFor fence has signalled."""
        failed = (ErrorStatus.INVALID_ARGUMENT, NativeHandle(), None)
        try:
            duration_ns = timeout_ns(duration, "duration")
        except ValidationError:
            return failed
        checked = self._take(deadline)
        if isinstance(checked, Result):
            return failed
        try:
            return launch_fenced(checked, waitFor, duration_ns, self._prepared.submit)
        finally:
            self._busy.release()
