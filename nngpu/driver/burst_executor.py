"""The driver's burst executor (nngpu.burst.executor's protocol) for one prepared model; the
generic nngpu.burst.server feeds it the packets.

Its cache maps slots to memories. On a device plan each slot also holds its memory's
registration with the backend (page-locked on CUDA, CL_MEM_USE_HOST_PTR on OpenCL) in the
device's registry (driver/pool_registry.py), shared with executions of the same memory, so an
execution copies its inputs and outputs between that registration and the plan's buffers on the
device, with no host copy; removing the slot lets go of it. A repeated packet is checked against
the model once: the remembered check is reused. That check is also where a slot's memory is
compared with what its file holds (nngpu.memory's `Memory.verify`): a memory that declares more
is INVALID_ARGUMENT, and it is never registered, since only a mapped memory is, and a mapped one
held its region when made.
"""
from __future__ import annotations

import logging
from typing import Any


from ..backends.base import DeviceValue
from ..burst.codec import BurstRequest, ComputeResult
from ..burst.server import RECENT_PACKETS, start_server
from ..hal.interfaces import IBurstCallback, IBurstContext
from ..hal.types import ErrorStatus
from .execution import Checked, Result, check
from .pool_registry import PoolRegistry

__all__ = ["DriverBurstExecutor", "configure_burst"]

log = logging.getLogger("nngpu.burst")


class DriverBurstExecutor:
    """A BurstExecutorWithCache running packets on `prepared` through driver.execution."""

    def __init__(self, prepared):
        self._prepared = prepared
        # a device plan's registry registers the slots (the reference reads pools on the host)
        self._pools: PoolRegistry | None = prepared.pools
        self._memories: dict[int, Any] = {}
        self._registered: dict[int, DeviceValue] = {}
        # id(request) -> (the request, its check): a burst mostly repeats a few packets, which
        # the server hands as the same BurstRequest; the entry holds it so its id stays unique
        self._recent: dict[int, tuple[BurstRequest, Checked | Result]] = {}

    # ---- the cache ------------------------------------------------------------------------------
    def is_cache_entry_present(self, slot: int) -> bool:
        return slot in self._memories

    def add_cache_entry(self, memory: Any, slot: int) -> None:
        if slot in self._memories:
            self.remove_cache_entry(slot)   # its hold goes with it
        self._memories[slot] = memory
        registered = None if self._pools is None else self._pools.hold(memory)
        if registered is not None:
            self._registered[slot] = registered

    def remove_cache_entry(self, slot: int) -> None:
        memory = self._memories.pop(slot, None)
        self._recent.clear()  # do not keep the memory alive in a remembered request
        self._registered.pop(slot, None)
        if memory is not None and self._pools is not None:
            self._pools.let_go(memory)

    def remove_all_cache_entries(self) -> None:
        for slot in list(self._memories):
            self.remove_cache_entry(slot)

    def memory(self, slot: int) -> Any:
        """The slot's memory (None for an empty slot)."""
        return self._memories.get(slot)

    def registration(self, slot: int) -> DeviceValue | None:
        """The slot's memory as one uint8 value in backend memory, if it is registered."""
        return self._registered.get(slot)

    def __len__(self) -> int:
        return len(self._memories)

    # ---- execution --------------------------------------------------------------------------------
    def _checked(self, request: BurstRequest) -> Checked | Result:
        """The request, its pools resolved (and registered) and checked against the model: a
        Checked to run, or the failed check's Result."""
        hit = self._recent.get(id(request))
        if hit is not None:
            return hit[1]
        prepared = self._prepared
        resolved = request.with_pools([self._memories[s] for s in request.slots])
        checked = check(prepared.executor, resolved, request.measure, prepared.resolve_token)
        if isinstance(checked, Checked):  # a burst's pools are all memories, one per slot
            for pool, slot in zip(checked.pools, request.slots):
                pool.registered = self._registered.get(slot)
        if len(self._recent) >= RECENT_PACKETS:
            self._recent.clear()  # stale entries hold memories the client may have freed
        self._recent[id(request)] = (request, checked)
        return checked

    def execute(self, request: BurstRequest) -> ComputeResult:
        checked = self._checked(request)
        # A failed check fails every repeat alike; a 1.2 burst request has no deadline to miss.
        result = checked.again().run() if isinstance(checked, Checked) else checked
        return result.status, result.output_shapes, result.timing


def configure_burst(prepared, callback: IBurstCallback, requestChannel: Any,
                    resultChannel: Any) -> tuple[ErrorStatus, IBurstContext | None]:
    """IPreparedModel::configureExecutionBurst: the generic burst server over a DriverBurstExecutor of `prepared`."""
    return start_server(DriverBurstExecutor(prepared), callback, requestChannel, resultChannel)
