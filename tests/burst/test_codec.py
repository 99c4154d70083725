"""nngpu.burst.codec: the packet codec against the spec's datum lists (tests/burst/datum_codec.py),
its layout and zero padding, the packets it rejects, and its fallback for odd values."""
import struct

import pytest
from hypothesis import given, settings, strategies as st

from nngpu.burst.codec import DATUM_SIZE, PacketError, decode_request, decode_result, encode_request, encode_result
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

from .datum_codec import (
    deserialize_request,
    deserialize_result,
    request_from_bytes,
    request_to_bytes,
    result_from_bytes,
    result_to_bytes,
    serialize_request,
    serialize_result,
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

