"""What the AIDL tests share."""
from __future__ import annotations

from typing import Callable

from nngpu.hal.aidl.types import ServiceSpecificError
from nngpu.hal.types import ErrorStatus


def raised(call: Callable[[], object]) -> ErrorStatus | None:
    """The ErrorStatus an AIDL call raised, None when it returned."""
    try:
        call()
    except ServiceSpecificError as e:
        return e.status
    return None
