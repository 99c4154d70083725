"""The AIDL IBuffer over the driver core's device buffer: copies to and from a Memory."""
from __future__ import annotations

from ..hal.aidl.interfaces import IBuffer
from . import from_core, to_core


class AidlBuffer(IBuffer):
    def __init__(self, core):
        self.core = core

    def copyFrom(self, src, dimensions) -> None:
        if not isinstance(dimensions, (list, tuple)):
            raise to_core.invalid("dimensions is not a list")
        from_core.raise_for(self.core.copyFrom(to_core.memory(src, "src"), list(dimensions)), "copyFrom was refused")

    def copyTo(self, dst) -> None:
        from_core.raise_for(self.core.copyTo(to_core.memory(dst, "dst")), "copyTo was refused")
