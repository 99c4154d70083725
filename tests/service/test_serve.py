"""nngpu.connect against a real `nngpu serve` process: the proxy answers like the in-process
Device (capabilities, supported operations, the same output bytes through every prepare and
execute path, bursts, device buffers), every callback is notified once, fenced executions take and give
fences as fds, and a service that goes away gives DEVICE_UNAVAILABLE."""
import ctypes
import gc
import os
import platform
import select
import signal
import time
from pathlib import Path

import numpy as np
import pytest

import nngpu
from nngpu.burst import ExecutionBurstController
from nngpu.driver.callbacks import ExecutionCallback, PreparedModelCallback
from nngpu.driver.fenced import FenceState, fence_state
from nngpu.driver.device import Device
from nngpu.hal.types import (BufferDesc, BufferRole, DataLocation, DeviceStatus, ErrorStatus, ExecutionPreference,
                             MeasureTiming, MemoryPool, Model, NativeHandle, OptionalTimeoutDuration,
                             OptionalTimePoint, OutputShape, Priority, Request, RequestArgument)
from nngpu.memory import allocate_shared
from nngpu.modelutil import as_model_1_3
from tests.driver.conftest import A, B, add_model, add_request
from tests.service.conftest import Served

WAIT_S = 60
PREF = ExecutionPreference.FAST_SINGLE_ANSWER


@pytest.fixture
def remote(served):
    with nngpu.connect(served.path) as device:
        yield device


@pytest.fixture(scope="module")
def local():
    return Device("numpy")


def _prepare(device, version: int, model=None):
    """(launch status, callback) of prepareModel of HAL `version`."""
    model = model or add_model()
    cb = PreparedModelCallback()
    if version == 10:
        status = device.prepareModel(model, cb)
    elif version == 11:
        status = device.prepareModel_1_1(model, PREF, cb)
    elif version == 12:
        status = device.prepareModel_1_2(model, PREF, [], [], bytes(32), cb)
    else:
        status = device.prepareModel_1_3(as_model_1_3(model), PREF, Priority.MEDIUM, OptionalTimePoint(), [], [],
                                         bytes(32), cb)
    assert cb.wait(WAIT_S)
    return status, cb


def _run(prepared, path: str, a: np.ndarray) -> tuple[ErrorStatus, list, bytes]:
    r = add_request(a=a)
    none, no_loop = OptionalTimePoint(), OptionalTimeoutDuration()
    if path == "sync":
        status, shapes, _t = prepared.executeSynchronously(r.request, MeasureTiming.NO)
    elif path == "sync_1_3":
        status, shapes, _t = prepared.executeSynchronously_1_3(r.request, MeasureTiming.YES, none, no_loop)
    else:
        cb = ExecutionCallback()
        if path == "async_1_0":
            launch = prepared.execute(r.request, cb)
        elif path == "async_1_2":
            launch = prepared.execute_1_2(r.request, MeasureTiming.NO, cb)
        else:
            launch = prepared.execute_1_3(r.request, MeasureTiming.NO, none, no_loop, cb)
        assert launch == ErrorStatus.NONE
        status, shapes, _t = cb.get(WAIT_S)
        assert cb.notify_count == 1
    return status, shapes, r.outputs.map()[: A.nbytes].tobytes()


def test_device_info_as_in_process(remote, local):
    for name in ("getCapabilities", "getCapabilities_1_1", "getCapabilities_1_2", "getCapabilities_1_3",
                 "getVersionString", "getType", "getSupportedExtensions", "getNumberOfCacheFilesNeeded"):
        assert getattr(remote, name)() == getattr(local, name)(), name
    assert remote.getStatus() == DeviceStatus.AVAILABLE
    model = add_model()
    for name in ("getSupportedOperations", "getSupportedOperations_1_1", "getSupportedOperations_1_2"):
        assert getattr(remote, name)(model) == getattr(local, name)(model) == (ErrorStatus.NONE, [True])
    assert remote.getSupportedOperations_1_3(as_model_1_3(model)) == local.getSupportedOperations_1_3(
        as_model_1_3(model))
    bad = Model(model.operands, model.operations, [0, 1], [9], model.operandValues, [])
    assert remote.getSupportedOperations(bad) == local.getSupportedOperations(bad)
    assert remote.getSupportedOperations(bad)[0] == ErrorStatus.INVALID_ARGUMENT


@pytest.mark.parametrize("version", [10, 11, 12, 13])
def test_every_prepare_and_execute_path_gives_the_in_process_bytes(remote, local, version):
    status, cb = _prepare(remote, version)
    assert status == cb.status == ErrorStatus.NONE and cb.notify_count == 1
    _s, here = _prepare(local, version)
    a = A * 3 - 1
    for path in ("sync", "sync_1_3", "async_1_0", "async_1_2", "async_1_3"):
        got, want = _run(cb.prepared_model, path, a), _run(here.prepared_model, path, a)
        assert got == want, path
        assert got[:2] == (ErrorStatus.NONE, [] if path == "async_1_0" else [OutputShape([2, 3], True)])
        np.testing.assert_array_equal(np.frombuffer(got[2], np.float32).reshape(A.shape), a + B)


def test_a_failed_execution_notifies_its_callback_once(remote):
    _s, cb = _prepare(remote, 13)
    r = add_request(out_capacity=8)  # an output too small
    ecb = ExecutionCallback()
    assert cb.prepared_model.execute_1_2(r.request, MeasureTiming.NO, ecb) == ErrorStatus.NONE
    assert ecb.get(WAIT_S)[0] == ErrorStatus.OUTPUT_INSUFFICIENT_SIZE and ecb.notify_count == 1
    assert cb.prepared_model.execute(r.request, None) == ErrorStatus.INVALID_ARGUMENT


def test_an_invalid_model_is_refused_at_launch_and_notified_once(remote, local):
    m = add_model()
    bad = Model(m.operands, m.operations, [0, 1], [9], m.operandValues, [])
    status, cb = _prepare(remote, 12, bad)
    assert (status, cb.status, cb.prepared_model) == (ErrorStatus.INVALID_ARGUMENT,) * 2 + (None,)
    assert cb.notify_count == 1
    assert _prepare(local, 12, bad)[0] == status
    assert remote.prepareModel(add_model(), None) == ErrorStatus.INVALID_ARGUMENT


def test_a_burst_through_the_proxy(remote):
    _s, cb = _prepare(remote, 12)
    r = add_request()
    with ExecutionBurstController.create(cb.prepared_model) as burst:
        status, shapes, _t = burst.compute(r.request, MeasureTiming.NO)
    assert (status, shapes) == (ErrorStatus.NONE, [OutputShape([2, 3], True)])
    np.testing.assert_array_equal(r.result(), A + B)


def _on_buffers(device, a: np.ndarray):
    """a + B computed with both operands and the result in device buffers of `device`: the
    status of each step, and the result copied out."""
    _s, cb = _prepare(device, 13)
    pm = cb.prepared_model
    steps = []
    bufs = []
    for role in ([BufferRole(0, 0, 1.0)], [], [BufferRole(0, 1, 1.0)]):
        inputs, outputs = (role, []) if role else ([], [BufferRole(0, 0, 1.0)])
        status, buf, token = device.allocate(BufferDesc([]), [pm], inputs, outputs)
        steps.append(status)
        bufs.append((buf, token))
    (a_buf, a_tok), (out_buf, out_tok), (b_buf, b_tok) = bufs
    for buf, value in ((a_buf, a), (b_buf, B)):
        src = allocate_shared(value.nbytes)
        src.map()[:] = value.tobytes()
        steps.append(buf.copyFrom(src, list(value.shape)))
    on_device = lambda pool: RequestArgument(False, DataLocation(pool, 0, 0), [])  # noqa: E731
    request = Request([on_device(0), on_device(1)], [on_device(2)],
                      [MemoryPool(token=a_tok), MemoryPool(token=b_tok), MemoryPool(token=out_tok)])
    steps.append(pm.executeSynchronously_1_3(request, MeasureTiming.NO, OptionalTimePoint(),
                                             OptionalTimeoutDuration())[0])
    dst = allocate_shared(A.nbytes)
    steps.append(out_buf.copyTo(dst))
    steps.append(out_buf.copyTo(allocate_shared(8)))  # the wrong size
    return steps, dst.map()[:].tobytes(), request, bufs, pm


def test_allocate_and_ibuffer_as_in_process(remote, local):
    a = A * 5
    got, want = _on_buffers(remote, a)[:2], _on_buffers(local, a)[:2]
    assert got == want
    assert got[0] == [ErrorStatus.NONE] * 7 + [ErrorStatus.INVALID_ARGUMENT]
    np.testing.assert_array_equal(np.frombuffer(got[1], np.float32).reshape(A.shape), a + B)
    _s, cb = _prepare(local, 13)
    assert remote.allocate(BufferDesc([]), [cb.prepared_model], [], [BufferRole(0, 0, 1.0)])[0] == \
        ErrorStatus.INVALID_ARGUMENT  # a model of another device


def test_one_client_cannot_reach_another_clients_buffers(remote, served):
    _steps, _out, request, _bufs, _pm = _on_buffers(remote, A)
    with nngpu.connect(served.path) as other:
        _s, cb = _prepare(other, 13)
        status = cb.prepared_model.executeSynchronously_1_3(request, MeasureTiming.NO, OptionalTimePoint(),
                                                            OptionalTimeoutDuration())[0]
        assert status == ErrorStatus.INVALID_ARGUMENT


def test_a_collected_buffer_is_freed_in_the_service(remote):
    steps, _out, request, bufs, pm = _on_buffers(remote, A)
    assert steps[5] == ErrorStatus.NONE  # the execution
    run = lambda: pm.executeSynchronously_1_3(request, MeasureTiming.NO, OptionalTimePoint(),  # noqa: E731
                                              OptionalTimeoutDuration())[0]
    assert run() == ErrorStatus.NONE
    del bufs[:]
    gc.collect()
    end = time.monotonic() + WAIT_S
    while run() == ErrorStatus.NONE and time.monotonic() < end:
        time.sleep(0.05)
    assert run() == ErrorStatus.INVALID_ARGUMENT


def _cache_files(device) -> tuple[list, list]:
    _s, n_model, n_data = device.getNumberOfCacheFilesNeeded()
    fds = [os.open("/dev/shm", os.O_RDWR | os.O_TMPFILE, 0o600) for _ in range(n_model + n_data)]
    handles = [NativeHandle([fd]) for fd in fds]
    return handles[:n_model], handles[n_model:]


def test_the_compilation_cache_travels_as_fds(remote):
    """A model prepared with cache files, then prepared again from them alone, in the service;
    the files are the client's (the service keeps none of their fds)."""
    model_cache, data_cache = _cache_files(remote)
    token = bytes(range(32))
    cb = PreparedModelCallback()
    assert remote.prepareModel_1_2(add_model(), PREF, model_cache, data_cache, token, cb) == ErrorStatus.NONE
    assert cb.get(WAIT_S)[0] == ErrorStatus.NONE
    assert all(os.fstat(h.fds[0]).st_size > 0 for h in model_cache + data_cache)  # written by the service
    for version in (12, 13):
        again = PreparedModelCallback()
        if version == 12:
            status = remote.prepareModelFromCache(model_cache, data_cache, token, again)
        else:
            status = remote.prepareModelFromCache_1_3(OptionalTimePoint(), model_cache, data_cache, token, again)
        assert status == again.get(WAIT_S)[0] == ErrorStatus.NONE and again.notify_count == 1
        a = A - 7
        assert _run(again.prepared_model, "sync", a)[2] == (a + B).tobytes()
    wrong = PreparedModelCallback()
    assert remote.prepareModelFromCache(model_cache, data_cache, bytes(32), wrong) == ErrorStatus.GENERAL_FAILURE
    assert wrong.get(0) == (ErrorStatus.GENERAL_FAILURE, None)  # another token: not this model's files
    assert remote.prepareModelFromCache([NativeHandle(["x"])], [], token, wrong) == ErrorStatus.INVALID_ARGUMENT
    for h in model_cache + data_cache:
        os.close(h.fds[0])


def _fenced(prepared, a: np.ndarray, wait=()):
    r = add_request(a=a)
    status, fence, cb = prepared.executeFenced(r.request, list(wait), MeasureTiming.YES, OptionalTimePoint(),
                                               OptionalTimeoutDuration(), OptionalTimeoutDuration())
    return status, fence, cb, r


def _signalled(fence: NativeHandle, timeout_s: float) -> bool:
    p = select.poll()
    p.register(fence.fds[0], select.POLLIN)
    return bool(p.poll(timeout_s * 1000))


def _fenced_round(pm, a: np.ndarray) -> None:
    """One fenced execution waiting for a fence signalled later, one with none to wait for."""
    gate = os.eventfd(0, os.EFD_CLOEXEC)
    status, fence, cb, r = _fenced(pm, a, [NativeHandle([gate])])
    assert status == ErrorStatus.NONE and len(fence.fds) == 1
    assert not _signalled(fence, 0.2) and not r.result().any()  # waits for its fence
    os.eventfd_write(gate, 1)
    assert _signalled(fence, WAIT_S)
    np.testing.assert_array_equal(r.result(), a + B)
    info = cb.getExecutionInfo()
    assert info[0] == ErrorStatus.NONE and all(t.timeInDriver > 0 for t in info[1:])
    for fd in (gate, fence.fds[0]):
        os.close(fd)
    status, fence, cb, r = _fenced(pm, a)
    assert status == ErrorStatus.NONE and _signalled(fence, WAIT_S) and cb.getExecutionInfo()[0] == ErrorStatus.NONE
    np.testing.assert_array_equal(r.result(), a + B)
    os.close(fence.fds[0])


def test_fenced_executions_with_fences_in_and_out(remote, local, served):
    pm = _prepare(remote, 13)[1].prepared_model
    here = _prepare(local, 13)[1].prepared_model
    service_fds = lambda: len(os.listdir(f"/proc/{served.proc.pid}/fd"))  # noqa: E731
    _fenced_round(pm, A)  # the first: the fence waiter and the workers start, each holding what it holds
    gc.collect()
    time.sleep(0.5)
    before = service_fds()
    for k in range(1, 4):
        _fenced_round(pm, A + k)
    with open("/dev/null", "rb") as not_a_fence:  # refused, as in process
        bad = [NativeHandle([not_a_fence.fileno()])]
        assert _fenced(pm, A, bad)[0] == _fenced(here, A, bad)[0] == ErrorStatus.INVALID_ARGUMENT
    gc.collect()
    end = time.monotonic() + WAIT_S  # the service closed every fence it sent and forgot the callbacks
    while service_fds() > before and time.monotonic() < end:
        time.sleep(0.05)
    assert service_fds() <= before


def test_a_service_gone_is_device_unavailable(served):
    device = nngpu.connect(served.path)
    _s, cb = _prepare(device, 12)
    os.kill(served.proc.pid, signal.SIGKILL)
    served.proc.wait(WAIT_S)
    status, late = _prepare(device, 12)
    assert status == late.status == ErrorStatus.DEVICE_UNAVAILABLE and late.notify_count == 1
    assert device.getCapabilities()[0] == ErrorStatus.DEVICE_UNAVAILABLE
    assert device.getStatus() == DeviceStatus.OFFLINE
    ecb = ExecutionCallback()
    assert cb.prepared_model.execute_1_2(add_request().request, MeasureTiming.NO, ecb) == \
        ErrorStatus.DEVICE_UNAVAILABLE
    assert ecb.get(0)[0] == ErrorStatus.DEVICE_UNAVAILABLE and ecb.notify_count == 1
    device.close()


def test_connect_where_nothing_listens(short_dir):
    with pytest.raises(FileNotFoundError):
        nngpu.connect(short_dir / "none.sock")


def test_a_pending_fence_is_put_in_error_when_the_service_dies(remote, served):
    _s, cb = _prepare(remote, 13)
    gate = os.eventfd(0, os.EFD_CLOEXEC)  # never signalled: the execution stays pending
    status, fence, fenced_cb, _r = _fenced(cb.prepared_model, A, [NativeHandle([gate])])
    assert status == ErrorStatus.NONE and not _signalled(fence, 0.2)
    served.stop(signal.SIGKILL)
    assert _signalled(fence, 10)  # not a wait until the caller's own timeout
    assert fence_state(fence.fds[0], "eventfd") == FenceState.ERROR
    assert fenced_cb.getExecutionInfo()[0] == ErrorStatus.DEVICE_UNAVAILABLE
    for fd in (gate, fence.fds[0]):
        os.close(fd)


def test_a_stopped_service_costs_a_synchronous_execution_only_its_deadline(remote, served):
    """SIGSTOP: the reply never comes; the call returns DEVICE_UNAVAILABLE at the deadline plus
    DEADLINE_GRACE_S, not at the wire's 120 s."""
    from nngpu.service.remote_calls import DEADLINE_GRACE_S

    _status, cb = _prepare(remote, 13)
    prepared, r = cb.prepared_model, add_request()
    os.kill(served.proc.pid, signal.SIGSTOP)
    try:
        start = time.monotonic()
        status, _shapes, _timing = prepared.executeSynchronously_1_3(
            r.request, MeasureTiming.NO, OptionalTimePoint(time.monotonic_ns() + 1_000_000_000),
            OptionalTimeoutDuration())
        took = time.monotonic() - start
    finally:
        os.kill(served.proc.pid, signal.SIGCONT)
    assert status == ErrorStatus.DEVICE_UNAVAILABLE
    assert 1.0 <= took < 1.0 + DEADLINE_GRACE_S + 1.0


_TGKILL = {"x86_64": 234, "aarch64": 131}.get(platform.machine())   # the syscall's number


def _unblocking_threads(pid: int) -> list[int]:
    """The threads of `pid` other than its main one that do not block SIGTERM."""
    bit = 1 << (signal.SIGTERM - 1)
    found = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            status = (task / "status").read_text()
        except OSError:          # a thread that has just ended
            continue
        blocked = next(line for line in status.splitlines() if line.startswith("SigBlk:"))
        if int(task.name) != pid and not int(blocked.split()[1], 16) & bit:
            found.append(int(task.name))
    return found


@pytest.mark.skipif(_TGKILL is None, reason="tgkill's number is known for x86_64 and aarch64 only")
def test_sigterm_taken_by_another_thread_stops_the_service(short_dir):
    """The kernel gives a process's SIGTERM to any thread that does not block it, a library's
    (OpenBLAS's) included, and Python runs the handler on the main thread only, which accept()
    held asleep until a client came. SIGTERM sent to such a thread (tgkill) now stops the
    service at once."""
    served = Served(short_dir / "s.sock")
    with nngpu.connect(served.path) as device:
        assert device.getVersionString()[0] == ErrorStatus.NONE
    try:
        others = _unblocking_threads(served.proc.pid)
        if not others:
            pytest.skip("every thread of the service but the main one blocks SIGTERM")
        start = time.monotonic()
        assert ctypes.CDLL(None, use_errno=True).syscall(_TGKILL, served.proc.pid, others[0], signal.SIGTERM) == 0
        assert served.proc.wait(10) == 0    # Served.stop would send another, to the process
        assert time.monotonic() - start < 5.0
    finally:
        if served.proc.poll() is None:
            served.proc.kill()
            served.proc.wait()
