"""Request memories registered with a device's backend, once per memory: page-locked on CUDA,
CL_MEM_USE_HOST_PTR on an OpenCL device that shares host memory. An execution on a device plan
then copies its inputs from the pool's registration, and its outputs into it, on the device:
no host staging copy, no upload or download through a temporary (driver/execution.py reads a
registered pool's regions in place; driver/outputs.py writes them).

A memory is registered once, whoever uses it: executions (sync, async, fenced, reusable) and
burst slots and tokens (driver/burst_executor.py) share its registration (CUDA refuses to page-lock
the same pages twice, so a second registration of its own would send a burst through the host).
One an execution used lasts as long as its Memory: once the Memory is collected it is released,
at the registry's next use rather than in the collector, which may run on any thread, in the
middle of another thread's capture. One only burst slots hold is released when the last of them
lets it go (freeMemory, a released token, the burst's end)."""
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


class _Held:
    """A memory's registration, and who holds it."""
    __slots__ = ("value", "slots", "executed", "finalizer")

    def __init__(self, value: DeviceValue | None):
        self.value = value
        self.slots = 0            # burst slots (and tokens) holding it
        self.executed = False     # an execution used it: kept while the memory lives
        self.finalizer: weakref.finalize | None = None


class PoolRegistry:
    """One device's registrations of request memories, each made at its memory's first use."""

    def __init__(self, backend: Backend):
        self._backend = backend
        self._held: weakref.WeakKeyDictionary[Any, _Held] = weakref.WeakKeyDictionary()
        self._orphans: list[DeviceValue] = []   # of collected memories, to release at the next use
        self._lock = threading.Lock()

    def registration(self, memory: Any) -> DeviceValue | None:
        """The memory's registration for an execution (made now if this is its first use), or
        None; it lasts while the memory does."""
        return self._take(memory, slot=False)

    def hold(self, memory: Any) -> DeviceValue | None:
        """The memory's registration for a burst slot, held until `let_go`, or None."""
        return self._take(memory, slot=True)

    def let_go(self, memory: Any) -> None:
        """A burst slot's hold on the memory ends: its registration is released now if no other
        slot holds it and no execution used it."""
        with self._lock:
            held = self._held.get(memory)
            if held is None or held.slots == 0:
                return
            held.slots -= 1
            if held.slots or held.executed:
                return
            del self._held[memory]
            if held.finalizer is not None:
                held.finalizer.detach()
        release_registered(self._backend, [held.value])

    def _take(self, memory: Any, slot: bool) -> DeviceValue | None:
        with self._lock:
            orphans, self._orphans = self._orphans, []
            held = self._held.get(memory)
            if held is None:   # None too is kept: a memory that cannot be registered is not tried again
                held = self._held[memory] = _Held(register_memory(self._backend, memory))
                if held.value is not None:
                    held.finalizer = weakref.finalize(memory, self._orphan, held.value)
            if slot:
                held.slots += 1
            else:
                held.executed = True
        release_registered(self._backend, orphans)
        return held.value

    def _orphan(self, registered: DeviceValue) -> None:
        # from the collector: list.append neither blocks nor calls into the device
        self._orphans.append(registered)
