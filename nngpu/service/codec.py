"""The schema of nngpu.service's messages: every HAL value that crosses (Model with its pools,
Request, MeasureTiming, ErrorStatus, OutputShape, Timing, memories, FMQ descriptors) encoded to
plain msgpack values and decoded back field by field, and the fields each call and reply holds.

Decoding checks every type, range and key: an unknown op, field or value is a WireError, which
the service answers with INVALID_ARGUMENT. Memories and queues travel as fds in the order they
appear in the message; a Received owns a message's fds until a decoded value takes them, so on
any failure each fd is closed exactly once. A memory's size is decoded as a uint64 and checked
against what its fd holds where the driver first uses it (nngpu.memory's `Memory.verify`), so
the service answers a lying memory as the driver in the client's process would. Model graphs
reuse the compilation cache's encoding.
"""
from __future__ import annotations

from dataclasses import dataclass, fields as dataclass_fields
from enum import IntEnum
from typing import Any, Callable

from ..driver.cache_codec import CacheFormatError, decode_graph, encode_graph
from ..burst.descriptor import QueueDescriptor, QueueError
from ..hal.types import (UINT64_MAX, BufferRole, Capabilities, Capabilities_1_0, Capabilities_1_1, Capabilities_1_2,
                         DataLocation, DeviceStatus, DeviceType, ErrorStatus, ExecutionPreference, Extension,
                         ExtensionNameAndPrefix, MeasureTiming, MemoryPool, Model, Model_1_3, NativeHandle,
                         OperandPerformance, OperandType, OperandTypeInformation, OutputShape, PerformanceInfo,
                         Priority, Request, RequestArgument, Timing)
from ..memory import Memory, MemoryError_, close_fds, memory_from_fd

MAX_NAME = 64
MAX_SERVED = 64  # device names in an info reply: the devices one service may serve
MAX_ERROR = 1024
MAX_QUEUE_BYTES = 1 << 31


class WireError(ValueError):
    """A value or message that does not fit its schema: INVALID_ARGUMENT."""


class Received:
    """A message's fds, handed out in order; what no Memory took is closed by close()."""

    def __init__(self, fds: list[int]):
        self._fds = list(fds)
        self._next = 0
        self._memories: list[Memory] = []
        self._kept: list[int] = []

    def take(self, n: int) -> list[int]:
        if self._next + n > len(self._fds):
            raise WireError(f"the message describes more than its {len(self._fds)} fds")
        self._next += n
        return self._fds[self._next - n:self._next]

    def memory(self, name: str, size: int, offset: int) -> Memory:
        (fd,) = self.take(1)
        m = memory_from_fd(name, size, fd, offset)
        self._memories.append(m)
        self._fds[self._next - 1] = -1  # the Memory owns it now
        return m

    def keep(self, n: int) -> list[int]:
        """The next n fds, now the caller's to close (a returned fence)."""
        fds = self.take(n)
        self._fds[self._next - n:self._next] = [-1] * n
        self._kept.extend(fds)
        return fds

    def finish(self) -> None:
        if self._next != len(self._fds):
            raise WireError(f"{len(self._fds) - self._next} fds that the message does not describe")

    def close(self, memories_too: bool = False) -> None:
        """Close the fds no Memory owns (and, after a failed decode, the Memories made and the
        fds kept)."""
        close_fds([fd for fd in self._fds if fd >= 0])
        self._fds = []
        if memories_too:
            for m in self._memories:
                m.close()
            close_fds(self._kept)
            self._kept = []


@dataclass(frozen=True)
class Field:
    """encode(value, fds to send) -> plain value; decode(plain value, Received) -> value."""

    encode: Callable[[Any, list[int]], Any]
    decode: Callable[[Any, Received], Any]
    optional: bool = False


def _check(ok: bool, what: str) -> None:
    if not ok:
        raise WireError(what)


def integer(lo: int, hi: int) -> Field:
    def dec(v, _rx):
        _check(type(v) is int and lo <= v <= hi, f"an integer in [{lo}, {hi}] expected, got {v!r}")
        return v
    return Field(lambda v, _tx: int(v), dec)


def enum(cls: type[IntEnum]) -> Field:
    def dec(v, _rx):
        _check(type(v) is int and v in cls._value2member_map_, f"not a {cls.__name__}: {v!r}")
        return cls(v)
    return Field(lambda v, _tx: int(v), dec)


def _bool_dec(v, _rx):
    _check(type(v) is bool, f"a bool expected, got {v!r}")
    return v


def text(limit: int) -> Field:
    def dec(v, _rx):
        _check(isinstance(v, str) and len(v) <= limit, f"a string of at most {limit} expected")
        return v
    return Field(lambda v, _tx: str(v)[:limit], dec)


def array(item: Field, limit: int = 1 << 24) -> Field:
    def dec(v, rx):
        _check(isinstance(v, list) and len(v) <= limit, f"a list of at most {limit} expected")
        return [item.decode(x, rx) for x in v]
    return Field(lambda v, tx: [item.encode(x, tx) for x in v], dec)


def optional(f: Field) -> Field:
    return Field(f.encode, f.decode, True)


def record(fields: dict[str, Field], build: Callable[..., Any], parts: Callable[[Any], dict]) -> Field:
    """A map with exactly these keys (optional ones may be absent); build(**decoded)."""
    def enc(value, tx):
        return {k: fields[k].encode(v, tx) for k, v in parts(value).items() if v is not None}

    def dec(v, rx):
        return build(**decode_fields(fields, v, rx))
    return Field(enc, dec)


def decode_fields(fields: dict[str, Field], v: Any, rx: Received) -> dict:
    _check(isinstance(v, dict), "a map expected")
    unknown = set(v) - set(fields)
    _check(not unknown, f"unknown fields {sorted(unknown)}")
    missing = [k for k, f in fields.items() if k not in v and not f.optional]
    _check(not missing, f"missing fields {missing}")
    return {k: fields[k].decode(x, rx) for k, x in v.items()}


BOOL = Field(lambda v, _tx: bool(v), _bool_dec)
U32 = integer(0, 0xFFFF_FFFF)
I32 = integer(-(1 << 31), (1 << 31) - 1)
U64 = integer(0, UINT64_MAX)
ID = integer(1, (1 << 63) - 1)
STATUS = enum(ErrorStatus)


# ---- memories and pools -------------------------------------------------------------------------
def _memory_enc(m: Memory, tx: list[int]) -> list:
    if not isinstance(m, Memory) or m.fd < 0:
        raise WireError(f"{m!r} is not an open memory")
    tx.append(m.fd)
    return [m.name, m.size, m.offset]


def _memory_dec(v, rx: Received) -> Memory:
    _check(isinstance(v, list) and len(v) == 3, "a memory is [name, size, offset]")
    name, size, offset = text(MAX_NAME).decode(v[0], rx), U64.decode(v[1], rx), U64.decode(v[2], rx)
    return rx.memory(name, size, offset)


MEMORY = Field(_memory_enc, _memory_dec)
_POOL_MEMORY, _POOL_HIDL, _POOL_TOKEN = 0, 1, 2  # a Memory (1.0-1.2), MemoryPool.hidlMemory, .token


def _pool_enc(p, tx: list[int]) -> list:
    if isinstance(p, Memory):
        return [_POOL_MEMORY, _memory_enc(p, tx)]
    if isinstance(p, MemoryPool) and (p.hidlMemory is None) != (p.token is None):
        if p.token is not None:
            return [_POOL_TOKEN, int(p.token)]
        return [_POOL_HIDL, _memory_enc(p.hidlMemory, tx)]
    raise WireError(f"{p!r} is not a pool")


def _pool_dec(v, rx: Received):
    _check(isinstance(v, list) and len(v) == 2, "a pool is [kind, value]")
    kind, value = v
    if kind == _POOL_MEMORY:
        return _memory_dec(value, rx)
    if kind == _POOL_HIDL:
        return MemoryPool(hidlMemory=_memory_dec(value, rx))
    _check(kind == _POOL_TOKEN, f"unknown pool kind {kind!r}")
    return MemoryPool(token=U32.decode(value, rx))


POOLS = array(Field(_pool_enc, _pool_dec))


# ---- models -------------------------------------------------------------------------------------
def _bytes_dec(v, _rx) -> bytes:
    _check(isinstance(v, bytes), "bytes expected")
    return v


_MODEL_FIELDS = {"version": integer(0, 3), "graphs": Field(lambda v, _tx: v, lambda v, _rx: v),
                 "values": Field(lambda v, _tx: bytes(v), _bytes_dec), "pools": POOLS, "relaxed": BOOL,
                 "extensions": array(Field(lambda e, _tx: [str(e.name), int(e.prefix)], lambda v, _rx: v))}


def _model_enc(m, tx: list[int]) -> dict:
    graphs = [m] if isinstance(m, Model) else [m.main, *m.referenced]
    plain = {"version": 0 if isinstance(m, Model) else 3, "graphs": [encode_graph(g) for g in graphs],
             "values": m.operandValues, "pools": m.pools, "relaxed": m.relaxComputationFloat32toFloat16,
             "extensions": m.extensionNameToPrefix}
    return {k: _MODEL_FIELDS[k].encode(v, tx) for k, v in plain.items()}


def _extension_dec(v) -> ExtensionNameAndPrefix:
    _check(isinstance(v, list) and len(v) == 2, "an extension is [name, prefix]")
    return ExtensionNameAndPrefix(text(1024).decode(v[0], None), integer(0, 0xFFFF).decode(v[1], None))


def _model_dec(v, rx: Received):
    f = decode_fields(_MODEL_FIELDS, v, rx)
    graphs = f["graphs"]
    _check(isinstance(graphs, list) and len(graphs) >= 1, "a model has at least its main graph")
    _check(f["version"] in (0, 3), "a model is version 0 (1.0-1.2) or 3 (1.3)")
    _check(f["version"] == 3 or len(graphs) == 1, "a 1.0-1.2 model has one graph")
    try:
        main, *referenced = [decode_graph(g) for g in graphs]
    except (CacheFormatError, ValueError, TypeError, KeyError) as e:
        raise WireError(f"a graph that does not decode: {e}") from e
    extensions = [_extension_dec(e) for e in f["extensions"]]
    if f["version"] == 3:
        return Model_1_3(main, referenced, f["values"], f["pools"], f["relaxed"], extensions)
    return Model(main.operands, main.operations, main.inputIndexes, main.outputIndexes, f["values"], f["pools"],
                 f["relaxed"], extensions)


MODEL = Field(_model_enc, _model_dec)


# ---- requests and results -----------------------------------------------------------------------
def _argument_dec(v, rx) -> RequestArgument:
    _check(isinstance(v, list) and len(v) == 3, "an argument is [hasNoValue, location, dimensions]")
    loc = v[1]
    _check(isinstance(loc, list) and len(loc) == 3, "a location is [poolIndex, offset, length]")
    return RequestArgument(BOOL.decode(v[0], rx), DataLocation(*(U32.decode(x, rx) for x in loc)),
                           array(U32).decode(v[2], rx))


ARGUMENT = Field(lambda a, _tx: [bool(a.hasNoValue), [int(a.location.poolIndex), int(a.location.offset),
                                                       int(a.location.length)], [int(d) for d in a.dimensions]],
                 _argument_dec)
REQUEST = record({"inputs": array(ARGUMENT), "outputs": array(ARGUMENT), "pools": POOLS}, Request,
                 lambda r: {"inputs": r.inputs, "outputs": r.outputs, "pools": r.pools})


def _shape_dec(v, rx) -> OutputShape:
    _check(isinstance(v, list) and len(v) == 2, "a shape is [dimensions, isSufficient]")
    return OutputShape(array(U32).decode(v[0], rx), BOOL.decode(v[1], rx))


SHAPE = Field(lambda s, _tx: [[int(d) for d in s.dimensions], bool(s.isSufficient)], _shape_dec)


def _timing_dec(v, rx) -> Timing:
    _check(isinstance(v, list) and len(v) == 2, "a timing is [timeOnDevice, timeInDriver]")
    return Timing(U64.decode(v[0], rx), U64.decode(v[1], rx))


TIMING = Field(lambda t, _tx: [int(t.timeOnDevice), int(t.timeInDriver)], _timing_dec)


# ---- FMQ descriptors ----------------------------------------------------------------------------
def _queue_enc(d: QueueDescriptor, tx: list[int]) -> list:
    tx.extend(d.fds())
    return [int(d.element_size), int(d.capacity), bool(d.blocking)]


def _queue_dec(v, rx: Received) -> QueueDescriptor:
    _check(isinstance(v, list) and len(v) == 3, "a queue is [element_size, capacity, blocking]")
    size, capacity, blocking = integer(1, 1 << 16).decode(v[0], rx), U32.decode(v[1], rx), BOOL.decode(v[2], rx)
    _check(0 < size * capacity <= MAX_QUEUE_BYTES, "a queue too large")
    try:  # the fds stay the message's: the burst attaches its own copies
        return QueueDescriptor.from_parts({"element_size": size, "capacity": capacity, "blocking": blocking},
                                          rx.take(3 if blocking else 1))
    except QueueError as e:
        raise WireError(str(e)) from e


QUEUE = Field(_queue_enc, _queue_dec)


# ---- capabilities -------------------------------------------------------------------------------
def _perf_dec(v, _rx) -> PerformanceInfo:
    _check(isinstance(v, list) and len(v) == 2 and all(type(x) is float for x in v),
           "a performance is [execTime, powerUsage], two floats")
    return PerformanceInfo(*v)


PERF = Field(lambda p, _tx: [float(p.execTime), float(p.powerUsage)], _perf_dec)
_OPERAND_TYPE = enum(OperandType)


def _operand_perf_dec(v, rx) -> OperandPerformance:
    _check(isinstance(v, list) and len(v) == 2, "an operand performance is [type, performance]")
    return OperandPerformance(_OPERAND_TYPE.decode(v[0], rx), PERF.decode(v[1], rx))


OPERAND_PERF = Field(lambda o, tx: [int(o.type), PERF.encode(o.info, tx)], _operand_perf_dec)
_CAPS_CLASSES = (Capabilities_1_0, Capabilities_1_1, Capabilities_1_2, Capabilities)  # getCapabilities 1.0-1.3


def _caps_record(cls) -> Field:
    names = [f.name for f in dataclass_fields(cls)]
    fields = {n: array(OPERAND_PERF, 256) if n == "operandPerformance" else PERF for n in names}
    return record(fields, cls, lambda c: {n: getattr(c, n) for n in names})


_CAPS_RECORDS = [_caps_record(cls) for cls in _CAPS_CLASSES]


def _caps_enc(c, tx: list[int]) -> list:
    kind = _CAPS_CLASSES.index(type(c))  # ValueError for anything else: encode() says WireError
    return [kind, _CAPS_RECORDS[kind].encode(c, tx)]


def _caps_dec(v, rx: Received):
    _check(isinstance(v, list) and len(v) == 2 and v[0] in range(len(_CAPS_CLASSES)), "capabilities are [kind, map]")
    return _CAPS_RECORDS[v[0]].decode(v[1], rx)


CAPABILITIES = Field(_caps_enc, _caps_dec)
_TYPE_INFO = record({"type": U32, "isTensor": BOOL, "byteSize": U32}, OperandTypeInformation,
                    lambda t: {"type": t.type, "isTensor": t.isTensor, "byteSize": t.byteSize})
EXTENSION = record({"name": text(1024), "operandTypes": array(_TYPE_INFO, 1 << 16)}, Extension,
                   lambda e: {"name": e.name, "operandTypes": e.operandTypes})
def _role_dec(v, rx) -> BufferRole:
    _check(isinstance(v, list) and len(v) == 3 and type(v[2]) is float, "a role is [modelIndex, ioIndex, frequency]")
    return BufferRole(U32.decode(v[0], rx), U32.decode(v[1], rx), v[2])


ROLES = array(Field(lambda r, _tx: [int(r.modelIndex), int(r.ioIndex), float(r.frequency)], _role_dec), 1 << 12)
def _handle_enc(h, tx: list[int]) -> list:
    if not isinstance(h, NativeHandle) or not all(type(fd) is int and fd >= 0 for fd in h.fds):
        raise WireError(f"{h!r} is not a handle of open fds")
    tx.extend(h.fds)
    return [len(h.fds), [int(i) for i in h.ints]]


def _handle_parts(v, rx: Received) -> tuple[int, list[int]]:
    _check(isinstance(v, list) and len(v) == 2, "a handle is [number of fds, ints]")
    return integer(0, 4).decode(v[0], rx), array(I32, 64).decode(v[1], rx)


def _handle_dec(v, rx: Received) -> NativeHandle:
    n, ints = _handle_parts(v, rx)
    return NativeHandle(rx.take(n), ints)  # the fds stay the message's: the driver dups what it keeps


HANDLES = array(Field(_handle_enc, _handle_dec), 32)  # a cache's vec<handle> (at most 32 files)


def _kept_handle_dec(v, rx: Received) -> NativeHandle:
    n, ints = _handle_parts(v, rx)
    return NativeHandle(rx.keep(n), ints)


KEPT_HANDLE = Field(_handle_enc, _kept_handle_dec)  # a handle whose fds the receiver keeps (and closes)


def _token_dec(v, _rx) -> bytes:
    _check(isinstance(v, bytes) and len(v) <= 64, "a cache token is at most 64 bytes")
    return v


CACHE_TOKEN = Field(lambda v, _tx: bytes(v), _token_dec)
_CACHES = {"model_cache": optional(HANDLES), "data_cache": optional(HANDLES), "token": optional(CACHE_TOKEN)}
HAL_VERSION = integer(10, 13)  # which IDevice / IPreparedModel method: 10 is 1.0, 13 is 1.3
_TIMED = {"deadline": optional(U64), "loop_timeout": optional(U64)}  # OptionalTimePoint / TimeoutDuration, ns


# ---- the messages -------------------------------------------------------------------------------
CALLS: dict[str, dict[str, Field]] = {
    "prepare": {"model": MODEL, "preference": enum(ExecutionPreference)},
    "configure": {"model": ID, "burst": ID, "request_q": QUEUE, "result_q": QUEUE},
    "freeMemory": {"burst": ID, "slot": I32},
    "closeBurst": {"burst": ID},
    "execute": {"model": ID, "request": REQUEST, "measure": enum(MeasureTiming)},
    "release": {"model": ID},
    "getMemories": {"burst": ID, "slots": array(I32)},  # service -> client
    # nngpu.connect's IDevice proxy. With a callback id, prepare and executeAsync answer the
    # launch status at once and notify later with a call back: prepared / executed.
    "info": {},
    "select": {"device": text(MAX_NAME)},  # which of the service's devices this client uses
    "capabilities": {"version": HAL_VERSION},
    "supported": {"model": MODEL, "version": HAL_VERSION},
    "executeAsync": {"model": ID, "request": REQUEST, "measure": enum(MeasureTiming), "version": HAL_VERSION,
                     "callback": ID, **_TIMED},
    "prepared": {"callback": ID, "status": STATUS, "model": optional(ID)},  # service -> client
    "executed": {"callback": ID, "status": STATUS, "shapes": optional(array(SHAPE)),  # service -> client
                 "timing": optional(TIMING)},
}
CALLS.update({  # IDevice::allocate and IBuffer: a buffer is named by its device token
    "allocate": {"dimensions": array(U32, 1 << 10), "models": array(ID, 1 << 10), "inputRoles": ROLES,
                 "outputRoles": ROLES},
    "copyTo": {"buffer": U32, "memory": MEMORY},
    "copyFrom": {"buffer": U32, "memory": MEMORY, "dimensions": array(U32, 1 << 10)},
    "freeBuffer": {"buffer": U32},
})
CALLS["prepare"].update(version=optional(HAL_VERSION), priority=optional(enum(Priority)), callback=optional(ID),
                        deadline=optional(U64), **_CACHES)
CALLS["executeFenced"] = {"model": ID, "request": REQUEST, "wait_for": HANDLES, "measure": enum(MeasureTiming),
                          "duration": optional(U64), **_TIMED}
CALLS["fencedInfo"] = {"fenced": ID}  # IFencedExecutionCallback::getExecutionInfo
CALLS["releaseFenced"] = {"fenced": ID}
CALLS["prepareFromCache"] = {"version": integer(12, 13), "callback": ID, "deadline": optional(U64), **_CACHES}
CALLS["execute"].update(version=optional(HAL_VERSION), **_TIMED)
# The AIDL IExecution and IBurst, kept in the service: a reusable execution is checked and its
# pools registered once, a burst keeps each token's memory until releaseToken (-1: no token).
MEMORY_TOKEN = integer(-1, (1 << 63) - 1)
CALLS.update({
    "createExecution": {"model": ID, "request": REQUEST, "measure": enum(MeasureTiming),
                        "loop_timeout": optional(U64)},
    "runExecution": {"execution": ID, "deadline": optional(U64)},
    "fencedExecution": {"execution": ID, "wait_for": HANDLES, "deadline": optional(U64), "duration": optional(U64)},
    "releaseExecution": {"execution": ID},
    "openTokenBurst": {"model": ID},
    "runTokenBurst": {"burst": ID, "request": REQUEST, "tokens": array(MEMORY_TOKEN, 1 << 12),
                      "measure": enum(MeasureTiming), **_TIMED},
    "releaseToken": {"burst": ID, "token": MEMORY_TOKEN},
    "closeTokenBurst": {"burst": ID},
})
_REPLY = {"status": STATUS, "error": optional(text(MAX_ERROR))}
REPLIES: dict[str, dict[str, Field]] = {op: dict(_REPLY) for op in CALLS}
REPLIES["prepare"]["model"] = optional(ID)
REPLIES["execute"].update(shapes=optional(array(SHAPE)), timing=optional(TIMING))
REPLIES["getMemories"]["memories"] = optional(array(MEMORY))
REPLIES["info"].update(version_string=optional(text(MAX_ERROR)), type=optional(enum(DeviceType)),
                       device_status=optional(enum(DeviceStatus)), extensions=optional(array(EXTENSION, 1024)))
REPLIES["capabilities"]["capabilities"] = optional(CAPABILITIES)
REPLIES["supported"]["supported"] = optional(array(BOOL))
REPLIES["allocate"]["token"] = optional(U32)
for _op in ("executeFenced", "fencedExecution"):
    REPLIES[_op].update(fence=optional(KEPT_HANDLE), fenced=optional(ID))
for _op in ("runExecution", "runTokenBurst"):
    REPLIES[_op].update(shapes=optional(array(SHAPE)), timing=optional(TIMING))
REPLIES["createExecution"]["execution"] = optional(ID)
REPLIES["openTokenBurst"]["burst"] = optional(ID)
REPLIES["fencedInfo"].update(info_status=optional(STATUS), launched=optional(TIMING), after_fences=optional(TIMING))
REPLIES["info"]["cache_files"] = optional(array(U32, 2))  # getNumberOfCacheFilesNeeded
REPLIES["info"].update(name=optional(text(MAX_NAME)), devices=optional(array(text(MAX_NAME), MAX_SERVED)))


def encode(fields: dict[str, Field], values: dict) -> tuple[dict, list[int]]:
    """(plain map, fds to attach) of a message's values; WireError if one does not fit."""
    unknown = set(values) - set(fields)
    _check(not unknown, f"unknown fields {sorted(unknown)}")
    tx: list[int] = []
    try:
        plain = {k: fields[k].encode(v, tx) for k, v in values.items() if v is not None}
    except (AttributeError, TypeError, ValueError, OverflowError) as e:
        raise WireError(f"a value that does not encode: {e}") from e
    return plain, tx


def decode(fields: dict[str, Field], plain: Any, fds: list[int]) -> tuple[dict, Received]:
    """A message's values and its Received (whose leftover fds the caller closes after use);
    WireError, with every fd closed once, if the message does not fit its schema."""
    rx = Received(fds)
    try:
        values = decode_fields(fields, plain, rx)
        rx.finish()
    except WireError:
        rx.close(memories_too=True)
        raise
    except (ValueError, TypeError, LookupError, OverflowError, MemoryError_) as e:
        rx.close(memories_too=True)
        raise WireError(f"{type(e).__name__}: {e}") from e
    return values, rx
