"""Burst packets: Request + MeasureTiming <-> FmqRequestDatum list <-> bytes, and
(ErrorStatus, OutputShapes, Timing) <-> FmqResultDatum list <-> bytes (1.2/types.hal).

Datum order (the spec's): a request packet is packetInformation, then per input its
operand information followed by one datum per dimension value, the same for outputs, one
poolIdentifier per pool, and measureTiming last. A result packet is packetInformation, per
output shape its operand information and dimension values, and executionTiming last.

Binary layout: every datum is DATUM_SIZE = 24 bytes, little-endian, all unused bytes zero.

  request datum              bytes 0-3: u32 discriminator (FmqRequestDatumKind)
                             bytes 4-23: the union member, zero-padded:
    packetInformation        u32 packetSize, u32 numberOfInputOperands,
                             u32 numberOfOutputOperands, u32 numberOfPools
    in/outOperandInformation u8 hasNoValue, 3 zero bytes, u32 poolIndex, u32 offset,
                             u32 length, u32 numberOfDimensions
    in/outOperandDimensionValue  u32 value
    poolIdentifier           i32 slot
    measureTiming            i32 MeasureTiming

  result datum               bytes 0-3: u32 discriminator (FmqResultDatumKind),
                             bytes 4-7: zero, bytes 8-23: the union member, zero-padded:
    packetInformation        u32 packetSize, i32 errorStatus, u32 numberOfOperands
    operandInformation       u8 isSufficient, 3 zero bytes, u32 numberOfDimensions
    operandDimensionValue    u32 value
    executionTiming          u64 timeOnDevice, u64 timeInDriver

Deserialization checks the packet against itself: the first datum is packetInformation, its
packetSize is the packet's length, every count is matched by exactly that many datums of the
expected kind, booleans are 0 or 1, enums are known values. Anything else raises PacketError.

Two routes with the same bytes and the same verdicts: the datum-list functions (serialize_* /
*_to_bytes / *_from_bytes / deserialize_*), which mirror the spec's types one datum at a time,
and the whole-packet codecs encode_request / decode_request / encode_result / decode_result,
which the burst's hot path uses: one struct call per packet over a flat tuple of u32 words and
no per-datum objects. A value the fast encoders cannot pack falls back to the datum route,
which names it in the PacketError.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass

from .hal.types import (
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
    RequestArgument,
    Timing,
    UINT64_MAX,
)

__all__ = ["DATUM_SIZE", "PacketError", "BurstRequest", "serialize_request", "deserialize_request",
           "serialize_result", "deserialize_result", "request_to_bytes", "request_from_bytes",
           "result_to_bytes", "result_from_bytes", "request_packet_length", "result_packet_length",
           "encode_request", "decode_request", "encode_result", "decode_result"]

DATUM_SIZE = 24
_WORDS = DATUM_SIZE // 4
_U32_MAX = 0xFFFF_FFFF
_INT32_MAX = 0x7FFF_FFFF
_STATUSES = frozenset(int(s) for s in ErrorStatus)


class PacketError(ValueError):
    """A packet whose datums are inconsistent with each other or with the spec's order."""


@dataclass
class BurstRequest:
    """A deserialized request packet: pools are still slot identifiers."""

    inputs: list[RequestArgument]
    outputs: list[RequestArgument]
    slots: list[int]
    measure: MeasureTiming

    def with_pools(self, pools: list) -> Request:
        return Request(self.inputs, self.outputs, list(pools))


def _u32(v: int, what: str) -> int:
    v = int(v)
    if not 0 <= v <= _U32_MAX:
        raise PacketError(f"{what} {v} does not fit uint32")
    return v


# ---- request: Request <-> datum list ------------------------------------------------------------
def request_packet_length(request: Request) -> int:
    args = [*request.inputs, *request.outputs]
    return 2 + len(args) + sum(len(a.dimensions) for a in args) + len(request.pools)


def serialize_request(request: Request, measure: MeasureTiming, slots: list[int]) -> list[FmqRequestDatum]:
    """The spec's datum list for `request`, its pools named by `slots`."""
    n = request_packet_length(request)
    out = [FmqRequestDatum(RK.packetInformation, FmqRequestPacketInformation(
        n, len(request.inputs), len(request.outputs), len(slots)))]
    for args, info_kind, dim_kind in ((request.inputs, RK.inputOperandInformation, RK.inputOperandDimensionValue),
                                      (request.outputs, RK.outputOperandInformation, RK.outputOperandDimensionValue)):
        for a in args:
            loc = DataLocation() if a.hasNoValue else a.location
            dims = [] if a.hasNoValue else list(a.dimensions)
            out.append(FmqRequestDatum(info_kind, FmqRequestOperandInformation(bool(a.hasNoValue), loc, len(dims))))
            out.extend(FmqRequestDatum(dim_kind, int(d)) for d in dims)
    out.extend(FmqRequestDatum(RK.poolIdentifier, int(s)) for s in slots)
    out.append(FmqRequestDatum(RK.measureTiming, MeasureTiming(measure)))
    return out


def _operand_args(data: list[FmqRequestDatum], pos: int, count: int, info_kind: RK, dim_kind: RK):
    args = []
    for k in range(count):
        if pos >= len(data) or data[pos].kind != info_kind:
            raise PacketError(f"datum {pos}: expected {info_kind.name}")
        info = data[pos].value
        ndims = int(info.numberOfDimensions)
        dims_data = data[pos + 1 : pos + 1 + ndims]
        if len(dims_data) != ndims or any(d.kind != dim_kind for d in dims_data):
            raise PacketError(f"operand {k}: {ndims} dimension values not found after datum {pos}")
        loc = info.location
        args.append(RequestArgument(bool(info.hasNoValue), DataLocation(loc.poolIndex, loc.offset, loc.length),
                                    [int(d.value) for d in dims_data]))
        pos += 1 + ndims
    return args, pos


def deserialize_request(data: list[FmqRequestDatum]) -> BurstRequest:
    """The request a datum list describes; PacketError when it is ill-formed."""
    if not data or data[0].kind != RK.packetInformation:
        raise PacketError("a request packet starts with packetInformation")
    info = data[0].value
    if info.packetSize != len(data):
        raise PacketError(f"packetSize {info.packetSize} but the packet has {len(data)} datums")
    inputs, pos = _operand_args(data, 1, info.numberOfInputOperands, RK.inputOperandInformation,
                                RK.inputOperandDimensionValue)
    outputs, pos = _operand_args(data, pos, info.numberOfOutputOperands, RK.outputOperandInformation,
                                 RK.outputOperandDimensionValue)
    pools = data[pos : pos + info.numberOfPools]
    if len(pools) != info.numberOfPools or any(d.kind != RK.poolIdentifier for d in pools):
        raise PacketError(f"{info.numberOfPools} pool identifiers not found at datum {pos}")
    pos += info.numberOfPools
    if pos != len(data) - 1 or data[pos].kind != RK.measureTiming:
        raise PacketError("a request packet ends with exactly one measureTiming")
    if data[pos].value not in (MeasureTiming.NO, MeasureTiming.YES):
        raise PacketError(f"bad measureTiming {data[pos].value}")
    slots = [int(d.value) for d in pools]
    if any(s < 0 for s in slots):
        raise PacketError("negative pool identifier")
    return BurstRequest(inputs, outputs, slots, MeasureTiming(data[pos].value))


# ---- request: datum list <-> bytes --------------------------------------------------------------
_ROW = struct.Struct("<6I")


def _pack(rows: list[tuple[int, ...]]) -> bytes:
    return struct.pack(f"<{len(rows) * _WORDS}I", *[w for r in rows for w in r])


def _rows(raw: bytes) -> list[tuple[int, ...]]:
    if len(raw) == 0 or len(raw) % DATUM_SIZE:
        raise PacketError(f"{len(raw)} bytes is not a whole number of datums")
    return list(_ROW.iter_unpack(raw))


def _i32(v: int, what: str) -> int:
    v = int(v)
    if not -_INT32_MAX - 1 <= v <= _INT32_MAX:
        raise PacketError(f"{what} {v} does not fit int32")
    return v & _U32_MAX


def _signed(w: int) -> int:
    return w - (1 << 32) if w > _INT32_MAX else w


def request_to_bytes(data: list[FmqRequestDatum]) -> bytes:
    """Encode request datums in the fixed layout (module docstring)."""
    rows = []
    for d in data:
        k, v = RK(d.kind), d.value
        if k == RK.packetInformation:
            rows.append((k, _u32(v.packetSize, "packetSize"), _u32(v.numberOfInputOperands, "inputs"),
                         _u32(v.numberOfOutputOperands, "outputs"), _u32(v.numberOfPools, "pools"), 0))
        elif k in (RK.inputOperandInformation, RK.outputOperandInformation):
            loc = v.location
            rows.append((k, 1 if v.hasNoValue else 0, _u32(loc.poolIndex, "poolIndex"), _u32(loc.offset, "offset"),
                         _u32(loc.length, "length"), _u32(v.numberOfDimensions, "numberOfDimensions")))
        elif k in (RK.inputOperandDimensionValue, RK.outputOperandDimensionValue):
            rows.append((k, _u32(v, "dimension"), 0, 0, 0, 0))
        else:  # poolIdentifier, measureTiming: int32
            rows.append((k, _i32(v, k.name), 0, 0, 0, 0))
    return _pack(rows)


def request_from_bytes(raw: bytes) -> list[FmqRequestDatum]:
    """Decode request datums; PacketError on a partial datum, unknown kind or bad boolean."""
    out = []
    for w in _rows(raw):
        k = w[0]
        if k == RK.packetInformation:
            v = FmqRequestPacketInformation(w[1], w[2], w[3], w[4])
        elif k == RK.inputOperandInformation or k == RK.outputOperandInformation:
            if w[1] & 0xFF > 1:
                raise PacketError("hasNoValue is not a boolean")
            v = FmqRequestOperandInformation(bool(w[1] & 0xFF), DataLocation(w[2], w[3], w[4]), w[5])
        elif k == RK.inputOperandDimensionValue or k == RK.outputOperandDimensionValue:
            v = w[1]
        elif k == RK.poolIdentifier or k == RK.measureTiming:
            v = _signed(w[1])
        else:
            raise PacketError(f"unknown datum kind {k}")
        out.append(FmqRequestDatum(RK(k), v))
    return out


# ---- result ---------------------------------------------------------------------------------------
def result_packet_length(shapes: list[OutputShape]) -> int:
    return 2 + len(shapes) + sum(len(s.dimensions) for s in shapes)


def serialize_result(status: ErrorStatus, shapes: list[OutputShape], timing: Timing) -> list[FmqResultDatum]:
    out = [FmqResultDatum(SK.packetInformation,
                          FmqResultPacketInformation(result_packet_length(shapes), ErrorStatus(status), len(shapes)))]
    for s in shapes:
        out.append(FmqResultDatum(SK.operandInformation, FmqResultOperandInformation(bool(s.isSufficient),
                                                                                     len(s.dimensions))))
        out.extend(FmqResultDatum(SK.operandDimensionValue, int(d)) for d in s.dimensions)
    out.append(FmqResultDatum(SK.executionTiming, Timing(timing.timeOnDevice, timing.timeInDriver)))
    return out


def deserialize_result(data: list[FmqResultDatum]) -> tuple[ErrorStatus, list[OutputShape], Timing]:
    if not data or data[0].kind != SK.packetInformation:
        raise PacketError("a result packet starts with packetInformation")
    info = data[0].value
    if info.packetSize != len(data):
        raise PacketError(f"packetSize {info.packetSize} but the packet has {len(data)} datums")
    if int(info.errorStatus) not in _STATUSES:
        raise PacketError(f"unknown errorStatus {info.errorStatus}")
    shapes, pos = [], 1
    for k in range(info.numberOfOperands):
        if pos >= len(data) or data[pos].kind != SK.operandInformation:
            raise PacketError(f"datum {pos}: expected operandInformation")
        ndims = data[pos].value.numberOfDimensions
        dims = data[pos + 1 : pos + 1 + ndims]
        if len(dims) != ndims or any(d.kind != SK.operandDimensionValue for d in dims):
            raise PacketError(f"output {k}: {ndims} dimension values not found")
        shapes.append(OutputShape([int(d.value) for d in dims], bool(data[pos].value.isSufficient)))
        pos += 1 + ndims
    if pos != len(data) - 1 or data[pos].kind != SK.executionTiming:
        raise PacketError("a result packet ends with exactly one executionTiming")
    t = data[pos].value
    return ErrorStatus(info.errorStatus), shapes, Timing(int(t.timeOnDevice), int(t.timeInDriver))


def result_to_bytes(data: list[FmqResultDatum]) -> bytes:
    rows = []
    for d in data:
        k, v = SK(d.kind), d.value
        if k == SK.packetInformation:
            rows.append((k, 0, _u32(v.packetSize, "packetSize"), _i32(v.errorStatus, "errorStatus"),
                         _u32(v.numberOfOperands, "numberOfOperands"), 0))
        elif k == SK.operandInformation:
            rows.append((k, 0, 1 if v.isSufficient else 0, _u32(v.numberOfDimensions, "numberOfDimensions"), 0, 0))
        elif k == SK.operandDimensionValue:
            rows.append((k, 0, _u32(v, "dimension"), 0, 0, 0))
        else:
            dev, drv = _u64(v.timeOnDevice, "timeOnDevice"), _u64(v.timeInDriver, "timeInDriver")
            rows.append((k, 0, dev & _U32_MAX, dev >> 32, drv & _U32_MAX, drv >> 32))
    return _pack(rows)


def _u64(v: int, what: str) -> int:
    v = int(v)
    if not 0 <= v <= UINT64_MAX:
        raise PacketError(f"{what} {v} does not fit uint64")
    return v


def result_from_bytes(raw: bytes) -> list[FmqResultDatum]:
    out = []
    for w in _rows(raw):
        k = w[0]
        if k == SK.packetInformation:
            v = FmqResultPacketInformation(w[2], _signed(w[3]), w[4])
        elif k == SK.operandInformation:
            if w[2] & 0xFF > 1:
                raise PacketError("isSufficient is not a boolean")
            v = FmqResultOperandInformation(bool(w[2] & 0xFF), w[3])
        elif k == SK.operandDimensionValue:
            v = w[2]
        elif k == SK.executionTiming:
            v = Timing(w[2] | w[3] << 32, w[4] | w[5] << 32)
        else:
            raise PacketError(f"unknown datum kind {k}")
        out.append(FmqResultDatum(SK(k), v))
    return out


# ---- whole packets <-> bytes: the hot path ---------------------------------------------------------
# A packet is n datums = 6n little-endian u32 words; word 6i is datum i's discriminator.
_PACKERS: dict[int, struct.Struct] = {}
_MEASURES = {int(m): m for m in MeasureTiming}
_STATUS_OF = {int(s): s for s in ErrorStatus}
_RQ_INFO, _RQ_IN, _RQ_IN_DIM, _RQ_OUT, _RQ_OUT_DIM, _RQ_POOL, _RQ_MEASURE = (int(k) for k in RK)
_RS_INFO, _RS_OPERAND, _RS_DIM, _RS_TIMING = (int(k) for k in SK)


def _packer(n: int) -> struct.Struct:
    """The Struct for an n-datum packet (cached: packets of a burst repeat their length)."""
    s = _PACKERS.get(n)
    if s is None:
        if len(_PACKERS) >= 512:
            _PACKERS.clear()
        s = _PACKERS[n] = struct.Struct(f"<{n * _WORDS}I")
    return s


def _words(raw) -> tuple[int, tuple[int, ...]]:
    n, rest = divmod(len(raw), DATUM_SIZE)
    if rest or n == 0:
        raise PacketError(f"{len(raw)} bytes is not a whole number of datums")
    return n, _packer(n).unpack(raw)


def encode_request(request: Request, measure: MeasureTiming, slots: list[int]) -> bytes:
    """request_to_bytes(serialize_request(...)) in one pass."""
    w = [_RQ_INFO, 0, len(request.inputs), len(request.outputs), len(slots), 0]
    for args, info_kind, dim_kind in ((request.inputs, _RQ_IN, _RQ_IN_DIM), (request.outputs, _RQ_OUT, _RQ_OUT_DIM)):
        for a in args:
            if a.hasNoValue:
                w += (info_kind, 1, 0, 0, 0, 0)
                continue
            loc, dims = a.location, a.dimensions
            w += (info_kind, 0, loc.poolIndex, loc.offset, loc.length, len(dims))
            for d in dims:
                w += (dim_kind, d, 0, 0, 0, 0)
    for s in slots:
        w += (_RQ_POOL, s, 0, 0, 0, 0)
    w += (_RQ_MEASURE, measure, 0, 0, 0, 0)
    n = len(w) // _WORDS
    w[1] = n
    try:
        if slots and max(slots) > _INT32_MAX:
            raise struct.error("pool identifier beyond int32")
        return _packer(n).pack(*w)
    except (struct.error, TypeError):  # an odd value: the checked route converts it or names it
        return request_to_bytes(serialize_request(request, measure, slots))


def _decode_args(w: tuple[int, ...], pos: int, count: int, info_kind: int, dim_kind: int,
                 last: int) -> tuple[list[RequestArgument], int]:
    args = []
    for k in range(count):  # every operand consumes a datum: a huge count fails within the packet
        if pos > last or w[pos] != info_kind:
            raise PacketError(f"datum {pos // _WORDS}: expected {RK(info_kind).name}")
        no_value = w[pos + 1] & 0xFF
        if no_value > 1:
            raise PacketError("hasNoValue is not a boolean")
        ndims = w[pos + 5]
        stop = pos + _WORDS * (1 + ndims)
        if ndims and (stop > last + _WORDS or w[pos + 6:stop:_WORDS].count(dim_kind) != ndims):
            raise PacketError(f"operand {k}: {ndims} dimension values not found after datum {pos // _WORDS}")
        args.append(RequestArgument(no_value == 1, DataLocation(w[pos + 2], w[pos + 3], w[pos + 4]),
                                    list(w[pos + 7:stop:_WORDS])))
        pos = stop
    return args, pos


def decode_request(raw) -> BurstRequest:
    """deserialize_request(request_from_bytes(raw)) in one pass: the same checks, the same verdicts."""
    n, w = _words(raw)
    if w[0] != _RQ_INFO:
        raise PacketError("a request packet starts with packetInformation")
    if w[1] != n:
        raise PacketError(f"packetSize {w[1]} but the packet has {n} datums")
    last = (n - 1) * _WORDS
    inputs, pos = _decode_args(w, _WORDS, w[2], _RQ_IN, _RQ_IN_DIM, last)
    outputs, pos = _decode_args(w, pos, w[3], _RQ_OUT, _RQ_OUT_DIM, last)
    npools = w[4]
    stop = pos + _WORDS * npools
    if stop > last + _WORDS or w[pos:stop:_WORDS].count(_RQ_POOL) != npools:
        raise PacketError(f"{npools} pool identifiers not found at datum {pos // _WORDS}")
    if stop != last or w[last] != _RQ_MEASURE:
        raise PacketError("a request packet ends with exactly one measureTiming")
    measure = _MEASURES.get(w[last + 1])
    if measure is None:
        raise PacketError(f"bad measureTiming {_signed(w[last + 1])}")
    slots = list(w[pos + 1:stop:_WORDS])
    if slots and max(slots) > _INT32_MAX:
        raise PacketError("negative pool identifier")
    return BurstRequest(inputs, outputs, slots, measure)


def encode_result(status: ErrorStatus, shapes: list[OutputShape], timing: Timing) -> bytes:
    """result_to_bytes(serialize_result(...)) in one pass."""
    w = [_RS_INFO, 0, 0, status, len(shapes), 0]
    for s in shapes:
        dims = s.dimensions
        w += (_RS_OPERAND, 0, 1 if s.isSufficient else 0, len(dims), 0, 0)
        for d in dims:
            w += (_RS_DIM, 0, d, 0, 0, 0)
    dev, drv = timing.timeOnDevice, timing.timeInDriver
    try:
        w += (_RS_TIMING, 0, dev & _U32_MAX, dev >> 32, drv & _U32_MAX, drv >> 32)
        n = len(w) // _WORDS
        w[2] = n
        if status not in _STATUS_OF:
            raise struct.error("unknown status")
        return _packer(n).pack(*w)
    except (struct.error, TypeError):
        return result_to_bytes(serialize_result(status, shapes, timing))


def decode_result(raw) -> tuple[ErrorStatus, list[OutputShape], Timing]:
    """deserialize_result(result_from_bytes(raw)) in one pass."""
    n, w = _words(raw)
    if w[0] != _RS_INFO:
        raise PacketError("a result packet starts with packetInformation")
    if w[2] != n:
        raise PacketError(f"packetSize {w[2]} but the packet has {n} datums")
    status = _STATUS_OF.get(_signed(w[3]))
    if status is None:
        raise PacketError(f"unknown errorStatus {_signed(w[3])}")
    last = (n - 1) * _WORDS
    shapes, pos = [], _WORDS
    for k in range(w[4]):
        if pos > last or w[pos] != _RS_OPERAND:
            raise PacketError(f"datum {pos // _WORDS}: expected operandInformation")
        sufficient = w[pos + 2] & 0xFF
        if sufficient > 1:
            raise PacketError("isSufficient is not a boolean")
        ndims = w[pos + 3]
        stop = pos + _WORDS * (1 + ndims)
        if ndims and (stop > last + _WORDS or w[pos + 6:stop:_WORDS].count(_RS_DIM) != ndims):
            raise PacketError(f"output {k}: {ndims} dimension values not found")
        shapes.append(OutputShape(list(w[pos + 8:stop:_WORDS]), sufficient == 1))
        pos = stop
    if pos != last or w[last] != _RS_TIMING:
        raise PacketError("a result packet ends with exactly one executionTiming")
    return status, shapes, Timing(w[last + 2] | w[last + 3] << 32, w[last + 4] | w[last + 5] << 32)
