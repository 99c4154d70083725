"""Request memories registered with a device's backend, once per memory: page-locked on CUDA,
CL_MEM_USE_HOST_PTR on an OpenCL device that shares host memory. An execution on a device plan
then copies its inputs from the pool's registration, and its outputs into it, on the device:
no host staging copy, no upload or download through a temporary (driver/execution.py reads a
registered pool's regions in place; driver/outputs.py writes them).

A registration lasts as long as its Memory: once the Memory is collected it is released, at the
registry's next use rather than in the collector, which may run on any thread, in the middle of
another thread's capture. A reusable execution's pools are registered here too; a burst's slots
and tokens keep registrations of their own (driver/burst_executor.py), released with the slot."""
from __future__ import annotations

import logging
import threading
import weakref
from typing import Any

import numpy as np

from ..backends.base import Backend, DeviceValue

log = logging.getLogger("nngpu.pool_registry")


def register_memory(backend: Backend, memory: Any) -> DeviceValue | None:
    """The whole of a mapped memory as one uint8 value in backend memory, or None where it
    cannot be registered (not mapped, read-only, a device that would cache it)."""
    if not getattr(memory, "mapped", False):  # unsealed: never mapped (nngpu.memory)
        return None
    try:
        handle = backend.register_host(np.frombuffer(memory.map(), np.uint8))
    except Exception as e:  # e.g. a mapping the device cannot pin: that pool goes through the host
        log.info("cannot register %r with %s: %s", memory, backend.name, e)
        return None
    return None if handle is None else DeviceValue(handle, (memory.size,), np.dtype(np.uint8), backend)


def release_registered(backend: Backend, registered: list[DeviceValue | None]) -> None:
    for value in registered:
        if value is not None:
            try:
                backend.release_host(value.buf)
            except Exception:  # the memory is gone either way
                log.exception("releasing a registered memory")


class PoolRegistry:
    """One device's registrations of request memories, each made at its memory's first execution."""

    def __init__(self, backend: Backend):
        self._backend = backend
        self._held: weakref.WeakKeyDictionary[Any, DeviceValue | None] = weakref.WeakKeyDictionary()
        self._orphans: list[DeviceValue] = []   # of collected memories, to release at the next use
        self._lock = threading.Lock()

    def registration(self, memory: Any) -> DeviceValue | None:
        """The memory's registration (made now if this is its first use), or None."""
        with self._lock:
            orphans, self._orphans = self._orphans, []
            if memory in self._held:
                found = self._held[memory]
                registered = None
            else:
                found = registered = register_memory(self._backend, memory)
                self._held[memory] = registered    # None too: a memory that cannot be is not tried again
        release_registered(self._backend, orphans)
        if registered is not None:
            weakref.finalize(memory, self._orphan, registered)
        return found

    def _orphan(self, registered: DeviceValue) -> None:
        # from the collector: list.append neither blocks nor calls into the device
        self._orphans.append(registered)
