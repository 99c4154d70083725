"""The client's side of a reusable execution and a burst with memory identifier tokens kept in
the service (nngpu.service.reusable_calls): the calls of the driver core's ReusableExecution and
TokenBurst, each one message. The service releases what they keep when they are collected or
closed, or when the connection ends."""
from __future__ import annotations

import weakref
from typing import Any

from ..driver.execution import Result
from ..hal.types import (ErrorStatus, MeasureTiming, NativeHandle, OptionalTimePoint, OptionalTimeoutDuration, Request,
                         Timing)
from .codec import WireError
from .remote_calls import failure, fenced_outcome, timed, wait_s
from .wire import IpcError


def _call(link: Any, method: str, op: str, args: dict, deadline: OptionalTimePoint | None = None) -> dict:
    """The reply to `op`; for a call that could not be made, its failure status and reason."""
    try:
        return link._conn.call(op, args, timeout=wait_s(deadline))
    except (IpcError, WireError) as e:
        return {"status": failure(method, e), "error": str(e)}


def _result(reply: dict) -> Result:
    return Result(reply["status"], reply.get("shapes", []), reply.get("timing", Timing()), reply.get("error", ""))


class RemoteReusableExecution:
    """A ReusableExecution in the service."""

    def __init__(self, link: Any, execution_id: int):
        self._link, self._id = link, execution_id
        weakref.finalize(self, link.release_later, "releaseExecution", {"execution": execution_id})

    @classmethod
    def create(cls, link: Any, model_id: int, request: Request, measure: MeasureTiming,
               loop: OptionalTimeoutDuration) -> "RemoteReusableExecution | Result":
        """The execution, or the Result of its refusal."""
        reply = _call(link, "createReusableExecution", "createExecution", {
            "model": model_id, "request": request, "measure": measure, "loop_timeout": timed(None, loop)["loop_timeout"]})
        if reply["status"] == ErrorStatus.NONE and reply.get("execution") is not None:
            return cls(link, reply["execution"])
        return _result(reply if reply["status"] != ErrorStatus.NONE else
                       {"status": ErrorStatus.GENERAL_FAILURE, "error": "the service named no execution"})

    def run(self, deadline: OptionalTimePoint) -> Result:
        return _result(_call(self._link, "executeSynchronously", "runExecution",
                             {"execution": self._id, "deadline": timed(deadline, None)["deadline"]}, deadline))

    def fenced(self, waitFor: list[NativeHandle], deadline: OptionalTimePoint, duration: OptionalTimeoutDuration):
        try:
            reply = self._link._conn.call("fencedExecution", {
                "execution": self._id, "wait_for": list(waitFor), "deadline": timed(deadline, None)["deadline"],
                "duration": getattr(duration, "nanoseconds", None)}, timeout=wait_s(deadline))
        except (IpcError, WireError, TypeError) as e:
            return failure("executeFenced", e), NativeHandle(), None
        return fenced_outcome(self._link, reply)


class RemoteTokenBurst:
    """A TokenBurst in the service. Each call sends its pools' fds; the service keeps a token's
    memory while the token names the same file region."""

    def __init__(self, link: Any, burst_id: int):
        self._link, self._id = link, burst_id
        weakref.finalize(self, link.release_later, "closeTokenBurst", {"burst": burst_id})

    @classmethod
    def open(cls, link: Any, model_id: int) -> "RemoteTokenBurst | Result":
        reply = _call(link, "configureExecutionBurst", "openTokenBurst", {"model": model_id})
        if reply["status"] == ErrorStatus.NONE and reply.get("burst") is not None:
            return cls(link, reply["burst"])
        return _result(reply if reply["status"] != ErrorStatus.NONE else
                       {"status": ErrorStatus.GENERAL_FAILURE, "error": "the service named no burst"})

    def run(self, request: Request, tokens: list[int | None], measure: MeasureTiming, deadline: OptionalTimePoint,
            loop: OptionalTimeoutDuration) -> Result:
        args = {"burst": self._id, "request": request, "tokens": [-1 if t is None else t for t in tokens],
                "measure": measure, **timed(deadline, loop)}
        return _result(_call(self._link, "executeSynchronously", "runTokenBurst", args, deadline))

    def release(self, token: int) -> None:
        _call(self._link, "releaseMemoryResource", "releaseToken", {"burst": self._id, "token": token})
