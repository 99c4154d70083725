"""Bursts in one process: packet serialization and layout, the controller and its slots,
configureExecutionBurst arguments, worker lifetime, fallback, and the CTS runner's burst path."""
import gc
import struct
import time

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from nngpu.burst import BurstError, ExecutionBurstController
from nngpu.burst_serialization import (
    DATUM_SIZE,
    PacketError,
    decode_request,
    decode_result,
    deserialize_request,
    deserialize_result,
    encode_request,
    encode_result,
    request_from_bytes,
    request_to_bytes,
    result_from_bytes,
    result_to_bytes,
    serialize_request,
    serialize_result,
)
from nngpu.driver.burst_server import configure_burst
from nngpu.fmq import MessageQueue
from nngpu.hal.types import (
    UINT64_MAX,
    DataLocation,
    ErrorStatus,
    FmqRequestDatumKind as RK,
    FmqResultDatumKind as SK,
    MeasureTiming,
    OutputShape,
    Request,
    RequestArgument,
    Timing,
)


# ---- serialization ---------------------------------------------------------------------------------
u32 = st.integers(0, 2**32 - 1)
args = st.builds(lambda nv, loc, dims: RequestArgument(nv, DataLocation(*loc), [] if nv else dims),
                 st.booleans(), st.tuples(u32, u32, u32), st.lists(u32, max_size=5))


@settings(max_examples=60, deadline=None)
@given(st.lists(args, max_size=4), st.lists(args, max_size=4), st.lists(st.integers(0, 2**31 - 1), max_size=4),
       st.sampled_from(list(MeasureTiming)))
def test_request_round_trip(inputs, outputs, slots, measure):
    request = Request(inputs, outputs, [object()] * len(slots))
    datums = serialize_request(request, measure, slots)
    raw = request_to_bytes(datums)
    assert len(raw) == DATUM_SIZE * len(datums) == DATUM_SIZE * datums[0].value.packetSize
    back = deserialize_request(request_from_bytes(raw))
    for got, want in zip(back.inputs + back.outputs, inputs + outputs):
        assert got.hasNoValue == want.hasNoValue and got.dimensions == want.dimensions
        if not want.hasNoValue:
            assert got.location == want.location
    assert back.slots == slots and back.measure == measure


def test_request_datum_order_is_the_specs():
    request = Request([RequestArgument(False, DataLocation(0, 0, 24), [2, 3])],
                      [RequestArgument(True), RequestArgument(False, DataLocation(1, 0, 8), [2])], [1, 2])
    kinds = [d.kind for d in serialize_request(request, MeasureTiming.YES, [4, 9])]
    assert kinds == [RK.packetInformation, RK.inputOperandInformation, RK.inputOperandDimensionValue,
                     RK.inputOperandDimensionValue, RK.outputOperandInformation, RK.outputOperandInformation,
                     RK.outputOperandDimensionValue, RK.poolIdentifier, RK.poolIdentifier, RK.measureTiming]


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(list(ErrorStatus)), st.lists(st.tuples(st.lists(u32, max_size=6), st.booleans()), max_size=4),
       st.integers(0, UINT64_MAX), st.integers(0, UINT64_MAX))
def test_result_round_trip(status, shapes, on_device, in_driver):
    shapes = [OutputShape(d, s) for d, s in shapes]
    raw = result_to_bytes(serialize_result(status, shapes, Timing(on_device, in_driver)))
    assert deserialize_result(result_from_bytes(raw)) == (status, shapes, Timing(on_device, in_driver))


def test_result_layout_and_zero_padding():
    raw = result_to_bytes(serialize_result(ErrorStatus.OUTPUT_INSUFFICIENT_SIZE, [OutputShape([7], False),
                                                                                  OutputShape([], True)], Timing(5, 6)))
    rows = [raw[i:i + DATUM_SIZE] for i in range(0, len(raw), DATUM_SIZE)]
    assert struct.unpack_from("<IIIiI", rows[0]) == (SK.packetInformation, 0, 5, 3, 2)
    info = rows[1]
    assert struct.unpack_from("<I", info)[0] == SK.operandInformation
    assert info[8] == 0 and info[9:12] == b"\0\0\0"  # the bool, then 3 padding bytes that must be 0
    assert struct.unpack_from("<I", info, 12)[0] == 1 and info[16:] == bytes(8)
    assert rows[3][8] == 1 and rows[3][9:12] == b"\0\0\0"
    assert struct.unpack_from("<IIQQ", rows[4]) == (SK.executionTiming, 0, 5, 6)


def test_request_layout():
    request = Request([RequestArgument(True)], [], [None])
    raw = request_to_bytes(serialize_request(request, MeasureTiming.NO, [3]))
    assert struct.unpack_from("<5I", raw, 0) == (RK.packetInformation, 4, 1, 0, 1)
    assert raw[DATUM_SIZE:DATUM_SIZE + 8] == struct.pack("<IB3x", RK.inputOperandInformation, 1)
    assert struct.unpack_from("<Ii", raw, 2 * DATUM_SIZE) == (RK.poolIdentifier, 3)
    assert raw[2 * DATUM_SIZE + 8:3 * DATUM_SIZE] == bytes(16)


def _valid_request_bytes() -> bytes:
    req = Request([RequestArgument(False, DataLocation(0, 0, 24), [2, 3])], [], [None])
    return request_to_bytes(serialize_request(req, MeasureTiming.NO, [0]))


@pytest.mark.parametrize("mutate", [
    lambda b: b[:-1],                                                   # a partial datum
    lambda b: b"",                                                      # nothing
    lambda b: struct.pack("<I", 9) + b[4:],                             # unknown kind
    lambda b: b[:DATUM_SIZE + 4] + b"\2" + b[DATUM_SIZE + 5:],           # hasNoValue = 2
    lambda b: b[:4] + struct.pack("<I", 9) + b[8:],                      # packetSize wrong
    lambda b: b[:-DATUM_SIZE + 4] + struct.pack("<i", 7) + b[-DATUM_SIZE + 8:],  # bad MeasureTiming
    lambda b: b[DATUM_SIZE:],                                           # no packetInformation
])
def test_request_deserialization_rejects(mutate):
    deserialize_request(request_from_bytes(_valid_request_bytes()))
    with pytest.raises(PacketError):
        deserialize_request(request_from_bytes(mutate(_valid_request_bytes())))


def test_result_deserialization_rejects():
    good = result_to_bytes(serialize_result(ErrorStatus.NONE, [OutputShape([1])], Timing()))
    for bad in (good[:-DATUM_SIZE], good[DATUM_SIZE:], good[:4] + struct.pack("<II", 0, 5) + good[12:],
                good[:12] + struct.pack("<i", 99) + good[16:]):
        with pytest.raises(PacketError):
            deserialize_result(result_from_bytes(bad))


def test_serialization_rejects_values_that_do_not_fit():
    with pytest.raises(PacketError):
        request_to_bytes(serialize_request(Request([RequestArgument(False, DataLocation(0, 0, 2**32), [])], [], []),
                                           MeasureTiming.NO, []))


# ---- the whole-packet codecs agree with the datum route --------------------------------------------
def _verdict(decode, raw):
    try:
        return "ok", decode(raw)
    except PacketError:
        return ("rejected",)


word = st.one_of(st.integers(0, 8), st.sampled_from([255, 256, 257, 2**31 - 1, 2**31, 2**32 - 1]),
                 st.integers(0, 2**32 - 1))
rows = st.lists(st.tuples(st.integers(0, 7), word, word, word, word, word), max_size=16)


def _packet(rows_, size_at: int | None) -> bytes:
    if rows_ and rows_[0][0] == 0 and size_at is not None:  # often right, to get past the first check
        rows_[0] = rows_[0][:size_at] + (len(rows_),) + rows_[0][size_at + 1:]
    return b"".join(struct.pack("<6I", *r) for r in rows_)


@settings(max_examples=400, deadline=None)
@given(rows, st.booleans())
def test_fast_request_decoding_has_the_same_verdicts(rows_, fix):
    raw = _packet(rows_, 1 if fix else None)
    assert _verdict(decode_request, raw) == _verdict(lambda b: deserialize_request(request_from_bytes(b)), raw)


@settings(max_examples=400, deadline=None)
@given(rows, st.booleans())
def test_fast_result_decoding_has_the_same_verdicts(rows_, fix):
    raw = _packet(rows_, 2 if fix else None)
    assert _verdict(decode_result, raw) == _verdict(lambda b: deserialize_result(result_from_bytes(b)), raw)


@settings(max_examples=100, deadline=None)
@given(st.lists(args, max_size=4), st.lists(args, max_size=4), st.lists(st.integers(0, 2**31 - 1), max_size=4),
       st.sampled_from(list(MeasureTiming)))
def test_fast_request_encoding_is_the_datum_route(inputs, outputs, slots, measure):
    request = Request(inputs, outputs, [None] * len(slots))
    raw = encode_request(request, measure, slots)
    assert raw == request_to_bytes(serialize_request(request, measure, slots))
    assert decode_request(raw) == deserialize_request(request_from_bytes(raw))


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(list(ErrorStatus)), st.lists(st.tuples(st.lists(u32, max_size=6), st.booleans()), max_size=4),
       st.integers(0, UINT64_MAX), st.integers(0, UINT64_MAX))
def test_fast_result_encoding_is_the_datum_route(status, shapes, on_device, in_driver):
    shapes = [OutputShape(d, s) for d, s in shapes]
    raw = encode_result(status, shapes, Timing(on_device, in_driver))
    assert raw == result_to_bytes(serialize_result(status, shapes, Timing(on_device, in_driver)))
    assert decode_result(raw) == (status, shapes, Timing(on_device, in_driver))


def test_fast_encoders_fall_back_on_odd_values():
    loc = lambda n: RequestArgument(False, DataLocation(0, 0, n), [])
    with pytest.raises(PacketError):
        encode_request(Request([loc(2**32)], [], []), MeasureTiming.NO, [])
    with pytest.raises(PacketError):
        encode_request(Request([], [], [None]), MeasureTiming.NO, [2**31])
    assert encode_request(Request([loc(4.0)], [], []), MeasureTiming.NO, [-1]) == \
        request_to_bytes(serialize_request(Request([loc(4)], [], []), MeasureTiming.NO, [-1]))
    with pytest.raises(PacketError):
        encode_result(ErrorStatus.NONE, [], Timing(-1, 0))
    with pytest.raises(PacketError):
        encode_result(ErrorStatus.NONE, [OutputShape([2**32])], Timing())


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
        cache = burst.context.slots
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
        assert len(burst.context.slots) == 0  # nothing went through the FMQ


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
    from nngpu.burst import BurstCallback

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


def test_create_raises_when_configure_fails():
    class Refuses:
        def configureExecutionBurst(self, *args):
            return ErrorStatus.DEVICE_UNAVAILABLE, None

    with pytest.raises(BurstError) as e:
        ExecutionBurstController.create(Refuses())
    assert e.value.status == ErrorStatus.DEVICE_UNAVAILABLE


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
