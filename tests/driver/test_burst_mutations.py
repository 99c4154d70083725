"""The VTS burst validation (ValidateBurst.cpp): every datum of a valid request packet removed,
a bad datum inserted at every position, every datum replaced by a bad one — each must get an
error result with no output shapes and no timing, and the burst must stay usable. Plus a result
FMQ too short for the result, and random datums / garbage bytes fed to the worker."""
import copy

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from nngpu.burst import DATUM_SIZE, ExecutionBurstController
from nngpu.hal.types import (
    UINT64_MAX,
    DataLocation,
    ErrorStatus,
    FmqRequestDatum,
    FmqRequestDatumKind as RK,
    FmqRequestOperandInformation,
    FmqRequestPacketInformation,
    MeasureTiming,
    Timing,
)

from ..burst.datum_codec import deserialize_result, request_to_bytes, result_from_bytes, serialize_request

INT32_MAX = 2**31 - 1
_BAD_INFO = FmqRequestOperandInformation(False, DataLocation(), 10)
BAD_DATUMS = [  # the VTS's set of invalid entries, one per datum kind
    FmqRequestDatum(RK.packetInformation, FmqRequestPacketInformation(10, 10, 10, 10)),
    FmqRequestDatum(RK.inputOperandInformation, _BAD_INFO),
    FmqRequestDatum(RK.inputOperandDimensionValue, 0),
    FmqRequestDatum(RK.outputOperandInformation, _BAD_INFO),
    FmqRequestDatum(RK.outputOperandDimensionValue, 0),
    FmqRequestDatum(RK.poolIdentifier, INT32_MAX),
    FmqRequestDatum(RK.measureTiming, MeasureTiming.YES),
]


def _interesting(original: FmqRequestDatum, bad: FmqRequestDatum) -> bool:
    """The VTS skips same-value replacements and dimension values replaced by dimension values."""
    dims = (RK.inputOperandDimensionValue, RK.outputOperandDimensionValue)
    return original != bad and not (original.kind == bad.kind and bad.kind in dims)


def _no_result(result) -> bool:
    status, shapes, timing = result
    return status != ErrorStatus.NONE and shapes == [] and timing == Timing(UINT64_MAX, UINT64_MAX)


@pytest.fixture
def packet(raw_burst, kit):
    """A valid packet (MeasureTiming.YES) whose slots the burst callback knows."""
    r = kit.add_request()
    slots = [raw_burst.callback.slot_of(p) for p in r.request.pools]
    datums = serialize_request(r.request, MeasureTiming.YES, slots)
    status, shapes, _ = raw_burst.send(datums)
    assert status == ErrorStatus.NONE and len(shapes) == 1
    return r, datums  # r keeps the pools alive


def _mutants(datums):
    for index in range(len(datums)):
        yield f"remove {index}", datums[:index] + datums[index + 1:]
    for index in range(len(datums) + 1):
        for k, bad in enumerate(BAD_DATUMS):
            yield f"add {k} at {index}", datums[:index] + [bad] + datums[index:]
    for index in range(len(datums)):
        for k, bad in enumerate(BAD_DATUMS):
            if _interesting(datums[index], bad):
                yield f"replace {index} with {k}", datums[:index] + [bad] + datums[index + 1:]


def test_every_mutation_is_rejected_and_the_burst_survives(raw_burst, packet):
    _r, datums = packet
    assert len(datums) == 13  # 1 + 2 * (1 + 2 dims) + (1 + 2 dims) + 2 pools + 1
    names = []
    for name, mutant in _mutants(copy.deepcopy(datums)):
        names.append(name)
        assert _no_result(raw_burst.send(mutant)), name
    assert len(names) > 150
    assert raw_burst.context.running
    assert raw_burst.send(datums)[0] == ErrorStatus.NONE


@pytest.mark.parametrize("bad", BAD_DATUMS, ids=[d.kind.name for d in BAD_DATUMS])
def test_each_bad_datum_alone(raw_burst, packet, bad):
    _r, datums = packet
    assert _no_result(raw_burst.send(datums[:-1] + [bad, datums[-1]]))
    assert _no_result(raw_burst.send([bad]))
    assert raw_burst.send(datums)[0] == ErrorStatus.NONE


def test_unknown_slot_is_rejected_through_get_memories(raw_burst, packet):
    _r, datums = packet
    calls = []
    original = raw_burst.callback.getMemories
    raw_burst.callback.getMemories = lambda slots: calls.append(list(slots)) or original(slots)
    mutant = [d if d.kind != RK.poolIdentifier else FmqRequestDatum(RK.poolIdentifier, INT32_MAX) for d in datums]
    assert _no_result(raw_burst.send(mutant))
    assert calls == [[INT32_MAX]]


def test_a_result_longer_than_the_result_queue_fails_gracefully(device, kit):
    shape = [1, 2, 1, 3]  # the result: 2 + 2 * (1 + 4) = 12 datums
    prepared = kit.prepare(device, kit.add_model(shape, outputs=2))
    r = kit.add_request(kit.A.reshape(shape), kit.B.reshape(shape), outputs=2)
    with ExecutionBurstController.create(prepared) as regular:
        status, shapes, _ = regular.compute(r.request)
        assert status == ErrorStatus.NONE and len(shapes) == 2
    assert 2 + sum(1 + len(s.dimensions) for s in shapes) > 8
    with ExecutionBurstController.create(prepared, result_length=8) as small:
        for _ in range(2):  # and it stays usable
            status, shapes, timing = small.compute(r.request, MeasureTiming.YES)
            assert status == ErrorStatus.GENERAL_FAILURE and shapes == [] and timing == Timing()
        assert small.context.running


# ---- fuzzing ----------------------------------------------------------------------------------------
small = st.integers(0, 12)
u32 = st.one_of(small, st.integers(0, 2**32 - 1))
datum = st.one_of(
    st.builds(lambda a, b, c, d: FmqRequestDatum(RK.packetInformation, FmqRequestPacketInformation(a, b, c, d)),
              small, small, small, small),
    st.builds(lambda k, nv, p, o, ln, n: FmqRequestDatum(k, FmqRequestOperandInformation(nv, DataLocation(p, o, ln), n)),
              st.sampled_from([RK.inputOperandInformation, RK.outputOperandInformation]), st.booleans(),
              st.integers(0, 3), st.sampled_from([0, 4, 24, 2**31]), st.sampled_from([0, 4, 24, 48, 2**32 - 1]), small),
    st.builds(FmqRequestDatum, st.sampled_from([RK.inputOperandDimensionValue, RK.outputOperandDimensionValue]), u32),
    st.builds(lambda s: FmqRequestDatum(RK.poolIdentifier, s), st.integers(-3, 4) | st.just(INT32_MAX)),
    st.builds(lambda m: FmqRequestDatum(RK.measureTiming, m), st.integers(-1, 2)),
)


def _fix_size(datums):
    """Half the time make packetSize right, so fuzzing reaches past the first check."""
    if datums and datums[0].kind == RK.packetInformation:
        datums[0].value.packetSize = len(datums)
    return datums


def _answered(raw):
    assert raw is not None, "the worker did not answer"
    status, shapes, timing = deserialize_result(result_from_bytes(raw))
    if status != ErrorStatus.NONE:
        assert shapes == [] or status == ErrorStatus.OUTPUT_INSUFFICIENT_SIZE
    return status


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(datum, min_size=1, max_size=30), st.booleans())
def test_random_datums_are_answered(raw_burst, packet, datums, fix):
    if fix:
        datums = _fix_size(datums)
    _answered(raw_burst.send_bytes(request_to_bytes(datums)))
    assert raw_burst.context.running


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(min_size=1, max_size=40 * DATUM_SIZE))
def test_garbage_bytes_are_answered(raw_burst, packet, garbage):
    garbage = garbage + bytes(-len(garbage) % DATUM_SIZE)  # the FMQ moves whole elements
    _answered(raw_burst.send_bytes(garbage))
    assert raw_burst.context.running


def test_still_usable_after_fuzzing(raw_burst, packet):
    _r, datums = packet
    for raw in (b"\xff" * DATUM_SIZE, bytes(DATUM_SIZE * 3), request_to_bytes(datums)[:-DATUM_SIZE]):
        assert _answered(raw_burst.send_bytes(raw)) != ErrorStatus.NONE
    assert raw_burst.send(datums)[0] == ErrorStatus.NONE
