"""The AIDL IExecution: a reusable execution, the core's own (driver/reusable.py in process,
kept in the service over `nngpu connect`). Its request is checked once, at
createReusableExecution (a bad one fails that call); each executeSynchronously or executeFenced
then repeats it."""
from __future__ import annotations

from typing import Any

from ..hal.aidl import types as A
from ..hal.aidl.interfaces import IExecution
from . import from_core, to_core
from .fenced import fenced_result


class AidlExecution(IExecution):
    def __init__(self, core: Any):
        """core: a ReusableExecution, or its remote counterpart (the same calls)."""
        self._core = core

    def executeSynchronously(self, deadlineNs) -> A.ExecutionResult:
        result = self._core.run(to_core.deadline(deadlineNs))
        return from_core.execution_result(result.status, result.output_shapes, result.timing, result.reason)

    def executeFenced(self, waitFor, deadlineNs, durationNs) -> A.FencedExecutionResult:
        fences = to_core.handles(waitFor, "waitFor")
        status, fence, callback = self._core.fenced(fences, to_core.deadline(deadlineNs), to_core.duration(durationNs))
        return fenced_result(status, fence, callback)
