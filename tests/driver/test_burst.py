"""Bursts in one process on nngpu's driver: the controller and its slots, configureExecutionBurst
arguments, worker lifetime, fallback, and the CTS runner's burst path."""
import gc
import time

import numpy as np
import pytest

from nngpu.burst import DATUM_SIZE, BurstCallback, ExecutionBurstController, MessageQueue
from nngpu.driver.burst_executor import configure_burst
from nngpu.hal.types import (
    UINT64_MAX,
    DataLocation,
    ErrorStatus,
    MeasureTiming,
    OutputShape,
    Request,
    RequestArgument,
    Timing,
)

from ..burst.datum_codec import request_to_bytes, serialize_request

# ---- the controller, in process ----------------------------------------------------------------------
def test_compute_matches_execute_synchronously(add_prepared, kit):
    r = kit.add_request()
    with ExecutionBurstController.create(add_prepared) as burst:
        for measure in (MeasureTiming.NO, MeasureTiming.YES, MeasureTiming.NO):
            r.outputs.map()[:] = bytes(r.outputs.size)
            status, shapes, timing = burst.compute(r.request, measure)
            assert status == ErrorStatus.NONE
            assert shapes == [OutputShape([2, 3], True)]
            np.testing.assert_array_equal(r.result(), kit.A + kit.B)
            if measure == MeasureTiming.YES:
                assert timing.timeOnDevice <= timing.timeInDriver < UINT64_MAX
            else:
                assert timing == Timing()
    assert add_prepared.executeSynchronously(r.request, MeasureTiming.NO)[:2] == (status, shapes)


def test_slots_are_stable_fetched_once_and_freed(add_prepared, kit):
    with ExecutionBurstController.create(add_prepared) as burst:
        r1, r2 = kit.add_request(), kit.add_request(a=kit.B, b=kit.A)
        calls = []
        original = burst.callback.getMemories
        burst.callback.getMemories = lambda slots: calls.append(list(slots)) or original(slots)
        for _ in range(3):
            assert burst.compute(r1.request)[0] == ErrorStatus.NONE
        assert calls == [[0, 1]]  # both pools fetched in one call, once
        assert burst.compute(r2.request)[0] == ErrorStatus.NONE
        assert calls == [[0, 1], [2, 3]]
        cache = burst.context.executor
        assert len(cache) == 4 and len(burst.callback) == 4
        del r1
        gc.collect()
        assert burst.compute(r2.request)[0] == ErrorStatus.NONE  # frees the dead slots first
        assert len(cache) == 2 and len(burst.callback) == 2
        burst.forget(r2.inputs)
        assert len(cache) == 1
        assert burst.compute(r2.request)[0] == ErrorStatus.NONE  # a forgotten memory gets a new slot
        assert calls[-1] == [4]
        np.testing.assert_array_equal(r2.result(), kit.A + kit.B)


def test_errors_come_back_without_shapes_or_timing(add_prepared, kit):
    with ExecutionBurstController.create(add_prepared) as burst:
        r = kit.add_request()
        bad = Request(r.request.inputs, [RequestArgument(False, DataLocation(5, 0, 24), [])], r.request.pools)
        status, shapes, timing = burst.compute(bad, MeasureTiming.YES)
        assert status == ErrorStatus.INVALID_ARGUMENT and shapes == [] and timing == Timing()
        small = kit.add_request(out_capacity=8)
        status, shapes, timing = burst.compute(small.request, MeasureTiming.YES)
        assert status == ErrorStatus.OUTPUT_INSUFFICIENT_SIZE
        assert shapes == [OutputShape([2, 3], False)] and timing == Timing()
        assert burst.compute(r.request, 7)[0] == ErrorStatus.INVALID_ARGUMENT  # bad MeasureTiming
        assert burst.compute(Request([None], [], []))[0] == ErrorStatus.INVALID_ARGUMENT
        assert burst.compute(r.request)[0] == ErrorStatus.NONE  # still usable


def test_request_longer_than_the_queue_falls_back(add_prepared, kit):
    r = kit.add_request()
    with ExecutionBurstController.create(add_prepared, request_length=4) as burst:
        status, shapes, _ = burst.compute(r.request)
        assert status == ErrorStatus.NONE and shapes == [OutputShape([2, 3], True)]
        assert len(burst.context.executor) == 0  # nothing went through the FMQ


@pytest.mark.parametrize("blocking,spin", [(True, 0), (False, 50)])
def test_queue_modes(add_prepared, kit, blocking, spin):
    r = kit.add_request()
    with ExecutionBurstController.create(add_prepared, blocking=blocking, spin_us=spin) as burst:
        for _ in range(3):
            assert burst.compute(r.request)[0] == ErrorStatus.NONE


def test_in_process_compute_runs_on_the_calling_thread(add_prepared, kit):
    import threading

    r = kit.add_request()
    with ExecutionBurstController.create(add_prepared) as burst:
        threads = []
        original = burst.callback.getMemories
        burst.callback.getMemories = lambda slots: threads.append(threading.current_thread()) or original(slots)
        assert burst.compute(r.request)[0] == ErrorStatus.NONE
        assert threads == [threading.current_thread()]  # the packet was answered here, not by the worker
        np.testing.assert_array_equal(r.result(), kit.A + kit.B)


def test_in_process_compute_falls_back_to_a_busy_worker(add_prepared, kit):
    import threading

    r = kit.add_request()
    with ExecutionBurstController.create(add_prepared) as burst:
        serving = burst.context._serving
        serving.acquire()  # as if the worker were answering: serve_inline must not wait for it
        threading.Timer(0.1, serving.release).start()
        t0 = time.monotonic()
        assert burst.compute(r.request, MeasureTiming.YES)[:2] == (ErrorStatus.NONE, [OutputShape([2, 3], True)])
        assert 0.09 <= time.monotonic() - t0 < 5  # the worker, woken, answered once it was free
        assert burst.compute(r.request)[0] == ErrorStatus.NONE


@pytest.mark.parametrize("inline", [False, True])
def test_remembered_packets_are_forgotten_with_their_slots(add_prepared, kit, inline):
    burst = kit.RawBurst(add_prepared, inline=inline)
    try:
        r = kit.add_request()
        slots = [burst.callback.slot_of(p) for p in r.request.pools]
        datums = serialize_request(r.request, MeasureTiming.NO, slots)
        calls = []
        original = burst.callback.getMemories
        burst.callback.getMemories = lambda s: calls.append(list(s)) or original(s)
        for _ in range(3):  # the same bytes again: decoded and resolved once
            assert burst.send(datums)[0] == ErrorStatus.NONE
        assert calls == [slots]
        burst.context.freeMemory(slots[1])
        assert burst.send(datums)[0] == ErrorStatus.NONE  # not from a stale memory: fetched again
        assert calls == [slots, [slots[1]]]
        burst.callback.release(slots[0])  # the client no longer knows it: the repeat must fail
        burst.context.freeMemory(slots[0])
        assert burst.send(datums)[0] == ErrorStatus.INVALID_ARGUMENT
    finally:
        burst.close()


def test_a_result_queue_too_short_for_any_result_ends_the_burst(add_prepared, kit):
    with ExecutionBurstController.create(add_prepared, result_length=1) as burst:
        t0 = time.monotonic()
        assert burst.compute(kit.add_request().request)[0] == ErrorStatus.GENERAL_FAILURE
        assert time.monotonic() - t0 < 5 and burst.closed
    burst = kit.RawBurst(add_prepared, result_length=1)
    try:
        r = kit.add_request()
        datums = serialize_request(r.request, MeasureTiming.NO, [burst.callback.slot_of(p) for p in r.request.pools])
        assert burst.send_bytes(request_to_bytes(datums), timeout=5) is None
        assert _wait_until(lambda: not burst.context.running)
    finally:
        burst.close()


def test_configure_burst_arguments(add_prepared):
    q = lambda size=DATUM_SIZE: MessageQueue(size, 16)
    cb = BurstCallback()
    assert configure_burst(add_prepared, None, q(), q()) == (ErrorStatus.INVALID_ARGUMENT, None)
    assert configure_burst(add_prepared, cb, None, q()) == (ErrorStatus.INVALID_ARGUMENT, None)
    assert configure_burst(add_prepared, cb, q(), None) == (ErrorStatus.INVALID_ARGUMENT, None)
    assert configure_burst(add_prepared, cb, q(8), q()) == (ErrorStatus.INVALID_ARGUMENT, None)
    assert configure_burst(add_prepared, cb, "queue", q()) == (ErrorStatus.INVALID_ARGUMENT, None)
    closed = q()
    closed.shutdown()
    assert configure_burst(add_prepared, cb, closed, q()) == (ErrorStatus.INVALID_ARGUMENT, None)
    assert add_prepared.configureExecutionBurst(None, q(), q()) == (ErrorStatus.INVALID_ARGUMENT, None)
    status, ctx = add_prepared.configureExecutionBurst(cb, q(), q())
    assert status == ErrorStatus.NONE
    ctx.freeMemory(12345)  # unknown and double frees are harmless
    ctx.freeMemory(12345)
    ctx.freeMemory("junk")
    ctx.close()


def _wait_until(pred, timeout=5.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.01)
    return pred()


def test_closing_stops_the_worker_and_later_computes_fail(add_prepared, kit):
    burst = ExecutionBurstController.create(add_prepared)
    ctx = burst.context
    assert ctx.running
    burst.close()
    assert _wait_until(lambda: not ctx.running)
    assert burst.compute(kit.add_request().request)[0] == ErrorStatus.GENERAL_FAILURE
    burst.close()  # idempotent


def test_context_close_wakes_a_waiting_client(add_prepared, kit):
    burst = ExecutionBurstController.create(add_prepared)
    burst.context.close()  # the driver side goes away first
    t0 = time.monotonic()
    assert burst.compute(kit.add_request().request)[0] == ErrorStatus.GENERAL_FAILURE
    assert time.monotonic() - t0 < 5
    burst.close()


def test_a_dropped_controller_stops_its_worker(add_prepared):
    burst = ExecutionBurstController.create(add_prepared)
    ctx = burst.context
    del burst
    gc.collect()
    assert _wait_until(lambda: not ctx.running)


def test_cts_runner_burst_path(corpus_dir, device):
    from nngpu.json_models import load_cases
    from nngpu.cts.runner import run_case

    cases = [c for c in load_cases(corpus_dir, ("V1_0",)) if c.spec in ("add", "add_broadcast_quant8")]
    assert cases
    records = [r for c in cases for r in run_case(device, "numpy", c, ["sync", "burst"], MeasureTiming.YES)]
    by_path = {p: [r.result for r in records if r.path == p] for p in ("sync", "burst")}
    assert by_path["burst"] == by_path["sync"]
    assert "failed" not in by_path["burst"], [r.detail for r in records if r.result == "failed"]
