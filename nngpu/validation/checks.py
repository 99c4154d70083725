"""Type-safe accessors for HAL fields: a value of the wrong Python type or out of its HIDL range
becomes a ValidationError naming the field, never a TypeError deep inside a rule."""
from __future__ import annotations

import math
import numbers
from typing import Any, Sequence

from .errors import ValidationError

UINT32_MAX = 0xFFFF_FFFF
INT32_MIN, INT32_MAX = -(1 << 31), (1 << 31) - 1

# hidl_memory names a 1.0-1.3 driver maps (AOSP validatePools); nngpu.memory creates the first two.
MEMORY_NAMES = frozenset({"ashmem", "mmap_fd", "hardware_buffer_blob", "hardware_buffer"})


def is_int(x: Any) -> bool:
    """An integer that is not a bool (IntEnum members and numpy integers count). A plain int
    first: the ABC check costs about 0.3 us, and a request's fields take it a few dozen times."""
    return type(x) is int or (isinstance(x, numbers.Integral) and not isinstance(x, bool))


def uint32(x: Any, what: str) -> int:
    if not is_int(x) or not 0 <= x <= UINT32_MAX:
        raise ValidationError(f"{what} must be a uint32, got {x!r}")
    return int(x)


def int32(x: Any, what: str) -> int:
    if not is_int(x) or not INT32_MIN <= x <= INT32_MAX:
        raise ValidationError(f"{what} must be an int32, got {x!r}")
    return int(x)


def real(x: Any, what: str) -> float:
    """A float field (ints accepted, as a C++ float would take them)."""
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        raise ValidationError(f"{what} must be a float, got {x!r}")
    return float(x)


def finite_positive(x: float) -> bool:
    return math.isfinite(x) and x > 0.0


def boolean(x: Any, what: str) -> bool:
    if not isinstance(x, bool):
        raise ValidationError(f"{what} must be a bool, got {x!r}")
    return x


def seq(x: Any, what: str) -> Sequence:
    if not isinstance(x, (list, tuple)):
        raise ValidationError(f"{what} must be a list, got {type(x).__name__}")
    return x


def uint32_list(x: Any, what: str) -> list[int]:
    return [uint32(v, f"{what}[{i}]") for i, v in enumerate(seq(x, what))]


def byte_buffer_size(x: Any, what: str) -> int:
    if not isinstance(x, (bytes, bytearray, memoryview)):
        raise ValidationError(f"{what} must be bytes, got {type(x).__name__}")
    return x.nbytes if isinstance(x, memoryview) else len(x)


def memory_size(pool: Any, what: str) -> int:
    """The byte size of a hidl_memory-like pool (nngpu.memory.Memory), checking it is usable."""
    size = getattr(pool, "size", None)
    if pool is None or not callable(getattr(pool, "view", None)) or not is_int(size) or size < 0:
        raise ValidationError(f"{what} is not a valid memory")
    name = getattr(pool, "name", None)
    if name is not None and name not in MEMORY_NAMES:
        raise ValidationError(f"{what} has unsupported memory type {name!r}")
    fd = getattr(pool, "fd", 0)
    if is_int(fd) and fd < 0:
        raise ValidationError(f"{what} is a closed memory")
    return int(size)


def location_fields(loc: Any, what: str) -> tuple[int, int, int]:
    """(poolIndex, offset, length) of a DataLocation, each a uint32."""
    try:
        fields = (loc.poolIndex, loc.offset, loc.length)
    except AttributeError:
        raise ValidationError(f"{what} is not a DataLocation") from None
    pool, offset, length = (uint32(v, f"{what}.{n}") for v, n in zip(fields, ("poolIndex", "offset", "length")))
    return pool, offset, length
