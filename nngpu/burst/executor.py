"""What a burst server runs its packets on: an executor with a per-burst memory cache, modelled
on AOSP's IBurstExecutorWithCache (frameworks/ml/nn/common/ExecutionBurstServer.h).

The server owns the protocol: it decodes each packet, asks the client's IBurstCallback for the
memories of the slots the executor does not hold (getMemories, once per miss, all misses in one
call) and adds them, frees a slot on IBurstContext.freeMemory, and answers every packet once.
The executor owns the memories and the execution. The server calls it one method at a time,
never concurrently, so an executor needs no lock of its own; and it hands a repeated packet's
decoded BurstRequest as the same object, so an executor may remember per-request work (holding
the request while it does, so that its identity stays unique).
"""
from __future__ import annotations

from typing import Any, Protocol

from .codec import BurstRequest, ComputeResult

__all__ = ["BurstExecutorWithCache"]


class BurstExecutorWithCache(Protocol):
    def is_cache_entry_present(self, slot: int) -> bool:
        """Whether `slot`'s memory is held."""

    def add_cache_entry(self, memory: Any, slot: int) -> None:
        """Hold `memory` (a HAL memory the client's getMemories returned) as `slot`."""

    def remove_cache_entry(self, slot: int) -> None:
        """Drop `slot` (unknown slots are ignored): the client will not use it again."""

    def remove_all_cache_entries(self) -> None:
        """Drop every slot: the burst has ended (what AOSP leaves to the executor's destructor)."""

    def execute(self, request: BurstRequest) -> ComputeResult:
        """Run `request`, whose slots are all present: (status, output shapes, timing). Timing is
        the executor's own; the server makes it the spec's dequeue-to-enqueue span. May raise:
        the server answers GENERAL_FAILURE then."""
