"""What the client's remote objects (nngpu.service.proxy, nngpu.service.remote_reusable) share:
how a call that could not be made fails, how long a timed call waits, the wire's time fields, an
execution's reply as the core's Result, and a fenced execution's outcome with its callback in
the service."""
from __future__ import annotations

import logging
import time
import weakref
from typing import Any

from ..driver.deadline import deadline_ns
from ..driver.execution import Result
from ..hal.interfaces import IFencedExecutionCallback
from ..hal.types import ErrorStatus, NativeHandle, Timing
from ..validation import ValidationError
from .codec import WireError
from .wire import CALL_TIMEOUT_S, IpcError

log = logging.getLogger("nngpu.service")

DEADLINE_GRACE_S = 2.0


def failure(method: str, e: Exception) -> ErrorStatus:
    """A call that could not be made: a value the schema cannot hold, or a service gone."""
    log.warning("%s: %s", method, e)
    return ErrorStatus.INVALID_ARGUMENT if isinstance(e, WireError) else ErrorStatus.DEVICE_UNAVAILABLE


def wait_s(deadline) -> float:
    """How long to wait for the reply to a call with this deadline: until it, and DEADLINE_GRACE_S
    for the answer to arrive, after which the service is taken for stopped or gone."""
    try:
        ns = deadline_ns(deadline)
    except ValidationError:  # the service answers INVALID_ARGUMENT
        ns = None
    if ns is None:
        return CALL_TIMEOUT_S
    return max(0.0, (ns - time.monotonic_ns()) / 1e9) + DEADLINE_GRACE_S


def call(link: Any, method: str, op: str, args: dict, deadline=None) -> dict:
    """The reply to `op`, waited for as long as `deadline` allows; for a call that could not be
    made, its failure status and reason."""
    try:
        return link._conn.call(op, args, timeout=wait_s(deadline))
    except (IpcError, WireError) as e:
        return {"status": failure(method, e), "error": str(e)}


def as_result(reply: dict) -> Result:
    """An execution's reply as the driver core's Result."""
    return Result(reply["status"], reply.get("shapes", []), reply.get("timing", Timing()), reply.get("error", ""))


def timed(deadline, loop) -> dict:
    """An OptionalTimePoint and an OptionalTimeoutDuration as the wire's nanoseconds (None: absent)."""
    return {"deadline": getattr(deadline, "nanosecondsSinceEpoch", None),
            "loop_timeout": getattr(loop, "nanoseconds", None)}


class RemoteFencedCallback(IFencedExecutionCallback):
    """A fenced execution's callback in the service; `fence`: the link's dup of its fence, held
    while this object lives."""

    def __init__(self, link: Any, fenced_id: int, fence: int | None = None):
        self._link, self._id = link, fenced_id
        weakref.finalize(self, link.release_later, "releaseFenced", {"fenced": fenced_id})
        weakref.finalize(self, link.drop_fence, fence)

    def getExecutionInfo(self):
        try:
            reply = self._link._conn.call("fencedInfo", {"fenced": self._id})
        except (IpcError, WireError) as e:
            return failure("getExecutionInfo", e), Timing(), Timing()
        if reply["status"] != ErrorStatus.NONE:
            return reply["status"], Timing(), Timing()
        return reply["info_status"], reply["launched"], reply["after_fences"]


def fenced_call(link: Any, op: str, args: dict,
                deadline) -> tuple[ErrorStatus, NativeHandle, IFencedExecutionCallback | None]:
    """A fenced execution as executeFenced returns it: the fence, a fd of this process that is
    the caller's to close, and the callback in the service. The fences (`args["wait_for"]`)
    travel as fds; the service dups those it waits on."""
    try:
        reply = link._conn.call(op, {**args, "wait_for": list(args["wait_for"])}, timeout=wait_s(deadline))
    except (IpcError, WireError, TypeError) as e:
        return failure("executeFenced", e), NativeHandle(), None
    fenced, fence = reply.get("fenced"), reply.get("fence", NativeHandle())
    if fenced is None:
        return reply["status"], fence, None
    held = link.hold_fence(fence.fds[0]) if fence.fds else None
    return reply["status"], fence, RemoteFencedCallback(link, fenced, held)
