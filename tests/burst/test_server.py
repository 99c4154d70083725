"""nngpu.burst.server over an executor that knows nothing of nngpu's driver (it echoes each
output's requested dimensions): slots fetched once and freed, a repeated packet decoded once, the
spec's timing span, one result per packet whatever the packet or the executor does, and the
cache emptied when the burst ends; through the worker and on the client's thread alike."""
from __future__ import annotations

import time

import pytest

from nngpu.burst import DATUM_SIZE, BurstCallback, BurstRequest, ExecutionBurstController, MessageQueue, \
    start_server
from nngpu.burst.codec import decode_result, encode_request
from nngpu.hal.types import DataLocation, ErrorStatus, MeasureTiming, OutputShape, Request, RequestArgument, Timing
from nngpu.memory import allocate_shared

FAIL = [13]  # an output with these dimensions makes the executor raise


class EchoExecutor:
    """A BurstExecutorWithCache: runs nothing, answers each output's dimensions as its shape."""

    def __init__(self) -> None:
        self.memories: dict[int, object] = {}
        self.calls: list[tuple] = []  # cache changes, in order
        self.requests: list[BurstRequest] = []

    def is_cache_entry_present(self, slot: int) -> bool:
        return slot in self.memories

    def add_cache_entry(self, memory, slot: int) -> None:
        self.memories[slot] = memory
        self.calls.append(("add", slot))

    def remove_cache_entry(self, slot: int) -> None:
        self.memories.pop(slot, None)
        self.calls.append(("remove", slot))

    def remove_all_cache_entries(self) -> None:
        self.memories.clear()
        self.calls.append(("remove all",))

    def execute(self, request: BurstRequest):
        assert all(s in self.memories for s in request.slots)
        self.requests.append(request)
        if any(a.dimensions == FAIL for a in request.outputs):
            raise RuntimeError("the executor failed")
        return ErrorStatus.NONE, [OutputShape(a.dimensions, True) for a in request.outputs], Timing(3, 4)


class EchoModel:
    """The part of IPreparedModel a controller uses: a burst served by EchoExecutor, by the worker
    (the queues handed over as descriptors, as from another process) or in process."""

    def __init__(self, in_process: bool):
        self.executor = EchoExecutor()
        self.in_process = in_process

    def configureExecutionBurst(self, callback, requests, results):
        if not self.in_process:
            requests, results = requests.descriptor(), results.descriptor()
        return start_server(self.executor, callback, requests, results)


def _request(dims: list[int]) -> Request:
    arg = lambda pool: RequestArgument(False, DataLocation(pool, 0, 4), dims)
    return Request([arg(0)], [arg(1)], [allocate_shared(4), allocate_shared(4)])


def _until(pred, timeout: float = 5.0) -> bool:
    end = time.monotonic() + timeout
    while not pred() and time.monotonic() < end:
        time.sleep(0.01)
    return pred()


@pytest.mark.parametrize("in_process", [True, False], ids=["in_process", "worker"])
def test_any_executor_serves_a_burst(in_process):
    model = EchoModel(in_process)
    executor = model.executor
    request = _request([2, 3])
    with ExecutionBurstController.create(model) as burst:
        for _ in range(3):
            status, shapes, timing = burst.compute(request, MeasureTiming.YES)
            assert (status, shapes) == (ErrorStatus.NONE, [OutputShape([2, 3], True)])
            assert timing.timeOnDevice <= 3 and timing.timeInDriver >= 4  # widened to dequeue..enqueue
        assert executor.calls == [("add", 0), ("add", 1)]  # both fetched in one getMemories, once
        assert len({id(r) for r in executor.requests}) == 1  # the repeated packet was decoded once
        assert burst.compute(request, MeasureTiming.NO)[2] == Timing(3, 4)  # not measured: as executed
        burst.forget(request.pools[0])
        assert executor.calls[-1] == ("remove", 0)
        assert burst.compute(_request(FAIL)) == (ErrorStatus.GENERAL_FAILURE, [], Timing())
        assert burst.compute(request)[0] == ErrorStatus.NONE  # the burst goes on
        assert executor.calls[-1] == ("add", 4)  # the forgotten pool came back as a new slot
    assert _until(lambda: executor.calls[-1] == ("remove all",))


def test_every_packet_gets_one_result():
    executor = EchoExecutor()
    requests, results = MessageQueue(DATUM_SIZE, 64, spin_us=0), MessageQueue(DATUM_SIZE, 64, spin_us=0)
    callback = BurstCallback()
    status, server = start_server(executor, callback, requests, results)
    assert status == ErrorStatus.NONE and server.executor is executor
    try:
        request = _request([1])
        slots = [callback.slot_of(p) for p in request.pools]
        good = encode_request(request, MeasureTiming.NO, slots)
        unknown = encode_request(request, MeasureTiming.NO, [slots[0], 99])  # a slot the client never gave
        for packet, want in ((b"\xff" * DATUM_SIZE, ErrorStatus.INVALID_ARGUMENT),
                             (unknown, ErrorStatus.INVALID_ARGUMENT), (good, ErrorStatus.NONE)):
            assert requests.write_blocking(packet, timeout=5)
            raw = results.read_blocking(None, timeout=5)
            assert raw is not None and decode_result(raw)[0] == want
            assert results.read() is None  # exactly one result
        assert len(executor.requests) == 1  # only the good packet reached the executor
    finally:
        server.close()
        requests.close()
        results.close()
    assert not server.running and executor.calls[-1] == ("remove all",)
