"""The driver side of a burst (1.2 IPreparedModel::configureExecutionBurst): a worker thread
that reads request packets from the request FMQ, executes them and answers on the result FMQ.

Pools arrive as slot identifiers; a per-burst cache maps slots to memories, asking the client's
IBurstCallback.getMemories once for every slot it has not seen (freeMemory drops a slot).
Every packet gets exactly one result packet: an ill-formed packet or unknown slot an error with
no output shapes and no timing, and a result too long for the result FMQ GENERAL_FAILURE.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any

from ..burst_serialization import (
    DATUM_SIZE,
    PacketError,
    deserialize_request,
    request_from_bytes,
    result_packet_length,
    result_to_bytes,
    serialize_result,
)
from ..fmq import MessageQueue, QueueDescriptor, QueueError
from ..hal.interfaces import IBurstCallback, IBurstContext
from ..hal.types import ErrorStatus, MeasureTiming, OutputShape, Timing
from .execution import Result, begin

log = logging.getLogger("nngpu.burst")

_IDLE_CHECK_S = 1.0  # the worker rechecks its stop flag this often even if no wake-up comes


class _BadSlots(Exception):
    def __init__(self, status: ErrorStatus, reason: str):
        super().__init__(reason)
        self.status = status


class _SlotCache:
    """slot -> memory for one burst; misses are fetched from the client in one call."""

    def __init__(self, callback: IBurstCallback):
        self._callback = callback
        self._memories: dict[int, Any] = {}
        self._lock = threading.Lock()

    def resolve(self, slots: list[int]) -> list[Any]:
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
            with self._lock:
                self._memories.update(zip(missing, memories))
        with self._lock:
            try:
                return [self._memories[s] for s in slots]
            except KeyError as e:  # freed between fetch and use by a misbehaving client
                raise _BadSlots(ErrorStatus.INVALID_ARGUMENT, f"slot {e} freed during the request") from e

    def free(self, slot: int) -> None:
        with self._lock:
            self._memories.pop(slot, None)

    def clear(self) -> None:
        with self._lock:
            self._memories.clear()

    def __len__(self) -> int:
        return len(self._memories)


class BurstContext(IBurstContext):
    """IBurstContext: owns the worker and the driver's ends of both queues."""

    def __init__(self, prepared, callback: IBurstCallback, requests: MessageQueue, results: MessageQueue):
        self._prepared = prepared
        self._requests = requests
        self._results = results
        self.slots = _SlotCache(callback)
        self._stop = threading.Event()
        self._worker = threading.Thread(target=self._serve, name="nngpu-burst", daemon=True)
        self._worker.start()

    # ---- IBurstContext ----------------------------------------------------------------------
    def freeMemory(self, slot: int) -> None:
        try:
            self.slots.free(int(slot))
        except (TypeError, ValueError):
            pass

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

    # ---- the worker ---------------------------------------------------------------------------
    def _serve(self) -> None:
        try:
            while not self._stop.is_set():
                raw = self._requests.read_blocking(None, timeout=_IDLE_CHECK_S)
                if raw is None:
                    if self._requests.closed or self._results.closed:
                        break  # the client went away, or close()
                    continue
                t_dequeued = time.perf_counter_ns()
                try:
                    status, shapes, timing = self._execute(raw, t_dequeued)
                except Exception as e:  # a driver bug: this packet fails, the burst goes on
                    log.exception("burst execution failed")
                    status, shapes, timing = ErrorStatus.GENERAL_FAILURE, [], Timing()
                if not self._send(status, shapes, timing):
                    break
        except Exception:  # never let a worker die silently with the client waiting
            log.exception("burst worker failed")
            self._send(ErrorStatus.GENERAL_FAILURE, [], Timing())
        finally:
            self.slots.clear()
            self._requests.close()
            self._results.close()

    def _execute(self, raw: bytes, t_dequeued: int) -> tuple[ErrorStatus, list[OutputShape], Timing]:
        try:
            burst_request = deserialize_request(request_from_bytes(raw))
        except PacketError as e:
            log.info("burst: ill-formed request packet: %s", e)
            return ErrorStatus.INVALID_ARGUMENT, [], Timing()
        try:
            pools = self.slots.resolve(burst_request.slots)
        except _BadSlots as e:
            log.info("burst: %s", e)
            return e.status, [], Timing()
        request = burst_request.with_pools(pools)
        prepared = self._prepared
        pending = begin(prepared.runner, request, burst_request.measure, prepared.resolve_token)
        result = pending if isinstance(pending, Result) else pending.finish()
        timing = result.timing
        if result.status != ErrorStatus.NONE:
            timing = Timing()
        elif burst_request.measure == MeasureTiming.YES:  # the spec's span: dequeue to enqueue
            in_driver = (time.perf_counter_ns() - t_dequeued) // 1000
            timing = Timing(min(timing.timeOnDevice, in_driver), max(timing.timeInDriver, in_driver))
        return result.status, result.output_shapes, timing

    def _send(self, status: ErrorStatus, shapes: list[OutputShape], timing: Timing) -> bool:
        if result_packet_length(shapes) > self._results.capacity:
            log.info("burst: result of %d datums exceeds the result queue", result_packet_length(shapes))
            status, shapes, timing = ErrorStatus.GENERAL_FAILURE, [], Timing()
        packet = result_to_bytes(serialize_result(status, shapes, timing))
        while not self._stop.is_set():
            if self._results.write_blocking(packet, timeout=_IDLE_CHECK_S):
                return True
            if self._results.closed:
                return False
        return False


def _open(channel: Any) -> MessageQueue:
    """The driver's own end of a queue given as a MessageQueue or a QueueDescriptor."""
    desc = channel.descriptor() if isinstance(channel, MessageQueue) else channel
    if not isinstance(desc, QueueDescriptor) or desc.element_size != DATUM_SIZE:
        raise QueueError("not a burst queue")
    return MessageQueue.attach(desc, dup=True)


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
        return ErrorStatus.NONE, BurstContext(prepared, callback, requests, results)
    except RuntimeError as e:  # no thread could be started
        requests.close()
        results.close()
        log.error("configureExecutionBurst: %s", e)
        return ErrorStatus.GENERAL_FAILURE, None
