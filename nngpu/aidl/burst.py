"""The AIDL IBurst: plain calls (no FMQ) with the driver's slot cache. A pool given with a
memory identifier token is kept, with its mapping and, where the plan runs on a device, its
registration with the backend (driver/burst_executor.py), until releaseMemoryResource; a later
call with that token and the same file region uses the kept one (a new region replaces it). A
pool with -1 serves that call only. One execution runs at a time; another call waits its turn."""
from __future__ import annotations

import threading

from ..driver.burst_executor import DriverBurstExecutor
from ..driver.execution import Checked, check
from ..hal.aidl import types as A
from ..hal.aidl.interfaces import IBurst
from ..hal.types import MeasureTiming, MemoryPool, OptionalTimeoutDuration, OptionalTimePoint
from . import from_core, to_core


class AidlBurst(IBurst):
    def __init__(self, prepared):
        self._prepared = prepared
        # In process, the driver's slot cache; a remote model's burst runs each request as a
        # synchronous execution (its tokens checked, nothing kept).
        self._slots = DriverBurstExecutor(prepared.core) if prepared.local else None
        self._identities: dict[int, tuple] = {}
        self._lock = threading.Lock()

    def executeSynchronously(self, request, memoryIdentifierTokens, measureTiming, deadlineNs,
                             loopTimeoutDurationNs) -> A.ExecutionResult:
        return self._run(request, memoryIdentifierTokens, to_core.measure(measureTiming),
                         to_core.deadline(deadlineNs), to_core.loop_timeout(loopTimeoutDurationNs))

    def executeSynchronouslyWithConfig(self, request, memoryIdentifierTokens, config,
                                       deadlineNs) -> A.ExecutionResult:
        measure, loop = to_core.execution_config(config)
        return self._run(request, memoryIdentifierTokens, measure, to_core.deadline(deadlineNs), loop)

    def releaseMemoryResource(self, memoryIdentifierToken) -> None:
        token = to_core.identifier(memoryIdentifierToken, "memoryIdentifierToken", allow_none=False)
        if self._slots is None:
            return
        with self._lock:
            self._identities.pop(token, None)
            self._slots.remove_cache_entry(token)

    def _run(self, request, tokens, measure: MeasureTiming, deadline: OptionalTimePoint,
             loop: OptionalTimeoutDuration) -> A.ExecutionResult:
        core_request = to_core.request(request)
        if not isinstance(tokens, (list, tuple)) or len(tokens) != len(core_request.pools):
            raise to_core.invalid("memoryIdentifierTokens must give one token per request pool")
        ids = [to_core.identifier(t, f"memoryIdentifierTokens[{k}]") for k, t in enumerate(tokens)]
        for k, (pool, token) in enumerate(zip(core_request.pools, ids)):
            if token is not None and pool.token is not None:
                raise to_core.invalid(f"memoryIdentifierTokens[{k}]: a driver-managed buffer takes -1")
        if self._slots is None:
            with self._lock:
                return self._prepared.run(core_request, measure, loop, deadline)
        core = self._prepared.core
        with self._lock:
            for k, (pool, token) in enumerate(zip(core_request.pools, ids)):
                if token is None:
                    continue
                same = to_core.identity(pool.hidlMemory)
                if self._identities.get(token) != same:          # a new token, or a new memory for it
                    self._slots.remove_cache_entry(token)
                    self._slots.add_cache_entry(pool.hidlMemory, token)
                    self._identities[token] = same
                core_request.pools[k] = MemoryPool(hidlMemory=self._slots.memory(token))
            checked = check(core.executor, core_request, measure, core.resolve_token, loop.nanoseconds, deadline)
            if isinstance(checked, Checked):
                for pool, token in zip(checked.pools, ids):
                    if token is not None:
                        pool.registered = self._slots.registration(token)
                checked = checked.run()
        return from_core.execution_result(checked.status, checked.output_shapes, checked.timing, checked.reason)
