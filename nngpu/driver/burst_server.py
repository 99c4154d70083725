"""The driver side of a burst (1.2 IPreparedModel::configureExecutionBurst): a worker thread
that reads request packets from the request FMQ, executes them and answers on the result FMQ.

Pools arrive as slot identifiers; a per-burst cache maps slots to memories, asking the client's
IBurstCallback.getMemories once for every slot it has not seen (freeMemory drops a slot). On a
device plan the cache also registers each memory's mapping with the backend (page-locked on
CUDA, CL_MEM_USE_HOST_PTR on OpenCL), so an execution copies its inputs and outputs between that
registration and the plan's buffers on the device, with no host copy; freeing the slot releases
it. A repeated packet is also checked against the model once: the remembered check is reused.
Every packet gets exactly one result packet: an ill-formed packet or unknown slot an error with
no output shapes and no timing, and a result too long for the result FMQ GENERAL_FAILURE.

Latency. A client in another process (the channels arrive as QueueDescriptors) is served by the
worker, which busy-polls the request FMQ for SERVER_SPIN_US after each result before it sleeps
on the eventfd, so back-to-back requests never wait for a thread wake-up. A client in this
process (the channels are MessageQueue objects) shares the GIL with the worker: a spinning
worker would hold the GIL the client needs, and a sleeping one costs two thread wake-ups per
request. So that worker never spins, and the client runs each packet itself on its own thread
(serve_inline) right after writing it, under the same lock the worker takes to read one packet
and answer it: packets are still answered one at a time and in order, through the same queues,
the same checks and the same slot cache. The worker stays for clients that only use the FMQs.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

import numpy as np

from ..backends.base import Backend, DeviceValue
from ..burst_serialization import DATUM_SIZE, PacketError, decode_request, encode_result
from ..fmq import MessageQueue, QueueDescriptor, QueueError
from ..hal.interfaces import IBurstCallback, IBurstContext
from ..hal.types import ErrorStatus, MeasureTiming, OutputShape, Timing
from .execution import Checked, Result, check

log = logging.getLogger("nngpu.burst")

_IDLE_CHECK_S = 1.0  # the worker rechecks its stop flag this often even if no wake-up comes
# How long the worker of a cross-process burst busy-polls for the next request before it sleeps
# (µs; env NNGPU_BURST_SERVER_SPIN_US). It covers a client's think time between back-to-back
# computes; measured on 2 shared cores, see bench/test_bench_burst.py.
SERVER_SPIN_US = float(os.environ.get("NNGPU_BURST_SERVER_SPIN_US", "200"))
_NO_TIMING = Timing()
_RECENT = 16  # request packets remembered, decoded and resolved, per burst


class _BadSlots(Exception):
    def __init__(self, status: ErrorStatus, reason: str):
        super().__init__(reason)
        self.status = status


class _SlotCache:
    """slot -> memory for one burst, and the memory's registration with `backend` (None: the
    executor moves bytes through the host); misses are fetched from the client in one call."""

    def __init__(self, callback: IBurstCallback, backend: Backend | None = None):
        self._callback = callback
        self._backend = backend
        self._memories: dict[int, Any] = {}
        self._registered: dict[int, DeviceValue] = {}
        self._lock = threading.Lock()
        self.generation = 0  # bumped by every change: what was resolved before is stale after

    def resolve(self, slots: list[int]) -> list[Any]:
        memories = self._memories
        try:  # hot: every slot cached (dict reads are atomic; a concurrent free is a miss)
            return [memories[s] for s in slots]
        except KeyError:
            pass
        with self._lock:
            missing = sorted({s for s in slots if s not in self._memories})
        if missing:
            try:
                status, memories = self._callback.getMemories(missing)
            except Exception as e:  # a broken client callback is the client's failure
                raise _BadSlots(ErrorStatus.GENERAL_FAILURE, f"getMemories raised {type(e).__name__}: {e}") from e
            if status != ErrorStatus.NONE:
                raise _BadSlots(ErrorStatus(status) if status in ErrorStatus._value2member_map_
                                else ErrorStatus.GENERAL_FAILURE, f"getMemories({missing}) returned {status}")
            memories = list(memories or [])
            if len(memories) != len(missing) or any(not hasattr(m, "view") for m in memories):
                raise _BadSlots(ErrorStatus.GENERAL_FAILURE, "getMemories returned the wrong memories")
            registered = {s: r for s, m in zip(missing, memories) if (r := self._register(m)) is not None}
            with self._lock:
                self._memories.update(zip(missing, memories))
                self._registered.update(registered)
                self.generation += 1
        with self._lock:
            try:
                return [self._memories[s] for s in slots]
            except KeyError as e:  # freed between fetch and use by a misbehaving client
                raise _BadSlots(ErrorStatus.INVALID_ARGUMENT, f"slot {e} freed during the request") from e

    def registration(self, slot: int) -> DeviceValue | None:
        """The slot's memory as one uint8 value in backend memory, if it is registered."""
        return self._registered.get(slot)

    def _register(self, memory: Any) -> DeviceValue | None:
        if self._backend is None or not getattr(memory, "mapped", False):  # unsealed: never mapped (nngpu.memory)
            return None
        try:
            handle = self._backend.register_host(np.frombuffer(memory.map(), np.uint8))
        except Exception as e:  # e.g. a mapping the device cannot pin: that slot goes through the host
            log.info("burst: cannot register %r with %s: %s", memory, self._backend.name, e)
            return None
        return None if handle is None else DeviceValue(handle, (memory.size,), np.dtype(np.uint8), self._backend)

    def free(self, slot: int) -> None:
        with self._lock:
            self._memories.pop(slot, None)
            registered = self._registered.pop(slot, None)
            self.generation += 1
        self._release([registered])

    def clear(self) -> None:
        with self._lock:
            self._memories.clear()
            registered = list(self._registered.values())
            self._registered.clear()
            self.generation += 1
        self._release(registered)

    def _release(self, registered: list[DeviceValue | None]) -> None:
        for value in registered:
            if value is not None:
                try:
                    self._backend.release_host(value.buf)
                except Exception:  # the memory is gone either way
                    log.exception("burst: releasing a registered memory")

    def __len__(self) -> int:
        return len(self._memories)


class BurstContext(IBurstContext):
    """IBurstContext: owns the worker and the driver's ends of both queues."""

    def __init__(self, prepared, callback: IBurstCallback, requests: MessageQueue, results: MessageQueue,
                 in_process: bool = False):
        self._prepared = prepared
        self._requests = requests
        self._results = results
        self.in_process = in_process
        # a device plan's backend registers the slots (the reference reads pools on the host)
        self.slots = _SlotCache(callback, getattr(prepared.executor, "backend", None))
        self._stop = threading.Event()
        self._serving = threading.Lock()  # held while one packet is read, run and answered
        # packet bytes -> (slot generation, its request checked, MeasureTiming): a burst mostly
        # repeats a few packets, which then skip decoding, slot resolution and the model checks
        self._recent: dict[bytes, tuple[int, Checked | Result, MeasureTiming]] = {}
        self._worker = threading.Thread(target=self._serve, name="nngpu-burst", daemon=True)
        self._worker.start()

    # ---- IBurstContext ----------------------------------------------------------------------
    def freeMemory(self, slot: int) -> None:
        try:
            slot = int(slot)
        except (TypeError, ValueError):
            return
        with self._serving:  # not while a packet runs: its copies may use the registration
            self.slots.free(slot)
            self._recent.clear()  # do not keep the memory alive in a remembered request

    def close(self) -> None:
        """Stop the worker (waking it if it waits on a queue) and release the queues."""
        self._stop.set()
        self._requests.shutdown()
        self._results.shutdown()
        if threading.current_thread() is not self._worker:
            self._worker.join(timeout=5.0)

    @property
    def running(self) -> bool:
        return self._worker.is_alive()

    # ---- serving ------------------------------------------------------------------------------
    def serve_inline(self) -> bool:
        """Answer the pending request packet on the calling thread (a client in this process,
        right after its write). False if the worker is busy: the caller must wake it then; True
        once the packet has been answered, here or already by the worker."""
        if not self._serving.acquire(blocking=False):
            return False
        try:
            if not self._stop.is_set():
                raw = self._requests.read()
                if raw is not None and not self._answer(raw, wait=False):
                    self._requests.shutdown()  # unanswerable: fail the client now, not at its timeout
                    self._results.shutdown()
            return True
        finally:
            self._serving.release()

    def _serve(self) -> None:
        requests = self._requests
        try:
            while not self._stop.is_set():
                if not requests.wait_readable(1, timeout=_IDLE_CHECK_S):
                    if requests.closed or self._results.closed:
                        break  # the client went away, close(), or a queue it corrupted (fmq)
                    continue
                with self._serving:
                    raw = requests.read()
                    if raw is not None and not self._answer(raw, wait=True):
                        break
        except Exception:  # never let a worker die silently with the client waiting
            log.exception("burst worker failed")
            self._send(ErrorStatus.GENERAL_FAILURE, [], _NO_TIMING, wait=False)
        finally:
            for q, name in ((requests, "request"), (self._results, "result")):
                if q.corrupt:
                    log.warning("burst: %s queue corrupted by the client (%s): burst ended", name, q.corrupt)
            with self._serving:
                self.slots.clear()
                self._recent.clear()
            self._requests.close()
            self._results.close()

    def _answer(self, raw: bytes, wait: bool) -> bool:
        """Run one packet and send its result; False when the result cannot be sent."""
        t_dequeued = time.perf_counter_ns()
        try:
            status, shapes, timing = self._execute(raw, t_dequeued)
        except Exception:  # a driver bug: this packet fails, the burst goes on
            log.exception("burst execution failed")
            status, shapes, timing = ErrorStatus.GENERAL_FAILURE, [], _NO_TIMING
        return self._send(status, shapes, timing, wait)

    def _checked(self, raw: bytes) -> tuple[Checked | Result, MeasureTiming]:
        """The packet's request, its pools resolved (and registered) and checked against the
        model: a Checked to run, or the failed check's Result; PacketError or _BadSlots."""
        hit = self._recent.get(raw)
        if hit is not None and hit[0] == self.slots.generation:
            return hit[1], hit[2]
        burst_request = decode_request(raw)
        request = burst_request.with_pools(self.slots.resolve(burst_request.slots))
        generation = self.slots.generation  # after resolve's own change; frees wait for _serving
        prepared = self._prepared
        checked = check(prepared.executor, request, burst_request.measure, prepared.resolve_token)
        if isinstance(checked, Checked):  # a burst's pools are all memories, one per slot
            for pool, slot in zip(checked.pools, burst_request.slots):
                pool.registered = self.slots.registration(slot)
        if hit is not None or len(self._recent) >= _RECENT:
            self._recent.clear()  # stale entries hold memories the client may have freed
        self._recent[raw] = (generation, checked, burst_request.measure)
        return checked, burst_request.measure

    def _execute(self, raw: bytes, t_dequeued: int) -> tuple[ErrorStatus, list[OutputShape], Timing]:
        try:
            checked, measure = self._checked(raw)
        except PacketError as e:
            log.info("burst: ill-formed request packet: %s", e)
            return ErrorStatus.INVALID_ARGUMENT, [], _NO_TIMING
        except _BadSlots as e:
            log.info("burst: %s", e)
            return e.status, [], _NO_TIMING
        result = checked  # a failed check fails every repeat alike
        if isinstance(checked, Checked):  # a 1.2 burst request has no deadline to miss
            pending = checked.again().read()
            result = pending if isinstance(pending, Result) else pending.finish()
        timing = result.timing
        if result.status != ErrorStatus.NONE:
            timing = _NO_TIMING
        elif measure == MeasureTiming.YES:  # the spec's span: dequeue to enqueue
            in_driver = (time.perf_counter_ns() - t_dequeued) // 1000
            timing = Timing(min(timing.timeOnDevice, in_driver), max(timing.timeInDriver, in_driver))
        return result.status, result.output_shapes, timing

    def _send(self, status: ErrorStatus, shapes: list[OutputShape], timing: Timing, wait: bool) -> bool:
        results = self._results
        packet = encode_result(status, shapes, timing)
        if len(packet) > results.capacity * DATUM_SIZE:
            log.info("burst: result of %d datums exceeds the result queue", len(packet) // DATUM_SIZE)
            packet = encode_result(ErrorStatus.GENERAL_FAILURE, [], _NO_TIMING)
        if len(packet) > results.capacity * DATUM_SIZE:
            log.error("burst: the result queue cannot hold even an error result")
            return False
        if results.write(packet):
            return True
        while wait and not self._stop.is_set():  # the client has not read its last result yet
            if results.write_blocking(packet, timeout=_IDLE_CHECK_S):
                return True
            if results.closed:
                return False
        return False


def _open(channel: Any) -> MessageQueue:
    """The driver's own end of a queue given as a MessageQueue (a client in this process: the
    worker must not spin, see the module docstring) or a QueueDescriptor (another process)."""
    local = isinstance(channel, MessageQueue)
    desc = channel.descriptor() if local else channel
    if not isinstance(desc, QueueDescriptor) or desc.element_size != DATUM_SIZE:
        raise QueueError("not a burst queue")
    return MessageQueue.attach(desc, dup=True, spin_us=0 if local else SERVER_SPIN_US)


def configure_burst(prepared, callback: IBurstCallback, requestChannel: Any,
                    resultChannel: Any) -> tuple[ErrorStatus, IBurstContext | None]:
    """IPreparedModel::configureExecutionBurst: start a burst worker for `prepared`."""
    if callback is None or not hasattr(callback, "getMemories") or requestChannel is None or resultChannel is None:
        return ErrorStatus.INVALID_ARGUMENT, None
    try:
        requests = _open(requestChannel)
    except QueueError as e:
        log.info("configureExecutionBurst: request channel: %s", e)
        return ErrorStatus.INVALID_ARGUMENT, None
    try:
        results = _open(resultChannel)
    except QueueError as e:
        requests.close()
        log.info("configureExecutionBurst: result channel: %s", e)
        return ErrorStatus.INVALID_ARGUMENT, None
    if requests.closed or results.closed:
        requests.close()
        results.close()
        return ErrorStatus.INVALID_ARGUMENT, None
    try:
        in_process = isinstance(requestChannel, MessageQueue) and isinstance(resultChannel, MessageQueue)
        return ErrorStatus.NONE, BurstContext(prepared, callback, requests, results, in_process)
    except RuntimeError as e:  # no thread could be started
        requests.close()
        results.close()
        log.error("configureExecutionBurst: %s", e)
        return ErrorStatus.GENERAL_FAILURE, None
