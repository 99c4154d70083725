"""The client side of a burst: ExecutionBurstController owns the request and result FMQs of
one IPreparedModel burst, gives every pool Memory a stable slot, and answers the driver's
getMemories through its IBurstCallback.

    with ExecutionBurstController.create(prepared) as burst:
        status, output_shapes, timing = burst.compute(request, MeasureTiming.NO)

Slots are keyed by object identity and hold the Memory weakly: once a Memory is garbage, its
slot is released to the driver with IBurstContext.freeMemory before the next compute (or at
once with forget()). Slot numbers are never reused within a burst, so a driver can never
confuse a freed memory with a new one. `prepared` may be in this process or a proxy for a
driver in another process (nngpu.service.burst_ipc); the controller only uses the HAL API, and
hands its packets over through the transport its context calls for (nngpu.burst.transport: nngpu's
own driver in this process answers each one on the calling thread).

Waiting for a result of a driver in another process busy-polls for `spin_us` (default
CLIENT_SPIN_US, env NNGPU_BURST_CLIENT_SPIN_US) before sleeping: long enough to cover a small
model's execution, so a hot burst costs no wake-up on either side.

Timeouts. With a `timeout`, a compute returns within it whatever the driver does (stopped,
dead, or never answering a call): the queues are waited on until one deadline, and the calls
into the context (freeMemory, close, the executeSynchronously fallback) run on a helper thread
that is waited for only until that deadline, then left to finish or fail on its own. A compute
that found the burst broken tears it down without waiting at all; close() waits at most
`timeout` for the driver to acknowledge.
"""
from __future__ import annotations

import collections
import logging
import os
import threading
import time
import weakref
from typing import Any

from ..threads import start_thread
from ..hal.interfaces import IBurstCallback, IBurstContext
from ..hal.types import UINT64_MAX, ErrorStatus, MeasureTiming, MemoryPool, Request, Timing
from ..memory import Memory
from .codec import DATUM_SIZE, ComputeResult, PacketError, decode_result, encode_request
from .fmq import MessageQueue
from .transport import transport_for

__all__ = ["ExecutionBurstController", "BurstCallback", "BurstError", "DEFAULT_CHANNEL_LENGTH", "CLIENT_SPIN_US"]

log = logging.getLogger("nngpu.burst")

DEFAULT_CHANNEL_LENGTH = 1024  # elements per FMQ (the VTS uses this length)
# µs the client busy-polls for a result before sleeping (a driver in another process); measured
# on 2 shared cores, see bench/test_bench_burst.py.
CLIENT_SPIN_US = float(os.environ.get("NNGPU_BURST_CLIENT_SPIN_US", "500"))
_MEASURES = {int(m): m for m in MeasureTiming}


class BurstError(Exception):
    """configureExecutionBurst failed; `status` is what the driver returned."""

    def __init__(self, status: ErrorStatus, reason: str):
        super().__init__(reason)
        self.status = status


class BurstCallback(IBurstCallback):
    """Slot bookkeeping for one burst: memory identity -> slot, answering getMemories."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_id: dict[int, tuple[weakref.ref, int]] = {}
        self._by_slot: dict[int, weakref.ref] = {}
        self._next_slot = 0
        self._dead: collections.deque[int] = collections.deque()  # slots whose memory died

    def slot_of(self, memory: Memory) -> int:
        """The memory's slot, allocating one on first sight."""
        with self._lock:
            entry = self._by_id.get(id(memory))
            if entry is not None and entry[0]() is memory:
                return entry[1]
            slot = self._next_slot
            self._next_slot += 1
            dead = self._dead
            ref = weakref.ref(memory, lambda _r, s=slot: dead.append(s))  # no reference to self
            self._by_id[id(memory)] = (ref, slot)
            self._by_slot[slot] = ref
            return slot

    def release(self, slot: int) -> bool:
        """Forget `slot`; True if it was known."""
        with self._lock:
            ref = self._by_slot.pop(slot, None)
            if ref is None:
                return False
            for key, (r, s) in list(self._by_id.items()):
                if s == slot:
                    del self._by_id[key]
            return True

    def forget(self, memory: Memory) -> int | None:
        with self._lock:
            entry = self._by_id.get(id(memory))
            if entry is None or entry[0]() is not memory:
                return None
        return entry[1] if self.release(entry[1]) else None

    def take_dead(self) -> list[int]:
        """Slots whose memory was collected since the last call, now released."""
        out = []
        while self._dead:
            slot = self._dead.popleft()
            if self.release(slot):
                out.append(slot)
        return out

    def memories(self, slots: list[int]) -> list[Memory] | None:
        """The live memories of `slots`, or None if one is unknown or gone."""
        with self._lock:
            refs = [self._by_slot.get(int(s)) for s in slots]
        mems = [r() if r is not None else None for r in refs]
        if any(m is None or getattr(m, "fd", -1) < 0 for m in mems):
            return None
        return mems

    def __len__(self) -> int:
        return len(self._by_slot)

    # ---- IBurstCallback ------------------------------------------------------------------------
    def getMemories(self, slots: list[int]) -> tuple[ErrorStatus, list[Any]]:
        try:
            mems = self.memories(list(slots))
        except (TypeError, ValueError):
            mems = None
        if mems is None:
            return ErrorStatus.INVALID_ARGUMENT, []
        try:
            # The driver gets its own handle (like a hidl_memory crossing binder): its cache then
            # never keeps the client's Memory alive, so the weak slot can expire.
            return ErrorStatus.NONE, [Memory(m.name, m.size, os.dup(m.fd), m.offset) for m in mems]
        except OSError as e:
            log.warning("getMemories: %s", e)
            return ErrorStatus.GENERAL_FAILURE, []


def _within(timeout: float | None, what: str, fn, *args, on_late=None) -> tuple[bool, Any]:
    """(True, fn(*args)); (True, None) if it raised (logged); (False, None) if it did not return
    within `timeout` s (None: no limit, run here). A call that overruns goes on on its daemon
    thread, and what it returns late goes to on_late: a stopped driver must not hold the caller
    past its timeout."""
    if timeout is None:
        try:
            return True, fn(*args)
        except Exception:
            log.exception(what)
            return True, None
    out: list = []
    done = threading.Event()
    lock = threading.Lock()
    abandoned = False

    def run() -> None:
        try:
            value = fn(*args)
        except Exception:
            log.exception(what)
            value = None
        with lock:
            out.append(value)
            done.set()
            late = abandoned
        if late and on_late is not None and value is not None:
            on_late(value)
    try:
        start_thread(run, "nngpu-burst-call")
    except RuntimeError:  # no thread to spare: the call cannot be bounded, so it is not made
        log.error("%s: no thread to run it on", what)
        return False, None
    done.wait(max(timeout, 0.0))
    with lock:
        if not out:
            abandoned = True
            (log.warning if timeout > 0 else log.debug)("%s: no answer within %.3g s", what, timeout)
            return False, None
    return True, out[0]


def _release(requests: MessageQueue, results: MessageQueue, context: IBurstContext | None,
             wait: float | None = None) -> None:
    """Tear a burst down, waiting at most `wait` s for the context's close (also run by the
    finalizer when a controller is dropped unclosed)."""
    requests.shutdown()
    results.shutdown()
    close = getattr(context, "close", None)
    if close is not None:
        _within(wait, "closing the burst context", close)
    requests.close()
    results.close()


def _left(deadline: float | None) -> float | None:
    """Seconds left until `deadline` (None: no deadline), never negative."""
    return None if deadline is None else max(deadline - time.monotonic(), 0.0)


class ExecutionBurstController:
    """One burst's client: encodes each compute's request into the request FMQ, waits for its
    result packet, and falls back to executeSynchronously when a request cannot travel (driver
    buffers, or a packet longer than the request FMQ). Thread-safe: computes run one at a time."""

    def __init__(self, prepared_model, requests: MessageQueue, results: MessageQueue,
                 callback: BurstCallback, context: IBurstContext, timeout: float | None = None):
        self._prepared = prepared_model
        self._requests = requests
        self._results = results
        self._request_capacity = requests.capacity * DATUM_SIZE  # bytes
        self.callback = callback
        self.context = context
        self.timeout = timeout
        self._lock = threading.Lock()
        self._closed = False
        # a dropped controller's finalizer never waits on the driver when a timeout was asked for
        self._finalizer = weakref.finalize(self, _release, requests, results, context,
                                           None if timeout is None else 0.0)
        self._transport = transport_for(context, requests, results)

    @classmethod
    def create(cls, prepared_model, *, request_length: int = DEFAULT_CHANNEL_LENGTH,
               result_length: int = DEFAULT_CHANNEL_LENGTH, blocking: bool = True,
               spin_us: float | None = None, timeout: float | None = None) -> "ExecutionBurstController":
        """Create both FMQs and configure a burst on `prepared_model`; BurstError on failure.
        `timeout` bounds this configuration, each compute and close (None: until the driver
        answers or goes away);
        `spin_us` how long a wait busy-polls before it sleeps (None: CLIENT_SPIN_US)."""
        spin = CLIENT_SPIN_US if spin_us is None else spin_us
        requests = MessageQueue(DATUM_SIZE, request_length, blocking=blocking, spin_us=spin)
        results = MessageQueue(DATUM_SIZE, result_length, blocking=blocking, spin_us=spin)
        callback = BurstCallback()
        def configure() -> tuple[ErrorStatus, IBurstContext | None]:
            status, context = prepared_model.configureExecutionBurst(callback, requests, results)
            return status, context
        finished, reply = _within(timeout, "configureExecutionBurst", configure,
                                  on_late=lambda late: _release(requests, results, late[1], 0.0))
        status, context = reply if reply is not None else (ErrorStatus.GENERAL_FAILURE, None)
        if not finished:  # a context configured after all sees its queues closed, and ends
            status = ErrorStatus.DEVICE_UNAVAILABLE
        if status != ErrorStatus.NONE or context is None:
            requests.close()
            results.close()
            raise BurstError(ErrorStatus(status) if status != ErrorStatus.NONE else ErrorStatus.GENERAL_FAILURE,
                             f"configureExecutionBurst returned {ErrorStatus(status).name}")
        return cls(prepared_model, requests, results, callback, context, timeout)

    # ---- execution ------------------------------------------------------------------------------
    def compute(self, request: Request, measure: MeasureTiming = MeasureTiming.NO) -> ComputeResult:
        """Execute `request` through the burst: (status, outputShapes, timing). Never raises."""
        deadline = None if self.timeout is None else time.monotonic() + self.timeout
        with self._lock:
            if self._closed:
                return ErrorStatus.GENERAL_FAILURE, [], Timing()
            if self.callback._dead and not self._free_dead(deadline):
                return self._broken("freeMemory got no answer")
            try:
                m = _MEASURES.get(measure)
                if m is None:
                    raise ValueError(f"bad MeasureTiming {measure!r}")
                slots = self._slots(request)
                if slots is None:
                    return self._fallback(request, m, deadline)  # like the reference: the slow path
                packet = encode_request(request, m, slots)
            except (PacketError, ValueError, TypeError, AttributeError) as e:
                log.info("burst compute: bad request: %s", e)
                return ErrorStatus.INVALID_ARGUMENT, [], Timing()
            if len(packet) > self._request_capacity:
                return self._fallback(request, m, deadline)
            if not self._transport.send(packet, _left(deadline)):
                return self._broken("the request could not be sent")
            raw = self._results.read_blocking(None, timeout=_left(deadline))
            if raw is None:
                return self._broken("no result came back")
            try:
                return decode_result(raw)
            except PacketError as e:
                log.warning("burst: ill-formed result packet: %s", e)
                return ErrorStatus.GENERAL_FAILURE, [], Timing()

    def _slots(self, request: Request) -> list[int] | None:
        slots = []
        for pool in request.pools:
            if isinstance(pool, MemoryPool):
                if pool.token is not None or pool.hidlMemory is None:
                    return None  # driver-managed buffers do not travel through a burst
                pool = pool.hidlMemory
            if not isinstance(pool, Memory):
                raise TypeError("a request pool is not a Memory")
            if not (0 <= pool.size <= UINT64_MAX and 0 <= pool.offset <= UINT64_MAX):
                # no hidl_memory describes it, so getMemories could not hand it to a driver
                # in another process: refused here as an invalid argument, like any other call
                raise ValueError(f"{pool!r} at offset {pool.offset} is beyond a uint64")
            slots.append(self.callback.slot_of(pool))
        return slots

    def _fallback(self, request: Request, measure: MeasureTiming, deadline: float | None) -> ComputeResult:
        def run() -> ComputeResult:
            status, shapes, timing = self._prepared.executeSynchronously(request, measure)
            return status, shapes, timing
        _finished, result = _within(_left(deadline), "burst fallback executeSynchronously", run)
        return result if result is not None else (ErrorStatus.GENERAL_FAILURE, [], Timing())

    def _broken(self, why: str) -> ComputeResult:
        """The burst cannot be trusted any more (a late result would answer the next request);
        its teardown does not wait for a driver that has already failed to answer."""
        log.warning("burst: %s; closing it", why)
        self._close_locked(0.0)
        return ErrorStatus.GENERAL_FAILURE, [], Timing()

    # ---- memory -------------------------------------------------------------------------------
    def _free_dead(self, deadline: float | None) -> bool:
        """freeMemory every slot whose memory died; False if the driver did not answer in time."""
        return all(self._free(slot, deadline) for slot in self.callback.take_dead())

    def _free(self, slot: int, deadline: float | None) -> bool:
        left = _left(deadline)
        return (left is None or left > 0) and _within(left, f"freeMemory({slot})", self.context.freeMemory, slot)[0]

    def forget(self, memory: Memory) -> None:
        """Tell the driver now that `memory` will not be used again in this burst."""
        with self._lock:
            if self._closed:
                return
            slot = self.callback.forget(memory)
            if slot is not None:
                deadline = None if self.timeout is None else time.monotonic() + self.timeout
                self._free(slot, deadline)

    # ---- lifetime ---------------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """End the burst, waiting at most `timeout` s for the driver to acknowledge."""
        self._requests.shutdown()  # wake a compute blocked on the queues, then wait for it
        self._results.shutdown()
        with self._lock:
            self._close_locked(self.timeout)

    def _close_locked(self, wait: float | None) -> None:
        if not self._closed:
            self._closed = True
            if self._finalizer.detach() is not None:
                _release(self._requests, self._results, self.context, wait)

    def __enter__(self) -> "ExecutionBurstController":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
