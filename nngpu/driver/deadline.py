"""HAL 1.3 deadlines: an OptionalTimePoint is a time on the steady clock (CLOCK_MONOTONIC,
Python's time.monotonic_ns) by which a prepare or an execution must complete."""
from __future__ import annotations

import time

from ..hal.types import OptionalTimePoint
from ..validation import ValidationError

UNLIMITED = 2**64 - 1  # the largest time point: what VTS passes for "no limit"


def deadline_ns(point: OptionalTimePoint | None) -> int | None:
    """The deadline in time.monotonic_ns units, None for none (or an unlimited one)."""
    if point is None:
        return None
    if not isinstance(point, OptionalTimePoint):
        raise ValidationError(f"deadline is not an OptionalTimePoint: {type(point).__name__}")
    ns = point.nanosecondsSinceEpoch
    if ns is None:
        return None
    if isinstance(ns, bool) or not isinstance(ns, int) or not 0 <= ns <= UNLIMITED:
        raise ValidationError(f"deadline {ns!r} is not a uint64 time point")
    return None if ns == UNLIMITED else ns


def passed(deadline: int | None) -> bool:
    return deadline is not None and time.monotonic_ns() >= deadline
