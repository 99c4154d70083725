"""A burst of plain calls with memory identifier tokens (AIDL IBurst) in the driver core, over the
driver's slot cache (driver/burst_executor.py). A pool given with a token is kept, with its
mapping and, where the plan runs on a device, its registration with the backend, until the token
is released; a later call with that token and the same file region uses the kept one (a new
region replaces it). A pool without a token serves that call only. One execution runs at a time;
another call waits its turn."""
from __future__ import annotations

import os
import threading
from typing import Any

from ..hal.types import (ErrorStatus, MeasureTiming, MemoryPool, OptionalTimePoint, OptionalTimeoutDuration, Request,
                         Timing)
from ..validation import ValidationError
from .burst_executor import DriverBurstExecutor
from .execution import Result, check
from .fenced import timeout_ns


def identity(memory: Any) -> tuple:
    """What makes two memories the same memory: the file and the region of it."""
    st = os.fstat(memory.fd)
    return memory.name, st.st_dev, st.st_ino, memory.size, memory.offset


def _invalid(reason: str) -> Result:
    return Result(ErrorStatus.INVALID_ARGUMENT, [], Timing(), reason)


class TokenBurst:
    """Executions of one prepared model (driver.prepared_model.PreparedModel) whose pools may
    carry memory identifier tokens (None: no identity)."""

    def __init__(self, prepared):
        self._prepared = prepared
        self._slots = DriverBurstExecutor(prepared)
        self._identities: dict[int, tuple] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """How many memories are kept."""
        return len(self._identities)

    def new_tokens(self, tokens: list[int | None]) -> int:
        """How many of `tokens` hold no memory yet."""
        with self._lock:
            return len({t for t in tokens if t is not None and t not in self._identities})

    def release(self, token: int) -> None:
        with self._lock:
            self._identities.pop(token, None)
            self._slots.remove_cache_entry(token)

    def close(self) -> None:
        """Release every kept memory."""
        with self._lock:
            self._identities.clear()
            self._slots.remove_all_cache_entries()

    def run(self, request: Request, tokens: list[int | None], measure: MeasureTiming, deadline: OptionalTimePoint,
            loop: OptionalTimeoutDuration) -> Result:
        if len(tokens) != len(request.pools):
            return _invalid("memoryIdentifierTokens must give one token per request pool")
        for k, (pool, token) in enumerate(zip(request.pools, tokens)):
            if token is not None and (not isinstance(pool, MemoryPool) or pool.token is not None):
                return _invalid(f"memoryIdentifierTokens[{k}]: a driver-managed buffer takes -1")
        try:
            loop_ns = timeout_ns(loop, "loop timeout")
        except ValidationError as e:
            return _invalid(str(e))
        prepared = self._prepared
        with self._lock:
            pools = list(request.pools)
            for k, (pool, token) in enumerate(zip(pools, tokens)):
                if token is None:
                    continue
                same = identity(pool.hidlMemory)
                if self._identities.get(token) != same:          # a new token, or a new memory for it
                    self._slots.remove_cache_entry(token)
                    self._slots.add_cache_entry(pool.hidlMemory, token)
                    self._identities[token] = same
                pools[k] = MemoryPool(hidlMemory=self._slots.memory(token))
            resolved = Request(request.inputs, request.outputs, pools)
            checked = check(prepared.executor, resolved, measure, prepared.resolve_token, loop_ns, deadline)
            if isinstance(checked, Result):
                return checked
            for pool, token in zip(checked.pools, tokens):
                if token is not None:
                    pool.registered = self._slots.registration(token)
            return checked.run()
