"""The driver core's prepared model: a validated model on its executor (the reference or a
device plan), executable from any thread; the HIDL methods (nngpu.hidl.prepared_model) and the
AIDL face (nngpu.aidl) are its calls."""
from __future__ import annotations

import logging
from typing import Any, Callable

from ..hal.interfaces import IExecutionCallback, IFencedExecutionCallback
from ..hidl.prepared_model import HidlPreparedModel
from ..hal.types import (ErrorStatus, MeasureTiming, NativeHandle, OptionalTimePoint, OptionalTimeoutDuration, Priority,
                         Request)
from ..validation import ValidationError
from .execution import Result, begin, check, run
from ..runtime.executor import Executor
from .fenced import launch_fenced, timeout_ns
from .pool_registry import PoolRegistry
from .reusable import ReusableExecution
from .token_burst import TokenBurst
from .work_queue import PriorityPool

log = logging.getLogger("nngpu.prepared_model")

# Asynchronous executions share one pool, keyed by prepared model: each model may run 8 at once
# (enough for concurrent clients on 2 cores), and the pool grows to 32 threads so that one model's
# long executions do not hold up another's (see work_queue); higher-priority models' go first.
_EXEC_POOL = PriorityPool(32, "nngpu-exec", per_key=8)
_MISSED = (ErrorStatus.MISSED_DEADLINE_TRANSIENT, ErrorStatus.MISSED_DEADLINE_PERSISTENT)


def _notify(callback: IExecutionCallback, result: Result, version: int) -> None:
    try:
        if version >= 13:
            callback.notify_1_3(*result.as_tuple())
        elif version >= 12:
            callback.notify_1_2(*result.as_tuple())
        else:
            callback.notify(result.status)
    except Exception:  # a failing client callback must not kill the worker
        log.exception("execution callback raised")


def _nanoseconds(duration: OptionalTimeoutDuration | None) -> int | None:
    return None if duration is None else duration.nanoseconds


class PreparedModel(HidlPreparedModel):
    """The driver core's prepared model, with the HIDL IPreparedModel methods over its calls
    (nngpu.hidl). 1.3 deadlines are checked before an execution starts, bound its WHILE loops,
    and make a late result MISSED_DEADLINE_TRANSIENT (no outputs written)."""

    def __init__(self, executor: Executor, resolve_token: Callable[[int], Any] | None = None,
                 priority: int = Priority.MEDIUM, pools: PoolRegistry | None = None):
        self.executor = executor
        self.resolve_token = resolve_token
        self.priority = priority    # of prepareModel_1_3: orders this model's waiting executions
        self.pools = pools    # a device plan's registrations of request memories (bursts hold them)
        self.register = pools.registration if pools is not None else None

    @property
    def model(self):
        return self.executor.model

    def run(self, request: Request, measure: MeasureTiming, loop: OptionalTimeoutDuration | None = None,
            deadline: OptionalTimePoint | None = None) -> Result:
        """A synchronous execution as the driver core gives it: the Result, with the reason of a
        failure (the HAL methods return its status, shapes and timing)."""
        return run(self.executor, request, measure, self.resolve_token, _nanoseconds(loop), deadline, self.register)

    def reusable_execution(self, request: Request, measure: MeasureTiming,
                           loop: OptionalTimeoutDuration) -> ReusableExecution | Result:
        """An execution of `request` to repeat (AIDL IExecution), or why the request is refused."""
        return ReusableExecution.create(self, request, measure, loop)

    def token_burst(self) -> TokenBurst:
        """A burst whose pools may carry memory identifier tokens (AIDL IBurst)."""
        return TokenBurst(self)

    def submit(self, job: Callable[[], None]) -> None:
        """Run `job` on the shared execution pool, in this model's turn."""
        _EXEC_POOL.submit(job, self.priority, self)

    def launch(self, version: int, request: Request, measure: MeasureTiming, callback,
               loop: OptionalTimeoutDuration | None = None, deadline: OptionalTimePoint | None = None) -> ErrorStatus:
        """An asynchronous execution: checked and its inputs read now, run on the shared pool,
        the callback's notify of HAL `version` told the outcome."""
        if callback is None or not hasattr(callback, "notify"):
            return ErrorStatus.INVALID_ARGUMENT
        pending = begin(self.executor, request, measure, self.resolve_token, _nanoseconds(loop), deadline,
                        self.register)
        if isinstance(pending, Result):
            _notify(callback, pending, version)
            # A bad request is reported by the return value and the callback; a missed deadline,
            # like any failure while executing, by the callback (VTS QualityOfServiceTests).
            return ErrorStatus.NONE if pending.status in _MISSED else pending.status
        self.submit(lambda: _notify(callback, pending.finish(), version))
        return ErrorStatus.NONE

    def configureExecutionBurst(self, callback, requestChannel, resultChannel):
        try:
            from .burst_executor import configure_burst
        except ImportError:
            return ErrorStatus.GENERAL_FAILURE, None
        return configure_burst(self, callback, requestChannel, resultChannel)

    def executeFenced(self, request, waitFor: list[NativeHandle], measure, deadline: OptionalTimePoint,
                      loopTimeoutDuration: OptionalTimeoutDuration, duration: OptionalTimeoutDuration
                      ) -> tuple[ErrorStatus, NativeHandle, IFencedExecutionCallback | None]:
        """Runs on _EXEC_POOL once every waitFor fence has signalled (nngpu.driver.fenced waits on
        them); the returned eventfd fence signals when it is done."""
        try:
            loop_ns, duration_ns = timeout_ns(loopTimeoutDuration, "loop timeout"), timeout_ns(duration, "duration")
        except ValidationError as e:
            log.info("execution rejected: INVALID_ARGUMENT: %s", e)
            return ErrorStatus.INVALID_ARGUMENT, NativeHandle(), None
        checked = check(self.executor, request, measure, self.resolve_token, loop_ns, deadline, self.register)
        if isinstance(checked, Result):
            return checked.status, NativeHandle(), None
        return launch_fenced(checked, waitFor, duration_ns, self.submit)
