"""The driver side of a burst (1.2 IPreparedModel::configureExecutionBurst), generic over its
executor (nngpu.burst.executor): a worker thread that reads request packets from the request
FMQ, runs them on the executor and answers on the result FMQ.

Pools arrive as slot identifiers; the server asks the client's IBurstCallback.getMemories once
for every slot the executor does not hold, and freeMemory drops a slot. A repeated packet is
decoded once: the decoded request is remembered (and handed to the executor as the same object).
Every packet gets exactly one result packet: an ill-formed packet or unknown slot an error with
no output shapes and no timing, and a result too long for the result FMQ GENERAL_FAILURE.

Latency. A client in another process (the channels arrive as QueueDescriptors) is served by the
worker, which busy-polls the request FMQ for SERVER_SPIN_US after each result before it sleeps
on the eventfd, so back-to-back requests never wait for a thread wake-up. A client in this
process (the channels are MessageQueue objects) shares the GIL with the worker: a spinning
worker would hold the GIL the client needs, and a sleeping one costs two thread wake-ups per
request. So that worker never spins, and the client runs each packet itself on its own thread
(serve_inline, through nngpu.burst.transport.InProcessTransport) right after writing it, under
the same lock the worker takes to read one packet and answer it: packets are still answered one
at a time and in order, through the same queues, the same checks and the same executor. The
worker stays for clients that only use the FMQs.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from typing import Any

from ..threads import start_thread
from ..hal.interfaces import IBurstCallback, IBurstContext
from ..hal.types import ErrorStatus, MeasureTiming, OutputShape, Timing
from .codec import DATUM_SIZE, BurstRequest, ComputeResult, PacketError, decode_request, encode_result
from .executor import BurstExecutorWithCache
from .descriptor import QueueDescriptor, QueueError, QueueResourceError
from .fmq import MessageQueue

__all__ = ["BurstServer", "start_server", "SERVER_SPIN_US", "RECENT_PACKETS"]

log = logging.getLogger("nngpu.burst")

_IDLE_CHECK_S = 1.0  # the worker rechecks its stop flag this often even if no wake-up comes
# How long the worker of a cross-process burst busy-polls for the next request before it sleeps
# (µs; env NNGPU_BURST_SERVER_SPIN_US). It covers a client's think time between back-to-back
# computes; measured on 2 shared cores, see bench/test_bench_burst.py.
SERVER_SPIN_US = float(os.environ.get("NNGPU_BURST_SERVER_SPIN_US", "200"))
RECENT_PACKETS = 16  # request packets remembered decoded, per burst (a burst mostly repeats a few)
_NO_TIMING = Timing()


class _BadSlots(Exception):
    def __init__(self, status: ErrorStatus, reason: str):
        super().__init__(reason)
        self.status = status


class BurstServer(IBurstContext):
    """IBurstContext: owns the worker, the driver's ends of both queues, and the executor.
    `in_process`: the client is in this process (its queues were MessageQueue objects), so it may
    answer its own packets with serve_inline."""

    def __init__(self, executor: BurstExecutorWithCache, callback: IBurstCallback, requests: MessageQueue,
                 results: MessageQueue, in_process: bool = False):
        self.executor = executor
        self._callback = callback
        self._requests = requests
        self._results = results
        self.in_process = in_process
        self._stop = threading.Event()
        self._serving = threading.Lock()  # held while one packet is read, run and answered
        self._recent: dict[bytes, BurstRequest] = {}  # packet bytes -> the request decoded
        self._worker = start_thread(self._serve, "nngpu-burst")

    # ---- IBurstContext ----------------------------------------------------------------------
    def freeMemory(self, slot: int) -> None:
        try:
            slot = int(slot)
        except (TypeError, ValueError):
            return
        with self._serving:  # not while a packet runs: it may be using that memory
            self.executor.remove_cache_entry(slot)

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
                self.executor.remove_all_cache_entries()
                self._recent.clear()
            self._requests.close()
            self._results.close()

    def _answer(self, raw: bytes, wait: bool) -> bool:
        """Run one packet and send its result; False when the result cannot be sent."""
        t_dequeued = time.perf_counter_ns()
        try:
            status, shapes, timing = self._execute(raw, t_dequeued)
        except Exception:  # an executor bug: this packet fails, the burst goes on
            log.exception("burst execution failed")
            status, shapes, timing = ErrorStatus.GENERAL_FAILURE, [], _NO_TIMING
        return self._send(status, shapes, timing, wait)

    def _decoded(self, raw: bytes) -> BurstRequest:
        """The packet's request, decoded once per distinct packet; PacketError if ill-formed."""
        request = self._recent.get(raw)
        if request is None:
            request = decode_request(raw)
            if len(self._recent) >= RECENT_PACKETS:
                self._recent.clear()
            self._recent[raw] = request
        return request

    def _ensure_cached(self, slots: list[int]) -> None:
        """Give the executor every slot's memory, fetching the missing ones in one getMemories."""
        present = self.executor.is_cache_entry_present
        missing = [s for s in slots if not present(s)]
        if not missing:  # the hot path: every slot held
            return
        missing = sorted(set(missing))
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
        for slot, memory in zip(missing, memories):
            self.executor.add_cache_entry(memory, slot)

    def _execute(self, raw: bytes, t_dequeued: int) -> ComputeResult:
        try:
            request = self._decoded(raw)
            self._ensure_cached(request.slots)
        except PacketError as e:
            log.info("burst: ill-formed request packet: %s", e)
            return ErrorStatus.INVALID_ARGUMENT, [], _NO_TIMING
        except _BadSlots as e:
            log.info("burst: %s", e)
            return e.status, [], _NO_TIMING
        status, shapes, timing = self.executor.execute(request)
        if status != ErrorStatus.NONE:
            timing = _NO_TIMING
        elif request.measure == MeasureTiming.YES:  # the spec's span: dequeue to enqueue
            in_driver = (time.perf_counter_ns() - t_dequeued) // 1000
            timing = Timing(min(timing.timeOnDevice, in_driver), max(timing.timeInDriver, in_driver))
        return status, shapes, timing

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
    """The server's own end of a queue given as a MessageQueue (a client in this process: the
    worker must not spin, see the module docstring) or a QueueDescriptor (another process)."""
    local = isinstance(channel, MessageQueue)
    desc = channel.descriptor() if local else channel
    if not isinstance(desc, QueueDescriptor) or desc.element_size != DATUM_SIZE:
        raise QueueError("not a burst queue")
    return MessageQueue.attach(desc, dup=True, spin_us=0 if local else SERVER_SPIN_US)


def _refused(which: str, e: QueueError) -> tuple[ErrorStatus, None]:
    """A channel that could not be opened: the caller's (INVALID_ARGUMENT), or this process
    out of fds or memory (GENERAL_FAILURE; valid arguments are never INVALID_ARGUMENT)."""
    if isinstance(e, QueueResourceError):
        log.error("configureExecutionBurst: %s: %s", which, e)
        return ErrorStatus.GENERAL_FAILURE, None
    log.info("configureExecutionBurst: %s: %s", which, e)
    return ErrorStatus.INVALID_ARGUMENT, None


def start_server(executor: BurstExecutorWithCache, callback: IBurstCallback, requestChannel: Any,
                 resultChannel: Any) -> tuple[ErrorStatus, BurstServer | None]:
    """configureExecutionBurst's arguments checked and a BurstServer over `executor` started."""
    if callback is None or not hasattr(callback, "getMemories") or requestChannel is None or resultChannel is None:
        return ErrorStatus.INVALID_ARGUMENT, None
    try:
        requests = _open(requestChannel)
    except QueueError as e:
        return _refused("request channel", e)
    try:
        results = _open(resultChannel)
    except QueueError as e:
        requests.close()
        return _refused("result channel", e)
    if requests.closed or results.closed:
        requests.close()
        results.close()
        return ErrorStatus.INVALID_ARGUMENT, None
    try:
        in_process = isinstance(requestChannel, MessageQueue) and isinstance(resultChannel, MessageQueue)
        return ErrorStatus.NONE, BurstServer(executor, callback, requests, results, in_process)
    except RuntimeError as e:  # no thread could be started
        requests.close()
        results.close()
        log.error("configureExecutionBurst: %s", e)
        return ErrorStatus.GENERAL_FAILURE, None
