"""A burst's device-side slot cache: on a device plan each slot's memory is registered with the
backend once, inputs and outputs move between that registration and the plan's buffers on the
device (no host upload or download), nothing outside the caller's output regions is written,
freeing a slot releases its registration, and executions of the same memory share it (an AIDL
burst's tokens)."""
import gc
import os
import select

import numpy as np
import pytest

from nngpu import backends
from nngpu.backends import device_backends
from nngpu.backends.base import DeviceValue
from nngpu.burst import ExecutionBurstController
from nngpu.driver import burst_executor
from nngpu.driver.device import Device
from nngpu.hal.types import (DataLocation, ErrorStatus, MeasureTiming, MemoryPool, OptionalTimeoutDuration,
                             OptionalTimePoint, OutputShape, Request, RequestArgument)
from nngpu.memory import allocate_shared

from .test_buffer import _count_transfers

SENTINEL = 0xA5
BACKENDS = device_backends()


@pytest.fixture(scope="module", params=BACKENDS)  # none here: those tests are skipped
def dev(request):
    return Device(request.param)


@pytest.fixture(scope="module")
def plan_add(dev, kit):
    return kit.prepare(dev, kit.add_model())


EXTRA = ("register_host", "release_host", "synchronize")  # counted beside the transfers (a wait too)


def count_calls(dev, monkeypatch) -> dict:
    """The backend's host transfers, device copies and host registrations, by method (of its
    class: the plans' own queues included)."""
    counted = _count_transfers(dev, monkeypatch)
    cls = type(dev.backend)
    for name in (n for n in EXTRA if hasattr(cls, n)):
        real = getattr(cls, name)

        def wrapper(self, *args, _real=real, _name=name):
            counted[_name] = counted.get(_name, 0) + 1
            return _real(self, *args)

        monkeypatch.setattr(cls, name, wrapper)
    return counted


@pytest.fixture
def counts(dev, monkeypatch):
    return count_calls(dev, monkeypatch)


def _odd_request(kit, a, b, out_pool_size=200, out_offset=52):
    """Inputs at unaligned offsets (4 and 4 + 24 bytes) of one pool, the output in the middle of a
    larger pool filled with SENTINEL."""
    inp = allocate_shared(4 + a.nbytes + b.nbytes + 12)
    inp.map()[4:4 + a.nbytes] = a.tobytes()
    inp.map()[4 + a.nbytes:4 + a.nbytes + b.nbytes] = b.tobytes()
    out = allocate_shared(out_pool_size)
    out.map()[:] = bytes([SENTINEL]) * out_pool_size
    request = Request([RequestArgument(False, DataLocation(0, 4, a.nbytes), []),
                       RequestArgument(False, DataLocation(0, 4 + a.nbytes, b.nbytes), [])],
                      [RequestArgument(False, DataLocation(1, out_offset, a.nbytes), [])], [inp, out])
    return request, inp, out


def _untouched_outside(out, offset, length) -> bool:
    raw = np.frombuffer(out.map(), np.uint8)
    return bool((raw[:offset] == SENTINEL).all() and (raw[offset + length:] == SENTINEL).all())


def test_hot_burst_moves_no_data_through_the_host(plan_add, counts, kit):
    a, b = kit.A, kit.B
    request, inp, out = _odd_request(kit, a, b)
    with ExecutionBurstController.create(plan_add) as burst:
        assert burst.compute(request)[:2] == (ErrorStatus.NONE, [OutputShape([2, 3], True)])
        assert counts.pop("register_host") == 2  # each slot once
        for k in range(3):
            new_a = a + k  # the client rewrites its pool between computes: the device sees it
            inp.map()[4:4 + a.nbytes] = new_a.tobytes()
            counts.clear()
            assert burst.compute(request, MeasureTiming.YES)[0] == ErrorStatus.NONE
            assert counts == {"copy": 3, "synchronize": 1}  # two inputs in, one output out, one wait
            np.testing.assert_array_equal(out.array(np.float32, 52, a.size).reshape(a.shape), new_a + b)
            assert _untouched_outside(out, 52, a.nbytes)
    assert counts.get("release_host") == 2  # closing the burst released both registrations


def test_every_execution_registers_each_memory_once(plan_add, counts, kit):
    """Synchronous, asynchronous and fenced executions go through the device's registrations
    too (driver/pool_registry.py): each memory is registered at its first execution, inputs and
    outputs then move device-side; a memory's registration is released once the memory is gone,
    at the next execution."""
    from nngpu.driver.callbacks import ExecutionCallback
    from nngpu.hal.types import OptionalTimeoutDuration, OptionalTimePoint

    a, b = kit.A, kit.B
    request, inp, out = _odd_request(kit, a, b)
    runs = [lambda: plan_add.executeSynchronously(request, MeasureTiming.NO)[0],
            lambda: plan_add.executeSynchronously_1_3(request, MeasureTiming.YES, OptionalTimePoint(),
                                                      OptionalTimeoutDuration())[0]]

    def run_async():
        cb = ExecutionCallback()
        assert plan_add.execute_1_3(request, MeasureTiming.NO, OptionalTimePoint(), OptionalTimeoutDuration(),
                                    cb) == ErrorStatus.NONE
        return cb.get(30)[0]

    def run_fenced():
        status, fence, callback = plan_add.executeFenced(request, [], MeasureTiming.NO, OptionalTimePoint(),
                                                         OptionalTimeoutDuration(), OptionalTimeoutDuration())
        assert status == ErrorStatus.NONE and select.select(fence.fds, [], [], 30)[0]   # signalled
        os.close(fence.fds[0])
        return callback.getExecutionInfo()[0]
    for k, execute in enumerate([*runs, run_async, run_fenced]):
        inp.map()[4:4 + a.nbytes] = (a + k).tobytes()
        assert execute() == ErrorStatus.NONE
        assert counts.pop("copy") == 3 and counts.pop("register_host", 0) == (2 if k == 0 else 0)
        assert counts.pop("synchronize") == 1 and not counts           # one wait per execution
        np.testing.assert_array_equal(out.array(np.float32, 52, a.size).reshape(a.shape), a + k + b)
        assert _untouched_outside(out, 52, a.nbytes)
    del request, inp, out
    gc.collect()
    request, _, out = _odd_request(kit, a, b)
    assert plan_add.executeSynchronously(request, MeasureTiming.NO)[0] == ErrorStatus.NONE
    assert counts.get("release_host") == 2 and counts.get("register_host") == 2


def test_too_small_output_region_writes_nothing(plan_add, counts, kit):
    request, _, out = _odd_request(kit, kit.A, kit.B)
    small = Request(request.inputs, [RequestArgument(False, DataLocation(1, 52, 8), [])], request.pools)
    with ExecutionBurstController.create(plan_add) as burst:
        for _ in range(2):
            status, shapes, _ = burst.compute(small)
            assert status == ErrorStatus.OUTPUT_INSUFFICIENT_SIZE and shapes == [OutputShape([2, 3], False)]
            assert _untouched_outside(out, 0, 0)  # not even the 8 bytes given
        assert burst.compute(request)[0] == ErrorStatus.NONE  # the same slots, now big enough
    np.testing.assert_array_equal(out.array(np.float32, 52, kit.A.size).reshape(kit.A.shape), kit.A + kit.B)


def test_unknown_output_shape_is_found_and_fits(dev, counts, kit):
    """Output dimensions unknown until run: the value still goes device-side once it fits."""
    model = kit.add_model()
    model.operands[3].dimensions = [0, 0]
    prepared = kit.prepare(dev, model)
    request, _, out = _odd_request(kit, kit.A, kit.B)
    with ExecutionBurstController.create(prepared) as burst:
        assert burst.compute(request)[:2] == (ErrorStatus.NONE, [OutputShape([2, 3], True)])
    np.testing.assert_array_equal(out.array(np.float32, 52, kit.A.size).reshape(kit.A.shape), kit.A + kit.B)
    assert _untouched_outside(out, 52, kit.A.nbytes)


def test_freeing_a_slot_releases_its_registration(plan_add, counts, kit):
    with ExecutionBurstController.create(plan_add) as burst:
        r1, r2 = kit.add_request(), kit.add_request(a=kit.B, b=kit.A)
        assert burst.compute(r1.request)[0] == ErrorStatus.NONE
        assert burst.compute(r2.request)[0] == ErrorStatus.NONE
        assert counts.pop("register_host") == 4 and "release_host" not in counts
        burst.forget(r2.inputs)  # freeMemory
        assert counts.pop("release_host") == 1
        del r1
        gc.collect()
        assert burst.compute(r2.request)[0] == ErrorStatus.NONE  # frees r1's two dead slots first
        assert counts.pop("release_host") == 2 and counts.pop("register_host") == 1  # r2's inputs again
        np.testing.assert_array_equal(r2.result(), kit.A + kit.B)
    assert counts.pop("release_host") == 2


def test_executions_and_a_token_burst_share_a_memory_s_registration(plan_add, counts, kit):
    """A memory is registered once, whoever uses it (CUDA page-locks pages only once: a second
    registration of the client's own memory would fail and send the burst through the host): an
    AIDL burst's token takes the registration executions made, an execution the one a token made,
    and releasing a token leaves a registration an execution used until its memory is gone. (A
    1.2 burst's slots are the driver's own mappings of the client's files: registered apart.)"""
    a, b = kit.A, kit.B

    def run(burst, req: Request, tokens: list[int]) -> ErrorStatus:
        pools = [MemoryPool(hidlMemory=m) for m in req.pools]   # tokens name 1.3 pools
        return burst.run(Request(req.inputs, req.outputs, pools), tokens, MeasureTiming.NO, OptionalTimePoint(),
                         OptionalTimeoutDuration()).status

    request, inp, out = _odd_request(kit, a, b)
    assert plan_add.executeSynchronously(request, MeasureTiming.NO)[0] == ErrorStatus.NONE
    assert counts.pop("register_host") == 2
    burst = plan_add.token_burst()
    for k in range(2):
        inp.map()[4:4 + a.nbytes] = (a + k).tobytes()
        counts.clear()
        assert run(burst, request, [7, 8]) == ErrorStatus.NONE
        assert counts == {"copy": 3, "synchronize": 1}   # the executions' registrations, in place
        np.testing.assert_array_equal(out.array(np.float32, 52, a.size).reshape(a.shape), a + k + b)
    burst.release(7)
    r = kit.add_request()
    counts.clear()
    assert run(burst, r.request, [1, 2]) == ErrorStatus.NONE
    assert counts.pop("register_host") == 2
    assert plan_add.executeSynchronously(r.request, MeasureTiming.NO)[0] == ErrorStatus.NONE
    assert "register_host" not in counts
    np.testing.assert_array_equal(r.result(), a + b)
    burst.close()
    assert "release_host" not in counts   # every memory here is alive, and an execution used it
    del request, inp, out, r
    gc.collect()
    assert plan_add.executeSynchronously(kit.add_request().request, MeasureTiming.NO)[0] == ErrorStatus.NONE
    assert counts.pop("release_host") == 4 and counts.pop("register_host") == 2


def test_reference_executor_registers_nothing(add_prepared, kit):
    r = kit.add_request()
    with ExecutionBurstController.create(add_prepared) as burst:
        assert burst.compute(r.request)[0] == ErrorStatus.NONE
        assert len(burst.context.executor) == 2
        assert all(burst.context.executor.registration(s) is None for s in range(2))


def test_a_repeated_packet_is_checked_once(add_prepared, kit, monkeypatch):
    checks = []
    real = burst_executor.check
    monkeypatch.setattr(burst_executor, "check", lambda *a, **k: checks.append(1) or real(*a, **k))
    r = kit.add_request()
    with ExecutionBurstController.create(add_prepared) as burst:
        for k in range(3):
            r.inputs.map()[: kit.A.nbytes] = (kit.A * k).tobytes()
            assert burst.compute(r.request)[0] == ErrorStatus.NONE
            np.testing.assert_array_equal(r.result(), kit.A * k + kit.B)
        assert len(checks) == 1
        small = kit.add_request(out_capacity=8)
        for _ in range(2):  # a failed check fails its repeats alike
            assert burst.compute(small.request)[0] == ErrorStatus.OUTPUT_INSUFFICIENT_SIZE
        bad = Request(r.request.inputs, [RequestArgument(False, DataLocation(5, 0, 24), [])], r.request.pools)
        for _ in range(2):
            assert burst.compute(bad)[0] == ErrorStatus.INVALID_ARGUMENT
        assert len(checks) == 3


@pytest.mark.parametrize("name", ["numpy", *BACKENDS])
def test_registered_memory_copies_at_offsets_and_reads_to_host(name):
    """The backend half: device copies in and out of a registration at unaligned offsets, and a
    region's to_host (a host step reading a registered input)."""
    host = np.arange(64, dtype=np.uint8)
    backend = backends.create(name)
    handle = backend.register_host(host)
    try:
        scratch = backend.alloc(16)
        backend.copy(scratch, handle, 10, 0, 3)
        backend.copy(handle, scratch, 10, 41, 0)
        backend.synchronize()
        np.testing.assert_array_equal(host[41:51], np.arange(3, 13))
        assert host[40] == 40 and host[51] == 51
        region = DeviceValue(handle, (2, 2), np.dtype(np.int16), backend, 5)
        np.testing.assert_array_equal(region.to_host(), host[5:13].view(np.int16).reshape(2, 2))
    finally:
        backend.release_host(handle)
