"""Bursts against a hostile client or a stopped service (issue 10, part 4), with the driver in
a real service process (nngpu.service.burst_ipc): a request queue whose counters a client
corrupted ends that burst and costs the service no CPU; a client's timeout holds when the
service is stopped (SIGSTOP) or a getMemories is never answered, teardown included."""
import gc
import mmap
import os
import signal
import struct
import threading
import time

import pytest

from nngpu.burst import BurstError, ExecutionBurstController
from nngpu.burst.fmq import HEADER_SIZE
from nngpu.hal.types import ErrorStatus
from nngpu.service.burst_ipc import BurstService

MARGIN_S = 1.0  # scheduling slack on a loaded machine, on top of the timeout asked for
_COUNTER_AT = {"write": 64, "read": 128}  # nngpu.burst.fmq's layout


def cpu_seconds(pid: int) -> float:
    """utime + stime of process `pid` (/proc/PID/stat fields 14 and 15)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def poke_counter(queue, counter: str, value: int) -> None:
    """What a hostile client does: scribble on a queue's counter in the shared region."""
    with mmap.mmap(queue.descriptor().memfd, HEADER_SIZE) as mm:
        struct.pack_into("<Q", mm, _COUNTER_AT[counter], value)


@pytest.fixture
def service():
    svc = BurstService.spawn()
    try:
        yield svc
    finally:
        os.kill(svc.process.pid, signal.SIGCONT)  # a test may have stopped it
        svc.close()


@pytest.fixture
def prepared(service, kit):
    status, prepared = service.prepare(kit.add_model())
    assert status == ErrorStatus.NONE
    return prepared


@pytest.mark.parametrize("queue, counter, value", [
    ("_requests", "write", 1 << 62), ("_requests", "write", 0), ("_results", "read", 1 << 62)],
    ids=["request-write-far-ahead", "request-write-behind-read", "result-read-past-write"])
def test_a_corrupted_queue_counter_ends_that_burst_not_the_service(service, prepared, kit, queue, counter, value):
    """The service's worker sees counters that make no sense: it ends that burst (the client's
    next compute fails at once, not at its timeout) and spins on nothing."""
    r = kit.add_request()
    bystander = ExecutionBurstController.create(prepared, timeout=10)
    burst = ExecutionBurstController.create(prepared, timeout=10)
    try:
        for b in (burst, bystander):
            assert b.compute(r.request)[0] == ErrorStatus.NONE  # both counters past 0
        poke_counter(getattr(burst, queue), counter, value)
        time.sleep(0.3)  # the worker notices within one sleep slice
        before = cpu_seconds(service.process.pid)
        time.sleep(1.0)
        spent = cpu_seconds(service.process.pid) - before
        assert spent < 0.2, f"the service used {spent:.2f} s of CPU in 1 s"  # a spinning worker: ~1 s
        t0 = time.monotonic()
        assert burst.compute(r.request)[0] == ErrorStatus.GENERAL_FAILURE
        assert time.monotonic() - t0 < MARGIN_S and burst.closed
        assert bystander.compute(r.request)[0] == ErrorStatus.NONE  # other bursts go on being served
        with ExecutionBurstController.create(prepared, timeout=10) as fresh:
            assert fresh.compute(r.request)[0] == ErrorStatus.NONE
        assert service.alive and service.process.poll() is None
    finally:
        burst.close()
        bystander.close()


def test_compute_and_close_honour_the_timeout_when_the_service_is_stopped(service, prepared, kit):
    r = kit.add_request()
    burst = ExecutionBurstController.create(prepared, timeout=2.0)
    idle = ExecutionBurstController.create(prepared, timeout=1.0)
    assert burst.compute(r.request)[0] == ErrorStatus.NONE
    os.kill(service.process.pid, signal.SIGSTOP)
    t0 = time.monotonic()
    with pytest.raises(BurstError) as e:  # configure is never answered
        ExecutionBurstController.create(prepared, timeout=1.0)
    assert e.value.status == ErrorStatus.DEVICE_UNAVAILABLE and time.monotonic() - t0 < 1.0 + MARGIN_S
    t0 = time.monotonic()
    status = burst.compute(r.request)[0]
    took = time.monotonic() - t0
    assert status == ErrorStatus.GENERAL_FAILURE and 2.0 <= took < 2.0 + MARGIN_S, took
    t0 = time.monotonic()
    burst.close()  # broken already: nothing left to wait for
    assert time.monotonic() - t0 < MARGIN_S
    t0 = time.monotonic()
    idle.close()  # closeBurst is never answered: close waits its 1 s timeout, no more
    assert time.monotonic() - t0 < 1.0 + MARGIN_S


def test_freeing_a_slot_honours_the_timeout_when_the_service_is_stopped(service, prepared, kit):
    r, dropped = kit.add_request(), kit.add_request()
    burst = ExecutionBurstController.create(prepared, timeout=1.0)
    try:
        assert burst.compute(dropped.request)[0] == ErrorStatus.NONE
        assert burst.compute(r.request)[0] == ErrorStatus.NONE
        os.kill(service.process.pid, signal.SIGSTOP)
        t0 = time.monotonic()
        burst.forget(r.inputs)  # a freeMemory call that is never answered
        assert time.monotonic() - t0 < 1.0 + MARGIN_S
        del dropped
        gc.collect()  # its slots are freed before the next compute, within that compute's timeout
        t0 = time.monotonic()
        assert burst.compute(r.request)[0] == ErrorStatus.GENERAL_FAILURE
        assert time.monotonic() - t0 < 1.0 + MARGIN_S
    finally:
        burst.close()


def test_an_unanswered_get_memories_costs_only_the_timeout(service, prepared, kit):
    """The client never answers the service's getMemories: the compute fails at its timeout, and
    its teardown does not wait for the service's worker, still blocked in that call."""
    r = kit.add_request()
    release = threading.Event()
    burst = ExecutionBurstController.create(prepared, timeout=3.0)
    answer = burst.callback.getMemories
    burst.callback.getMemories = lambda slots: (release.wait(60), answer(slots))[1]
    try:
        t0 = time.monotonic()
        assert burst.compute(r.request)[0] == ErrorStatus.GENERAL_FAILURE
        burst.close()
        took = time.monotonic() - t0
        assert 3.0 <= took < 3.0 + MARGIN_S, took
    finally:
        release.set()
        burst.close()
    with ExecutionBurstController.create(prepared, timeout=10) as fresh:  # the service goes on
        assert fresh.compute(r.request)[0] == ErrorStatus.NONE
