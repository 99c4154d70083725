"""AIDL values to the driver core's (the HIDL 1.3 structs the core runs on): models, requests,
memories, deadlines, durations, cache handles. Every bad value raises
ServiceSpecificError(INVALID_ARGUMENT) naming the field; the core then validates the rest as
it does for HIDL, so no rule is written twice."""
from __future__ import annotations

import functools
import mmap
import os
import time
from typing import Callable, TypeVar

from ..hal.aidl import types as A
from ..hal.aidl.types import MAXIMUM_LOOP_TIMEOUT_DURATION_NS, NO_TIME, ServiceSpecificError
from ..hal.types import (
    BufferDesc,
    BufferRole,
    DataLocation,
    ErrorStatus,
    MeasureTiming,
    MemoryPool,
    Model_1_3,
    NativeHandle,
    Operand,
    Operation,
    OptionalTimeoutDuration,
    OptionalTimePoint,
    Request,
    RequestArgument,
    Subgraph,
)
from ..memory import Memory

_INT64_MAX = (1 << 63) - 1
_INT32_MAX = (1 << 31) - 1      # AIDL int: pool indexes, tokens, fds
T_ = TypeVar("T_")


def invalid(message: str) -> ServiceSpecificError:
    return ServiceSpecificError(ErrorStatus.INVALID_ARGUMENT, message)


def _malformed_is_invalid(fn: Callable[..., T_]) -> Callable[..., T_]:
    """A parcelable whose fields hold the wrong kinds of value (None for a list, an int for a
    struct) is an invalid argument, not a crash: what the checks below do not name, this does."""
    @functools.wraps(fn)
    def checked(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except ServiceSpecificError:
            raise
        except (TypeError, AttributeError, ValueError, OverflowError) as e:
            raise invalid(f"malformed {fn.__name__}: {type(e).__name__}: {e}") from e
    return checked


def _int(value, what: str, low: int = 0, high: int = _INT64_MAX) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise invalid(f"{what} is {value!r}, not an integer in [{low}, {high}]")
    return value


def _one_member(union, members: tuple[str, ...], what: str) -> str:
    """The name of the one member of an AIDL union that is set."""
    chosen = [m for m in members if getattr(union, m, None) is not None]
    if len(chosen) != 1:
        raise invalid(f"{what} must hold exactly one of {', '.join(members)}, holds {len(chosen)}")
    return chosen[0]


def _dup(fd, what: str) -> int:
    """The driver's own copy of a caller's fd, as a service receiving a ParcelFileDescriptor
    holds one: the caller may close its fd at once, and a number it reuses never reaches here."""
    fd = _int(fd, what, 0, _INT32_MAX)
    try:
        return os.dup(fd)
    except OSError as e:
        raise invalid(f"{what} {fd} is not an open file descriptor: {e.strerror}") from e


@_malformed_is_invalid
def memory(value, what: str = "memory") -> Memory:
    """An AIDL Memory as a core Memory over a copy of the caller's fd."""
    if not isinstance(value, A.Memory):
        raise invalid(f"{what} is not a Memory: {type(value).__name__}")
    kind = _one_member(value, ("ashmem", "mappableFile", "hardwareBuffer"), what)
    if kind == "hardwareBuffer":
        raise invalid(f"{what}: hardwareBuffer (AHardwareBuffer) memories do not exist on this platform")
    if kind == "ashmem":
        a = value.ashmem
        size = _int(a.size, f"{what}.ashmem.size")
        return Memory("ashmem", size, _dup(a.fd, f"{what}.ashmem.fd"))
    f = value.mappableFile
    prot = _int(f.prot, f"{what}.mappableFile.prot")
    if not prot & mmap.PROT_READ or prot & ~(mmap.PROT_READ | mmap.PROT_WRITE):
        raise invalid(f"{what}.mappableFile.prot {prot:#x} must be PROT_READ, optionally with PROT_WRITE")
    length, offset = _int(f.length, f"{what}.mappableFile.length"), _int(f.offset, f"{what}.mappableFile.offset")
    return Memory("mmap_fd", length, _dup(f.fd, f"{what}.mappableFile.fd"), offset)


def _location(value, what: str, padding_allowed: bool) -> DataLocation:
    if not isinstance(value, A.DataLocation):
        raise invalid(f"{what} is not a DataLocation: {type(value).__name__}")
    padding = _int(value.padding, f"{what}.padding")
    if padding and not padding_allowed:
        raise invalid(f"{what}.padding is {padding}: an operand's must be 0")
    return DataLocation(_int(value.poolIndex, f"{what}.poolIndex", 0, _INT32_MAX),
                        _int(value.offset, f"{what}.offset"), _int(value.length, f"{what}.length"))


def _subgraph(value, what: str) -> Subgraph:
    if not isinstance(value, A.Subgraph):
        raise invalid(f"{what} is not a Subgraph: {type(value).__name__}")
    operations = [Operation(op.type, list(op.inputs), list(op.outputs)) for op in value.operations]
    consumers = [0] * len(value.operands)
    for op in operations:
        for i in op.inputs:
            if isinstance(i, int) and 0 <= i < len(consumers):
                consumers[i] += 1     # an index out of range is the core validator's to name
    operands = []
    for n, o in enumerate(value.operands):
        if not isinstance(o, A.Operand):
            raise invalid(f"{what}.operands[{n}] is not an Operand: {type(o).__name__}")
        operands.append(Operand(o.type, list(o.dimensions), consumers[n], o.scale, o.zeroPoint, o.lifetime,
                                _location(o.location, f"{what}.operands[{n}].location", False), o.extraParams))
    return Subgraph(operands, operations, list(value.inputIndexes), list(value.outputIndexes))


@_malformed_is_invalid
def model(value) -> Model_1_3:
    if not isinstance(value, A.Model):
        raise invalid(f"model is not a Model: {type(value).__name__}")
    return Model_1_3(_subgraph(value.main, "model.main"),
                     [_subgraph(g, f"model.referenced[{k}]") for k, g in enumerate(value.referenced)],
                     bytes(value.operandValues), [memory(p, f"model.pools[{k}]") for k, p in enumerate(value.pools)],
                     bool(value.relaxComputationFloat32toFloat16), list(value.extensionNameToPrefix))


def _argument(value, what: str, pool_sizes: list[int | None]) -> RequestArgument:
    if not isinstance(value, A.RequestArgument):
        raise invalid(f"{what} is not a RequestArgument: {type(value).__name__}")
    where = _location(value.location, f"{what}.location", True)
    padding = value.location.padding
    if value.hasNoValue or not 0 <= where.poolIndex < len(pool_sizes):
        if padding:
            raise invalid(f"{what}.location.padding is {padding} where no memory region is named")
    else:
        size = pool_sizes[where.poolIndex]
        if size is None and padding:
            raise invalid(f"{what}.location.padding is {padding} for a driver-managed buffer: must be 0")
        if size is not None and where.offset + where.length + padding > size:
            raise invalid(f"{what}.location: offset + length + padding = "
                          f"{where.offset + where.length + padding} past the pool's {size} bytes")
    return RequestArgument(bool(value.hasNoValue), where, list(value.dimensions))


@_malformed_is_invalid
def request(value) -> Request:
    if not isinstance(value, A.Request):
        raise invalid(f"request is not a Request: {type(value).__name__}")
    pools: list[MemoryPool] = []
    sizes: list[int | None] = []
    for k, p in enumerate(value.pools):
        if not isinstance(p, A.RequestMemoryPool):
            raise invalid(f"request.pools[{k}] is not a RequestMemoryPool: {type(p).__name__}")
        if _one_member(p, ("pool", "token"), f"request.pools[{k}]") == "token":
            pools.append(MemoryPool(token=_int(p.token, f"request.pools[{k}].token", 0, _INT32_MAX)))
            sizes.append(None)
        else:
            m = memory(p.pool, f"request.pools[{k}].pool")
            pools.append(MemoryPool(hidlMemory=m))
            sizes.append(m.size)
    return Request([_argument(a, f"request.inputs[{k}]", sizes) for k, a in enumerate(value.inputs)],
                   [_argument(a, f"request.outputs[{k}]", sizes) for k, a in enumerate(value.outputs)], pools)


def deadline(ns, what: str = "deadlineNs") -> OptionalTimePoint:
    """A CLOCK_BOOTTIME deadline (-1: none) as a time point on the core's steady clock."""
    ns = _int(ns, what, NO_TIME)
    if ns == NO_TIME:
        return OptionalTimePoint()
    # Both clocks advance together; they differ by the time spent suspended.
    steady = ns - time.clock_gettime_ns(time.CLOCK_BOOTTIME) + time.monotonic_ns()
    return OptionalTimePoint(max(0, steady))


def loop_timeout(ns) -> OptionalTimeoutDuration:
    ns = _int(ns, "loopTimeoutDurationNs", NO_TIME, MAXIMUM_LOOP_TIMEOUT_DURATION_NS)
    return OptionalTimeoutDuration(None if ns == NO_TIME else ns)


def duration(ns, what: str = "durationNs") -> OptionalTimeoutDuration:
    ns = _int(ns, what, NO_TIME)
    return OptionalTimeoutDuration(None if ns == NO_TIME else ns)


@_malformed_is_invalid
def handles(fds, what: str) -> list[NativeHandle]:
    """ParcelFileDescriptors (cache files, sync fences) as the core's one-fd handles."""
    if not isinstance(fds, (list, tuple)):
        raise invalid(f"{what} is not a list of file descriptors")
    return [NativeHandle([_int(fd, f"{what}[{k}]", 0, _INT32_MAX)]) for k, fd in enumerate(fds)]


def token(value) -> bytes:
    if not isinstance(value, (bytes, bytearray)) or len(value) != A.BYTE_SIZE_OF_CACHE_TOKEN:
        raise invalid(f"the cache token must be {A.BYTE_SIZE_OF_CACHE_TOKEN} bytes")
    return bytes(value)


def measure(value, what: str = "measureTiming") -> MeasureTiming:
    if not isinstance(value, bool):
        raise invalid(f"{what} is {value!r}, not a boolean")
    return MeasureTiming.YES if value else MeasureTiming.NO


@_malformed_is_invalid
def hints(pairs, names_to_prefixes, what: str) -> None:
    """Check compilation or execution hints and their extension prefixes. nngpu knows no
    extension, so valid hints are then ignored, as the spec says of unknown ones."""
    prefixes = set()
    names = set()
    for k, entry in enumerate(names_to_prefixes):
        name, prefix = getattr(entry, "name", None), getattr(entry, "prefix", None)
        if not isinstance(name, str) or not name:
            raise invalid(f"extensionNameToPrefix[{k}].name is {name!r}")
        _int(prefix, f"extensionNameToPrefix[{k}].prefix", 0, (1 << A.EXTENSION_TYPE_HIGH_BITS_PREFIX) - 1)
        if name in names or prefix in prefixes:
            raise invalid(f"extensionNameToPrefix[{k}] repeats a name or prefix")
        names.add(name)
        prefixes.add(prefix)
    tokens = set()
    for k, pair in enumerate(pairs):
        if not isinstance(pair, A.TokenValuePair) or not isinstance(pair.value, (bytes, bytearray)):
            raise invalid(f"{what}[{k}] is not a TokenValuePair with a byte value")
        t = _int(pair.token, f"{what}[{k}].token", 0, _INT32_MAX)
        if t in tokens:
            raise invalid(f"{what}[{k}]: token {t:#x} given twice")
        prefix = t >> A.EXTENSION_TYPE_LOW_BITS_TYPE
        if prefix not in prefixes:
            raise invalid(f"{what}[{k}]: token {t:#x} has prefix {prefix:#x}, not in extensionNameToPrefix")
        tokens.add(t)


def execution_config(config) -> tuple[MeasureTiming, OptionalTimeoutDuration]:
    if not isinstance(config, A.ExecutionConfig):
        raise invalid(f"config is not an ExecutionConfig: {type(config).__name__}")
    hints(config.executionHints, config.extensionNameToPrefix, "config.executionHints")
    return measure(config.measureTiming, "config.measureTiming"), loop_timeout(config.loopTimeoutDurationNs)


def identifier(value, what: str, allow_none: bool = True) -> int | None:
    """A burst's memory identifier token: non-negative, or -1 (no identity) where allowed."""
    low = -1 if allow_none else 0
    value = _int(value, what, low)
    return None if value == -1 else value


@_malformed_is_invalid
def allocation(desc, prepared_models, input_roles, output_roles, unwrap: Callable[[object], object]) -> tuple:
    """IDevice::allocate's arguments for the core: (BufferDesc, prepared models, input roles,
    output roles); `unwrap` gives the core prepared model behind an AIDL one."""
    if not isinstance(desc, A.BufferDesc):
        raise invalid(f"desc is not a BufferDesc: {type(desc).__name__}")
    for what, values in (("preparedModels", prepared_models), ("inputRoles", input_roles),
                         ("outputRoles", output_roles)):
        if not isinstance(values, (list, tuple)):
            raise invalid(f"{what} is not a list")
    roles = []
    for what, values in (("inputRoles", input_roles), ("outputRoles", output_roles)):
        if not all(isinstance(r, A.BufferRole) for r in values):
            raise invalid(f"{what} holds something other than BufferRoles")
        roles.append([BufferRole(r.modelIndex, r.ioIndex, r.probability) for r in values])
    models = [unwrap(p.preparedModel) if isinstance(p, A.IPreparedModelParcel) else p for p in prepared_models]
    return BufferDesc(list(desc.dimensions)), models, roles[0], roles[1]
