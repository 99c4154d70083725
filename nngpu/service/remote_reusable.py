"""The client's side of a reusable execution and a burst with memory identifier tokens kept in
the service (nngpu.service.reusable_calls): the calls of the driver core's ReusableExecution and
TokenBurst, each one message. The service releases what they keep when they are collected or
closed, or when the connection ends."""
from __future__ import annotations

import weakref
from typing import Any

from ..driver.execution import Result
from ..hal.types import ErrorStatus, MeasureTiming, NativeHandle, OptionalTimePoint, OptionalTimeoutDuration, Request
from .remote_calls import as_result, call, fenced_call, timed


def _opened(cls, link: Any, reply: dict, key: str):
    """The object the service kept under reply[key], or the Result of its refusal."""
    if reply["status"] == ErrorStatus.NONE and reply.get(key) is not None:
        return cls(link, reply[key])
    return as_result(reply if reply["status"] != ErrorStatus.NONE else
                     {"status": ErrorStatus.GENERAL_FAILURE, "error": f"the service named no {key}"})


class RemoteReusableExecution:
    """A ReusableExecution in the service."""

    def __init__(self, link: Any, execution_id: int):
        self._link, self._id = link, execution_id
        weakref.finalize(self, link.release_later, "releaseExecution", {"execution": execution_id})

    @classmethod
    def create(cls, link: Any, model_id: int, request: Request, measure: MeasureTiming,
               loop: OptionalTimeoutDuration) -> "RemoteReusableExecution | Result":
        """The execution, or the Result of its refusal."""
        reply = call(link, "createReusableExecution", "createExecution", {
            "model": model_id, "request": request, "measure": measure, "loop_timeout": timed(None, loop)["loop_timeout"]})
        return _opened(cls, link, reply, "execution")

    def run(self, deadline: OptionalTimePoint) -> Result:
        return as_result(call(self._link, "executeSynchronously", "runExecution",
                              {"execution": self._id, "deadline": timed(deadline, None)["deadline"]}, deadline))

    def fenced(self, waitFor: list[NativeHandle], deadline: OptionalTimePoint, duration: OptionalTimeoutDuration):
        return fenced_call(self._link, "fencedExecution", {
            "execution": self._id, "wait_for": waitFor, "deadline": timed(deadline, None)["deadline"],
            "duration": getattr(duration, "nanoseconds", None)}, deadline)


class RemoteTokenBurst:
    """A TokenBurst in the service. Each call sends its pools' fds; the service keeps a token's
    memory while the token names the same file region."""

    def __init__(self, link: Any, burst_id: int):
        self._link, self._id = link, burst_id
        weakref.finalize(self, link.release_later, "closeTokenBurst", {"burst": burst_id})

    @classmethod
    def open(cls, link: Any, model_id: int) -> "RemoteTokenBurst | Result":
        return _opened(cls, link, call(link, "configureExecutionBurst", "openTokenBurst", {"model": model_id}), "burst")

    def run(self, request: Request, tokens: list[int | None], measure: MeasureTiming, deadline: OptionalTimePoint,
            loop: OptionalTimeoutDuration) -> Result:
        args = {"burst": self._id, "request": request, "tokens": [-1 if t is None else t for t in tokens],
                "measure": measure, **timed(deadline, loop)}
        return as_result(call(self._link, "executeSynchronously", "runTokenBurst", args, deadline))

    def release(self, token: int) -> None:
        call(self._link, "releaseMemoryResource", "releaseToken", {"burst": self._id, "token": token})
