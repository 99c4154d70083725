"""The AIDL IBurst: plain calls (no FMQ) over the core's burst with memory identifier tokens
(driver/token_burst.py in process, kept in the service over `nngpu connect`): a token's memory
stays mapped and registered with the backend until releaseMemoryResource."""
from __future__ import annotations

from typing import Any

from ..hal.aidl import types as A
from ..hal.aidl.interfaces import IBurst
from ..hal.types import MeasureTiming, OptionalTimeoutDuration, OptionalTimePoint
from . import from_core, to_core


class AidlBurst(IBurst):
    def __init__(self, core: Any):
        """core: a TokenBurst, or its remote counterpart (the same calls)."""
        self._core = core

    def executeSynchronously(self, request, memoryIdentifierTokens, measureTiming, deadlineNs,
                             loopTimeoutDurationNs) -> A.ExecutionResult:
        return self._run(request, memoryIdentifierTokens, to_core.measure(measureTiming),
                         to_core.deadline(deadlineNs), to_core.loop_timeout(loopTimeoutDurationNs))

    def executeSynchronouslyWithConfig(self, request, memoryIdentifierTokens, config,
                                       deadlineNs) -> A.ExecutionResult:
        measure, loop = to_core.execution_config(config)
        return self._run(request, memoryIdentifierTokens, measure, to_core.deadline(deadlineNs), loop)

    def releaseMemoryResource(self, memoryIdentifierToken) -> None:
        self._core.release(to_core.identifier(memoryIdentifierToken, "memoryIdentifierToken", allow_none=False))

    def _run(self, request, tokens, measure: MeasureTiming, deadline: OptionalTimePoint,
             loop: OptionalTimeoutDuration) -> A.ExecutionResult:
        core_request = to_core.request(request)
        if not isinstance(tokens, (list, tuple)) or len(tokens) != len(core_request.pools):
            raise to_core.invalid("memoryIdentifierTokens must give one token per request pool")
        ids = [to_core.identifier(t, f"memoryIdentifierTokens[{k}]") for k, t in enumerate(tokens)]
        result = self._core.run(core_request, ids, measure, deadline, loop)
        return from_core.execution_result(result.status, result.output_shapes, result.timing, result.reason)
