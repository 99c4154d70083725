"""A fenced execution's outcome through the AIDL face: the sync fence, and the core's
callback with its timings in nanoseconds."""
from __future__ import annotations

from ..hal.aidl import types as A
from ..hal.aidl.interfaces import IFencedExecutionCallback
from ..hal.types import ErrorStatus
from . import from_core


class FencedExecutionCallback(IFencedExecutionCallback):
    """The core's fenced-execution callback, with its timings in nanoseconds."""

    def __init__(self, core):
        self._core = core

    def getExecutionInfo(self) -> tuple[ErrorStatus, A.Timing, A.Timing]:
        status, launched, fenced = self._core.getExecutionInfo()
        return ErrorStatus(status), from_core.timing(launched), from_core.timing(fenced)


def fenced_result(status: ErrorStatus, fence, callback) -> A.FencedExecutionResult:
    from_core.raise_for(status, "the fenced execution was refused")
    return A.FencedExecutionResult(FencedExecutionCallback(callback), fence.fds[0] if fence.fds else None)
