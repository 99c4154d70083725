"""HAL 1.3 IPreparedModel::executeFenced and IFencedExecutionCallback: fences in and out, chains
that read the previous execution's outputs, fences in error, bad fences, the duration counted
from the fences, deadlines, timing, device buffers, and no file descriptor leaked."""
from __future__ import annotations

import gc
import os
import select
import socket
import threading
import time
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from nngpu.backends import device_backends
from nngpu.driver.callbacks import PreparedModelCallback
from nngpu.driver.device import Device
from nngpu.driver.fenced import FENCE_ERROR, FENCE_SIGNALED, FenceState, fence_state
from nngpu.hal import (BufferDesc, BufferRole, DataLocation, ErrorStatus, ExecutionPreference, MeasureTiming,
                       MemoryPool, NativeHandle, OptionalTimePoint, OptionalTimeoutDuration, Priority, Request,
                       RequestArgument, Timing)
from nngpu.hal.types import UINT64_MAX, LoopTimeoutDurationNs
from nngpu.json_models import build_model, build_request, load_file
from nngpu.memory import allocate_shared
from nngpu.modelutil import as_model_1_3

CORPUS = Path(__file__).resolve().parents[1] / "data" / "nnapi-cts" / "V1_3"
MISSED = (ErrorStatus.MISSED_DEADLINE_TRANSIENT, ErrorStatus.MISSED_DEADLINE_PERSISTENT)
REJECTED = (ErrorStatus.INVALID_ARGUMENT, NativeHandle(), None)
NONE_DURATION = OptionalTimeoutDuration()


def fenced(pm, request, wait=(), measure=MeasureTiming.NO, deadline=None, loop=None, duration=None):
    return pm.executeFenced(request, list(wait), measure, deadline or OptionalTimePoint(), loop or NONE_DURATION,
                            duration or NONE_DURATION)


def signalled(handle: NativeHandle, timeout_s: float = 20.0) -> bool:
    poll = select.poll()
    poll.register(handle.fds[0], select.POLLIN)
    return bool(poll.poll(int(timeout_s * 1000)))


def state(handle: NativeHandle) -> FenceState:
    return fence_state(handle.fds[0], "eventfd")


def open_fds() -> Counter[str]:
    """What the open fds refer to (their /proc/self/fd links), counted. The listing's own fd is
    closed by the time its link is read, so it drops out (a number it had may be reused by then:
    that fd is counted as what it now is)."""
    targets: Counter[str] = Counter()
    for name in os.listdir("/proc/self/fd"):
        try:
            targets[os.readlink(f"/proc/self/fd/{name}")] += 1
        except FileNotFoundError:
            pass
    return targets


@pytest.fixture
def fds():
    """File descriptors the test opens (gates, returned fences), closed at its end."""
    opened: list[int] = []
    yield opened
    for fd in opened:
        os.close(fd)


@pytest.fixture
def gate(fds) -> int:
    """An eventfd the test signals: a waitFor fence."""
    fds.append(os.eventfd(0, os.EFD_CLOEXEC))
    return fds[-1]


def launch(pm, request, fds, **kw):
    status, handle, cb = fenced(pm, request, **kw)
    assert status == ErrorStatus.NONE and len(handle.fds) == 1 and cb is not None
    fds.extend(handle.fds)
    return handle, cb


@pytest.fixture(scope="module", params=["numpy", *device_backends()])
def pm(request, kit):
    return kit.prepare(Device(request.param), kit.add_model())


def test_fences_in_and_out(pm, kit, fds, gate):
    r = kit.add_request()
    handle, cb = launch(pm, r.request, fds, wait=[NativeHandle([gate])])
    os.eventfd_write(gate, FENCE_SIGNALED)
    assert signalled(handle) and state(handle) is FenceState.SIGNALED
    assert cb.getExecutionInfo() == (ErrorStatus.NONE, Timing(), Timing())
    np.testing.assert_array_equal(r.result(), kit.A + kit.B)


def test_no_fences_and_already_signalled_fences(pm, kit, fds, gate):
    os.eventfd_write(gate, FENCE_SIGNALED)
    for wait in ([], [NativeHandle([gate])]):
        r = kit.add_request()
        handle, cb = launch(pm, r.request, fds, wait=wait)
        assert signalled(handle) and cb.getExecutionInfo()[0] == ErrorStatus.NONE
        np.testing.assert_array_equal(r.result(), kit.A + kit.B)


def test_a_chain_of_three_reads_each_previous_output(pm, kit, fds, gate):
    """Each execution's input a is the previous one's output pool: a + b, a + 2b, a + 3b. All
    three are launched before the first may start, so each reads its input after its fence."""
    n = kit.A.nbytes
    base = kit.add_request().inputs          # a at 0, b at n
    pools = [allocate_shared(n) for _ in range(3)]
    arg = lambda pool, off: RequestArgument(False, DataLocation(pool, off, n), [])  # noqa: E731
    wait, handles = [NativeHandle([gate])], []
    for k in range(3):
        prev = base if k == 0 else pools[k - 1]
        request = Request([arg(1, 0), arg(0, n)], [arg(2, 0)], [base, prev, pools[k]])
        handle, cb = launch(pm, request, fds, wait=wait)
        handles.append((handle, cb))
        wait = [handle]
    time.sleep(0.1)
    assert all(not p.array(np.float32, 0, 6).any() for p in pools)  # nothing ran yet
    os.eventfd_write(gate, FENCE_SIGNALED)
    assert signalled(handles[-1][0])
    for k, (handle, cb) in enumerate(handles):
        assert state(handle) is FenceState.SIGNALED and cb.getExecutionInfo()[0] == ErrorStatus.NONE
        np.testing.assert_array_equal(pools[k].array(np.float32, 0, 6).reshape(kit.SHAPE), kit.A + (k + 1) * kit.B)


def test_waits_for_a_fence_signalled_later_from_another_thread(pm, kit, fds, gate):
    r = kit.add_request()
    handle, cb = launch(pm, r.request, fds, wait=[NativeHandle([gate])], measure=MeasureTiming.YES)
    timer = threading.Timer(0.3, os.eventfd_write, (gate, FENCE_SIGNALED))
    timer.start()
    time.sleep(0.15)
    assert not signalled(handle, 0) and not r.result().any()  # not started before its fence
    assert cb.getExecutionInfo() == (ErrorStatus.GENERAL_FAILURE, Timing(), Timing())  # not finished yet
    assert signalled(handle)
    timer.join()
    status, launched, after_fences = cb.getExecutionInfo()
    assert status == ErrorStatus.NONE
    np.testing.assert_array_equal(r.result(), kit.A + kit.B)
    assert launched.timeInDriver >= 300_000                          # from the call, through the wait
    assert after_fences.timeInDriver <= launched.timeInDriver - 200_000  # from the fence only
    for t in (launched, after_fences):
        assert t.timeOnDevice <= t.timeInDriver


def test_a_fence_put_in_error_fails_the_execution_and_its_chain(pm, kit, fds, gate):
    first, second = kit.add_request(), kit.add_request()
    h1, cb1 = launch(pm, first.request, fds, wait=[NativeHandle([gate])], measure=MeasureTiming.YES)
    h2, cb2 = launch(pm, second.request, fds, wait=[h1], measure=MeasureTiming.YES)
    os.eventfd_write(gate, FENCE_ERROR)
    assert signalled(h2) and signalled(h1)
    for handle, cb, r in ((h1, cb1, first), (h2, cb2, second)):
        assert state(handle) is FenceState.ERROR
        assert cb.getExecutionInfo() == (ErrorStatus.GENERAL_FAILURE, Timing(), Timing())
        assert not r.result().any()


def _bad_fence(kind: str, fds: list[int], tmp_path: Path):
    def keep(fd: int) -> int:
        fds.append(fd)
        return fd

    if kind == "none":
        return None
    if kind == "not-a-handle":
        return keep(os.eventfd(0))
    if kind == "null-handle":
        return NativeHandle()
    if kind == "two-fds":
        return NativeHandle([keep(os.eventfd(0)), keep(os.eventfd(0))])
    if kind == "negative-fd":
        return NativeHandle([-1])
    if kind == "closed-fd":
        fd = os.eventfd(0)
        os.close(fd)
        return NativeHandle([fd])
    if kind == "regular-file":
        return NativeHandle([keep(os.open(tmp_path / "f", os.O_CREAT | os.O_RDWR))])
    if kind == "pipe":
        r, w = os.pipe()
        keep(w)
        return NativeHandle([keep(r)])
    if kind == "socket":
        a, b = socket.socketpair()
        keep(b.detach())
        return NativeHandle([keep(a.detach())])
    if kind == "in-error":
        fd = keep(os.eventfd(0))
        os.eventfd_write(fd, FENCE_ERROR)
        return NativeHandle([fd])
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["none", "not-a-handle", "null-handle", "two-fds", "negative-fd", "closed-fd",
                                  "regular-file", "pipe", "socket", "in-error"])
def test_a_bad_fence_is_invalid(pm, kit, fds, gate, tmp_path, kind):
    bad = _bad_fence(kind, fds, tmp_path)
    r = kit.add_request()
    fences = {os.readlink(f"/proc/self/fd/{fd}") for fd in fds}   # what the gate and the bad fence are
    before = open_fds()
    assert fenced(pm, r.request, wait=[NativeHandle([gate]), bad]) == REJECTED
    # No dup kept of any fence, the good one included. Only fences count: another thread (PoCL's,
    # an earlier test's execution) may open an fd of its own meanwhile.
    assert not [target for target in open_fds() - before if target in fences]
    assert not r.result().any()


def test_waitfor_that_is_not_a_list_is_invalid(pm, kit):
    assert pm.executeFenced(kit.add_request().request, None, MeasureTiming.NO, OptionalTimePoint(), NONE_DURATION,
                            NONE_DURATION) == REJECTED


def test_a_bad_request_or_argument_is_invalid(pm, kit):
    r = kit.add_request()
    no_input = Request(r.request.inputs[:1], r.request.outputs, r.request.pools)
    assert fenced(pm, no_input) == REJECTED
    assert pm.executeFenced(r.request, [], 7, OptionalTimePoint(), NONE_DURATION, NONE_DURATION) == REJECTED
    for bad in (-1, 2**64, 1.5, "soon", True):
        assert fenced(pm, r.request, duration=OptionalTimeoutDuration(bad)) == REJECTED
        assert fenced(pm, r.request, deadline=OptionalTimePoint(bad)) == REJECTED
    for bad in (-1, int(LoopTimeoutDurationNs.MAXIMUM) + 1, 0.5):
        assert fenced(pm, r.request, loop=OptionalTimeoutDuration(bad)) == REJECTED
    assert pm.executeFenced(r.request, [], MeasureTiming.NO, OptionalTimePoint(), NONE_DURATION, 5) == REJECTED
    assert not r.result().any()


def test_outputs_must_be_fully_specified(kit, fds):
    model = kit.add_model()
    model.operands[3].dimensions = [0, 3]
    pm = kit.prepare(Device("numpy"), model)
    r = kit.add_request(dims=False)
    assert fenced(pm, r.request) == REJECTED
    r = kit.add_request(dims=True)        # the request completes the output's dimensions
    handle, cb = launch(pm, r.request, fds)
    assert signalled(handle) and cb.getExecutionInfo()[0] == ErrorStatus.NONE


@pytest.mark.parametrize("measure", [MeasureTiming.NO, MeasureTiming.YES])
def test_timing_only_when_measured(pm, kit, fds, measure):
    handle, cb = launch(pm, kit.add_request().request, fds, measure=measure)
    assert signalled(handle)
    status, launched, after_fences = cb.getExecutionInfo()
    assert status == ErrorStatus.NONE
    if measure == MeasureTiming.NO:
        assert launched == after_fences == Timing(UINT64_MAX, UINT64_MAX)
    else:
        for t in (launched, after_fences):
            assert t.timeOnDevice != UINT64_MAX and t.timeOnDevice <= t.timeInDriver
        assert after_fences.timeInDriver <= launched.timeInDriver


def test_a_deadline_already_passed_or_unlimited(pm, kit, fds):
    r = kit.add_request()
    status, handle, cb = fenced(pm, r.request, deadline=OptionalTimePoint(time.monotonic_ns()))
    assert status == ErrorStatus.MISSED_DEADLINE_PERSISTENT and handle == NativeHandle() and cb is None
    assert not r.result().any()
    handle, cb = launch(pm, r.request, fds, deadline=OptionalTimePoint(UINT64_MAX))
    assert signalled(handle) and cb.getExecutionInfo()[0] == ErrorStatus.NONE


def test_a_deadline_that_passes_while_waiting_for_a_fence(pm, kit, fds, gate):
    r = kit.add_request()
    t0 = time.monotonic()
    handle, cb = launch(pm, r.request, fds, wait=[NativeHandle([gate])], measure=MeasureTiming.YES,
                        deadline=OptionalTimePoint(time.monotonic_ns() + 200_000_000))
    assert signalled(handle, 5) and time.monotonic() - t0 < 2.0  # the waiter noticed it, unsignalled gate
    assert state(handle) is FenceState.ERROR
    assert cb.getExecutionInfo() == (ErrorStatus.MISSED_DEADLINE_PERSISTENT, Timing(), Timing())
    assert not r.result().any()


@pytest.fixture(scope="module")
def slow_pm():
    """A WHILE loop that never ends: only a deadline, a duration or the loop timeout stops it."""
    case = load_file(CORPUS / "while_infinite_loop.json.gz")[0]
    cb = PreparedModelCallback()
    Device("numpy").prepareModel_1_3(build_model(case), ExecutionPreference.FAST_SINGLE_ANSWER, Priority.MEDIUM,
                                     OptionalTimePoint(), [], [], bytes(32), cb)
    status, prepared = cb.get(60)
    assert status == ErrorStatus.NONE
    return case, prepared


def test_the_duration_stops_a_long_while_loop(slow_pm, fds):
    case, pm = slow_pm
    t0 = time.monotonic()
    handle, cb = launch(pm, build_request(case).request, fds, duration=OptionalTimeoutDuration(200_000_000))
    assert signalled(handle, 10)
    assert time.monotonic() - t0 < 1.5  # the 200 ms duration, not the 2 s loop timeout, stopped it
    assert state(handle) is FenceState.ERROR and cb.getExecutionInfo()[0] in MISSED


def test_the_duration_counts_from_the_fences(pm, kit, fds, gate):
    r = kit.add_request()
    handle, cb = launch(pm, r.request, fds, wait=[NativeHandle([gate])], duration=OptionalTimeoutDuration(300_000_000))
    time.sleep(0.5)  # longer than the duration, but the fence has not signalled
    os.eventfd_write(gate, FENCE_SIGNALED)
    assert signalled(handle) and cb.getExecutionInfo()[0] == ErrorStatus.NONE
    np.testing.assert_array_equal(r.result(), kit.A + kit.B)


@pytest.fixture(scope="module", params=["numpy", *device_backends()])
def dev_pm(request, kit):
    dev = Device(request.param)
    cb = PreparedModelCallback()
    dev.prepareModel_1_3(as_model_1_3(kit.add_model()), ExecutionPreference.FAST_SINGLE_ANSWER, Priority.MEDIUM,
                         OptionalTimePoint(), [], [], bytes(32), cb)
    status, prepared = cb.get(60)
    assert status == ErrorStatus.NONE
    return dev, prepared


def test_a_chain_through_a_device_buffer(dev_pm, kit, fds, gate):
    """a + b into an IBuffer, then (IBuffer) + b into a pool, the second waiting on the first;
    the buffer is still uninitialized when the second is launched."""
    dev, pm = dev_pm
    n = kit.A.nbytes
    _, buf, token = dev.allocate(BufferDesc([]), [pm], [BufferRole(0, 0, 1.0)], [BufferRole(0, 0, 1.0)])
    inp, out = kit.add_request().inputs, allocate_shared(n)
    arg = lambda pool, off, size: RequestArgument(False, DataLocation(pool, off, size), [])  # noqa: E731
    pools = [MemoryPool(hidlMemory=inp), MemoryPool(token=token), MemoryPool(hidlMemory=out)]
    h1, cb1 = launch(pm, Request([arg(0, 0, n), arg(0, n, n)], [arg(1, 0, 0)], pools), fds,
                     wait=[NativeHandle([gate])])
    h2, cb2 = launch(pm, Request([arg(1, 0, 0), arg(0, n, n)], [arg(2, 0, n)], pools), fds, wait=[h1])
    os.eventfd_write(gate, FENCE_SIGNALED)
    assert signalled(h2)
    assert cb1.getExecutionInfo()[0] == cb2.getExecutionInfo()[0] == ErrorStatus.NONE
    np.testing.assert_array_equal(out.array(np.float32, 0, 6).reshape(kit.SHAPE), kit.A + 2 * kit.B)
    # Device memory rules (VTS MemoryDomainTests, fenced): a bad token or a buffer read and
    # written by one request is invalid; an uninitialized one fails the execution.
    for bad in (0, 100):
        bad_pools = [MemoryPool(hidlMemory=inp), MemoryPool(token=bad), MemoryPool(hidlMemory=out)]
        assert fenced(pm, Request([arg(1, 0, 0), arg(0, n, n)], [arg(2, 0, n)], bad_pools)) == REJECTED
    assert fenced(pm, Request([arg(1, 0, 0), arg(0, n, n)], [arg(1, 0, 0)], pools)) == REJECTED
    buf.invalidate()
    handle, cb = launch(pm, Request([arg(1, 0, 0), arg(0, n, n)], [arg(2, 0, n)], pools), fds)
    assert signalled(handle) and state(handle) is FenceState.ERROR
    assert cb.getExecutionInfo()[0] == ErrorStatus.GENERAL_FAILURE


def test_no_descriptor_leaks_after_many_executions(pm, kit, gate):
    r = kit.add_request()
    first = fenced(pm, r.request)[1]  # the waiter's own eventfd exists from the first wait on
    assert signalled(first)
    os.close(first.fds[0])
    gc.collect()  # pools of earlier tests close their fds now, not during the count
    before = open_fds()
    tails = []
    for _ in range(100):  # chains of two; the caller closes the first fence at once, the driver waits on its dup
        status, head, _ = fenced(pm, r.request, wait=[NativeHandle([gate])])
        assert status == ErrorStatus.NONE
        status, tail, _ = fenced(pm, r.request, wait=[head])
        assert status == ErrorStatus.NONE
        os.close(head.fds[0])
        tails.append(tail)
    os.eventfd_write(gate, FENCE_SIGNALED)
    for tail in tails:
        assert signalled(tail) and state(tail) is FenceState.SIGNALED
        os.close(tail.fds[0])
    deadline = time.monotonic() + 20
    while open_fds() - before and time.monotonic() < deadline:  # the last executions finishing
        time.sleep(0.05)
    assert not open_fds() - before


@pytest.mark.parametrize("status,expected", [(1, FenceState.SIGNALED), (0, FenceState.ACTIVE), (-22, FenceState.ERROR)])
def test_a_sync_file_state_comes_from_its_file_info(monkeypatch, status, expected):
    """No sw_sync here to make a real sync_file: the SYNC_IOC_FILE_INFO answer is simulated."""
    from nngpu.driver import fenced as module

    calls = []

    def ioctl(fd, request, arg):
        calls.append((fd, request, len(arg)))
        return module._SYNC_FILE_INFO.pack(b"fence", status, 0, 1, 0, 0)

    monkeypatch.setattr(module.fcntl, "ioctl", ioctl)
    assert fence_state(5, "sync_file") is expected
    assert calls == [(5, 0xC0383E04, 56)]  # linux/sync_file.h SYNC_IOC_FILE_INFO
