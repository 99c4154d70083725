"""The test oracle: burst packets as the spec's FmqRequestDatum / FmqResultDatum lists (the VTS
writes its packets this way), over nngpu.burst.codec's wire format.

*_to_bytes and *_from_bytes convert each datum to its 6 u32 words and back (any datum list,
well-formed or not, as the VTS mutation tests send), serialize_* reads the encoder's packet back
as datums, and deserialize_* decodes the bytes of a datum list."""
from __future__ import annotations

import struct

from nngpu.burst.codec import DATUM_SIZE, BurstRequest, PacketError, decode_request, decode_result, encode_request, \
    encode_result
from nngpu.burst.codec import _i32, _signed, _u32, _u64, _U32_MAX  # the codec's own range checks
from nngpu.hal.types import (
    DataLocation,
    ErrorStatus,
    FmqRequestDatum,
    FmqRequestDatumKind as RK,
    FmqRequestOperandInformation,
    FmqRequestPacketInformation,
    FmqResultDatum,
    FmqResultDatumKind as SK,
    FmqResultOperandInformation,
    FmqResultPacketInformation,
    MeasureTiming,
    OutputShape,
    Request,
    Timing,
)

_WORDS = DATUM_SIZE // 4


def _pack(w: list[int]) -> bytes:
    return struct.pack(f"<{len(w)}I", *w)


def _rows(raw) -> list[tuple[int, ...]]:
    """The datums' words; PacketError unless raw is a whole number of datums."""
    n, rest = divmod(len(raw), DATUM_SIZE)
    if rest or n == 0:
        raise PacketError(f"{len(raw)} bytes is not a whole number of datums")
    w = struct.unpack(f"<{n * _WORDS}I", raw)
    return [w[i:i + _WORDS] for i in range(0, len(w), _WORDS)]


def _request_row(d: FmqRequestDatum) -> tuple[int, ...]:
    k, v = RK(d.kind), d.value
    if k == RK.packetInformation:
        return (k, _u32(v.packetSize, "packetSize"), _u32(v.numberOfInputOperands, "inputs"),
                _u32(v.numberOfOutputOperands, "outputs"), _u32(v.numberOfPools, "pools"), 0)
    if k in (RK.inputOperandInformation, RK.outputOperandInformation):
        loc = v.location
        return (k, 1 if v.hasNoValue else 0, _u32(loc.poolIndex, "poolIndex"), _u32(loc.offset, "offset"),
                _u32(loc.length, "length"), _u32(v.numberOfDimensions, "numberOfDimensions"))
    if k in (RK.inputOperandDimensionValue, RK.outputOperandDimensionValue):
        return (k, _u32(v, "dimension"), 0, 0, 0, 0)
    return (k, _i32(v, k.name), 0, 0, 0, 0)  # poolIdentifier, measureTiming: int32


def _request_datum(w: tuple[int, ...]) -> FmqRequestDatum:
    k = w[0]
    if k == RK.packetInformation:
        return FmqRequestDatum(RK(k), FmqRequestPacketInformation(w[1], w[2], w[3], w[4]))
    if k in (RK.inputOperandInformation, RK.outputOperandInformation):
        if w[1] & 0xFF > 1:
            raise PacketError("hasNoValue is not a boolean")
        return FmqRequestDatum(RK(k), FmqRequestOperandInformation(bool(w[1] & 0xFF), DataLocation(w[2], w[3], w[4]),
                                                                   w[5]))
    if k in (RK.inputOperandDimensionValue, RK.outputOperandDimensionValue):
        return FmqRequestDatum(RK(k), w[1])
    if k in (RK.poolIdentifier, RK.measureTiming):
        return FmqRequestDatum(RK(k), _signed(w[1]))
    raise PacketError(f"unknown datum kind {k}")


def request_to_bytes(data: list[FmqRequestDatum]) -> bytes:
    """Encode request datums in the fixed layout, whatever their order; PacketError for a
    value that does not fit its field."""
    return _pack([x for d in data for x in _request_row(d)])


def request_from_bytes(raw) -> list[FmqRequestDatum]:
    """Decode request datums; PacketError on a partial datum, unknown kind or bad boolean."""
    return [_request_datum(w) for w in _rows(raw)]


def serialize_request(request: Request, measure: MeasureTiming, slots: list[int]) -> list[FmqRequestDatum]:
    """The spec's datum list for `request`, its pools named by `slots`."""
    return request_from_bytes(encode_request(request, measure, slots))


def deserialize_request(data: list[FmqRequestDatum]) -> BurstRequest:
    """The request a datum list describes; PacketError when it is ill-formed."""
    return decode_request(request_to_bytes(data))


def _result_row(d: FmqResultDatum) -> tuple[int, ...]:
    k, v = SK(d.kind), d.value
    if k == SK.packetInformation:
        return (k, 0, _u32(v.packetSize, "packetSize"), _i32(v.errorStatus, "errorStatus"),
                _u32(v.numberOfOperands, "numberOfOperands"), 0)
    if k == SK.operandInformation:
        return (k, 0, 1 if v.isSufficient else 0, _u32(v.numberOfDimensions, "numberOfDimensions"), 0, 0)
    if k == SK.operandDimensionValue:
        return (k, 0, _u32(v, "dimension"), 0, 0, 0)
    dev, drv = _u64(v.timeOnDevice, "timeOnDevice"), _u64(v.timeInDriver, "timeInDriver")
    return (k, 0, dev & _U32_MAX, dev >> 32, drv & _U32_MAX, drv >> 32)


def _result_datum(w: tuple[int, ...]) -> FmqResultDatum:
    k = w[0]
    if k == SK.packetInformation:
        return FmqResultDatum(SK(k), FmqResultPacketInformation(w[2], _signed(w[3]), w[4]))
    if k == SK.operandInformation:
        if w[2] & 0xFF > 1:
            raise PacketError("isSufficient is not a boolean")
        return FmqResultDatum(SK(k), FmqResultOperandInformation(bool(w[2] & 0xFF), w[3]))
    if k == SK.operandDimensionValue:
        return FmqResultDatum(SK(k), w[2])
    if k == SK.executionTiming:
        return FmqResultDatum(SK(k), Timing(w[2] | w[3] << 32, w[4] | w[5] << 32))
    raise PacketError(f"unknown datum kind {k}")


def result_to_bytes(data: list[FmqResultDatum]) -> bytes:
    """Encode result datums in the fixed layout, whatever their order."""
    return _pack([x for d in data for x in _result_row(d)])


def result_from_bytes(raw) -> list[FmqResultDatum]:
    """Decode result datums; PacketError on a partial datum, unknown kind or bad boolean."""
    return [_result_datum(w) for w in _rows(raw)]


def serialize_result(status: ErrorStatus, shapes: list[OutputShape], timing: Timing) -> list[FmqResultDatum]:
    """The spec's datum list for an execution's result."""
    return result_from_bytes(encode_result(status, shapes, timing))


def deserialize_result(data: list[FmqResultDatum]) -> tuple[ErrorStatus, list[OutputShape], Timing]:
    """The (status, output shapes, timing) a datum list describes; PacketError when it is ill-formed."""
    return decode_result(result_to_bytes(data))
