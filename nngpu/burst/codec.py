"""Burst packets: Request + MeasureTiming <-> bytes and (ErrorStatus, OutputShapes, Timing) <->
bytes (1.2/types.hal): the burst's one wire codec.

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

Decoding checks the packet against itself: the first datum is packetInformation, its
packetSize is the packet's length, every count is matched by exactly that many datums of the
expected kind, booleans are 0 or 1, enums are known values. Anything else raises PacketError.

encode_request / decode_request / encode_result / decode_result turn a whole packet into a flat
tuple of u32 words (6 a datum) and back with one struct call and no per-datum objects. They are
the burst's hot path and the only code that knows the datum order and checks a packet (the tests
hold the spec's per-datum view, FmqRequestDatum / FmqResultDatum lists, as their oracle). An
encoder given a value struct cannot pack (a float, a negative or an oversized int) converts every
value with int() and checks its range, naming one that does not fit in the PacketError, and packs
again.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import NamedTuple

from ..hal.types import (
    DataLocation,
    ErrorStatus,
    FmqRequestDatumKind as RK,
    FmqResultDatumKind as SK,
    MeasureTiming,
    OutputShape,
    Request,
    RequestArgument,
    Timing,
    UINT64_MAX,
)

__all__ = ["DATUM_SIZE", "PacketError", "BurstRequest", "ComputeResult", "encode_request", "decode_request",
           "encode_result", "decode_result"]

DATUM_SIZE = 24
_WORDS = DATUM_SIZE // 4
_U32_MAX = 0xFFFF_FFFF
_INT32_MAX = 0x7FFF_FFFF
_MEASURES = {int(m): m for m in MeasureTiming}
_STATUS_OF = {int(s): s for s in ErrorStatus}
_RQ_INFO, _RQ_IN, _RQ_IN_DIM, _RQ_OUT, _RQ_OUT_DIM, _RQ_POOL, _RQ_MEASURE = (int(k) for k in RK)
_RS_INFO, _RS_OPERAND, _RS_DIM, _RS_TIMING = (int(k) for k in SK)


ComputeResult = tuple[ErrorStatus, list[OutputShape], Timing]  # what a burst execution returns


class PacketError(ValueError):
    """A packet whose datums are inconsistent with each other or with the spec's order."""


@dataclass
class BurstRequest:
    """A decoded request packet: pools are still slot identifiers."""

    inputs: list[RequestArgument]
    outputs: list[RequestArgument]
    slots: list[int]
    measure: MeasureTiming

    def with_pools(self, pools: list) -> Request:
        return Request(self.inputs, self.outputs, list(pools))


# ---- values -> words, checked ---------------------------------------------------------------------
def _u32(v: int, what: str) -> int:
    v = int(v)
    if not 0 <= v <= _U32_MAX:
        raise PacketError(f"{what} {v} does not fit uint32")
    return v


def _i32(v: int, what: str) -> int:
    """The u32 word of int32 `v` (two's complement)."""
    v = int(v)
    if not -_INT32_MAX - 1 <= v <= _INT32_MAX:
        raise PacketError(f"{what} {v} does not fit int32")
    return v & _U32_MAX


def _u64(v: int, what: str) -> int:
    v = int(v)
    if not 0 <= v <= UINT64_MAX:
        raise PacketError(f"{what} {v} does not fit uint64")
    return v


def _signed(w: int) -> int:
    return w - (1 << 32) if w > _INT32_MAX else w


# ---- words <-> bytes ----------------------------------------------------------------------------------
_PACKERS: dict[int, struct.Struct] = {}


def _packer(n: int) -> struct.Struct:
    """The Struct for an n-datum packet (cached: packets of a burst repeat their length)."""
    s = _PACKERS.get(n)
    if s is None:
        if len(_PACKERS) >= 512:
            _PACKERS.clear()
        s = _PACKERS[n] = struct.Struct(f"<{n * _WORDS}I")
    return s


def _words(raw) -> tuple[int, tuple[int, ...]]:
    """(number of datums, their words); PacketError unless raw is a whole number of datums."""
    n, rest = divmod(len(raw), DATUM_SIZE)
    if rest or n == 0:
        raise PacketError(f"{len(raw)} bytes is not a whole number of datums")
    return n, _packer(n).unpack(raw)


class _Operand(NamedTuple):
    """Where an operand information datum keeps its fields, and the kind of its dimension datums."""

    kind: int
    name: str
    flag_word: int      # the u8 boolean
    flag_name: str
    ndims_word: int
    dim_kind: int
    dim_word: int       # the value in each dimension datum


_INPUT = _Operand(_RQ_IN, RK.inputOperandInformation.name, 1, "hasNoValue", 5, _RQ_IN_DIM, 1)
_OUTPUT = _Operand(_RQ_OUT, RK.outputOperandInformation.name, 1, "hasNoValue", 5, _RQ_OUT_DIM, 1)
_SHAPE = _Operand(_RS_OPERAND, SK.operandInformation.name, 2, "isSufficient", 3, _RS_DIM, 2)


def _operands(w: tuple[int, ...], pos: int, count: int, last: int, o: _Operand) -> tuple[list, int]:
    """The `count` operands from word `pos` on, each an operand information datum and its
    dimension values: (RequestArguments, or OutputShapes for _SHAPE; the next datum's word).
    Every operand consumes a datum, so a huge count fails within the packet."""
    kind, name, flag_word, flag_name, ndims_word, dim_kind, dim_word = o
    shape = o is _SHAPE
    out: list = []
    for _ in range(count):
        if pos > last or w[pos] != kind:
            raise PacketError(f"datum {pos // _WORDS}: expected {name}")
        flag = w[pos + flag_word] & 0xFF
        if flag > 1:
            raise PacketError(f"{flag_name} is not a boolean")
        ndims = w[pos + ndims_word]
        stop = pos + _WORDS * (1 + ndims)
        if ndims and (stop > last + _WORDS or w[pos + _WORDS:stop:_WORDS].count(dim_kind) != ndims):
            raise PacketError(f"{ndims} dimension values not found after datum {pos // _WORDS}")
        dims = list(w[pos + _WORDS + dim_word:stop:_WORDS])
        if shape:
            out.append(OutputShape(dims, flag == 1))
        else:
            out.append(RequestArgument(flag == 1, DataLocation(w[pos + 2], w[pos + 3], w[pos + 4]), dims))
        pos = stop
    return out, pos


# ---- request packets ------------------------------------------------------------------------------
def _request_packet(request: Request, measure: int, slots: list[int]) -> bytes:
    """The packet of the values as given: struct.error or TypeError for one it cannot pack."""
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
    n = w[1] = len(w) // _WORDS
    return _packer(n).pack(*w)


def _checked_argument(a: RequestArgument) -> RequestArgument:
    if a.hasNoValue:
        return a  # its location and dimensions are not sent
    loc = a.location
    return RequestArgument(False, DataLocation(_u32(loc.poolIndex, "poolIndex"), _u32(loc.offset, "offset"),
                                               _u32(loc.length, "length")),
                           [_u32(d, "dimension") for d in a.dimensions])


def encode_request(request: Request, measure: MeasureTiming, slots: list[int]) -> bytes:
    """The request packet of `request`, its pools named by `slots`; PacketError for a value
    that does not fit its field."""
    try:
        if slots and max(slots) > _INT32_MAX:
            raise struct.error("pool identifier beyond int32")
        return _request_packet(request, measure, slots)
    except (struct.error, TypeError):  # an odd value: convert and check every one
        checked = Request([_checked_argument(a) for a in request.inputs],
                          [_checked_argument(a) for a in request.outputs], request.pools)
        return _request_packet(checked, MeasureTiming(measure), [_i32(s, "poolIdentifier") for s in slots])


def decode_request(raw) -> BurstRequest:
    """The request a packet describes; PacketError when it is ill-formed."""
    n, w = _words(raw)
    if w[0] != _RQ_INFO:
        raise PacketError("a request packet starts with packetInformation")
    if w[1] != n:
        raise PacketError(f"packetSize {w[1]} but the packet has {n} datums")
    last = (n - 1) * _WORDS
    inputs, pos = _operands(w, _WORDS, w[2], last, _INPUT)
    outputs, pos = _operands(w, pos, w[3], last, _OUTPUT)
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


# ---- result packets -------------------------------------------------------------------------------
def _result_packet(status: int, shapes: list[OutputShape], on_device: int, in_driver: int) -> bytes:
    """The packet of the values as given: struct.error or TypeError for one it cannot pack."""
    w = [_RS_INFO, 0, 0, status, len(shapes), 0]
    for s in shapes:
        dims = s.dimensions
        w += (_RS_OPERAND, 0, 1 if s.isSufficient else 0, len(dims), 0, 0)
        for d in dims:
            w += (_RS_DIM, 0, d, 0, 0, 0)
    w += (_RS_TIMING, 0, on_device & _U32_MAX, on_device >> 32, in_driver & _U32_MAX, in_driver >> 32)
    n = w[2] = len(w) // _WORDS
    return _packer(n).pack(*w)


def encode_result(status: ErrorStatus, shapes: list[OutputShape], timing: Timing) -> bytes:
    """The result packet of an execution; PacketError for a value that does not fit its field."""
    try:
        if status not in _STATUS_OF:
            raise struct.error("unknown status")
        return _result_packet(status, shapes, timing.timeOnDevice, timing.timeInDriver)
    except (struct.error, TypeError):  # an odd value: convert and check every one
        checked = [OutputShape([_u32(d, "dimension") for d in s.dimensions], s.isSufficient) for s in shapes]
        return _result_packet(_i32(ErrorStatus(status), "errorStatus"), checked,
                              _u64(timing.timeOnDevice, "timeOnDevice"), _u64(timing.timeInDriver, "timeInDriver"))


def decode_result(raw) -> ComputeResult:
    """The (status, output shapes, timing) a result packet describes; PacketError when it is ill-formed."""
    n, w = _words(raw)
    if w[0] != _RS_INFO:
        raise PacketError("a result packet starts with packetInformation")
    if w[2] != n:
        raise PacketError(f"packetSize {w[2]} but the packet has {n} datums")
    status = _STATUS_OF.get(_signed(w[3]))
    if status is None:
        raise PacketError(f"unknown errorStatus {_signed(w[3])}")
    last = (n - 1) * _WORDS
    shapes, pos = _operands(w, _WORDS, w[4], last, _SHAPE)
    if pos != last or w[last] != _RS_TIMING:
        raise PacketError("a result packet ends with exactly one executionTiming")
    return status, shapes, Timing(w[last + 2] | w[last + 3] << 32, w[last + 4] | w[last + 5] << 32)
