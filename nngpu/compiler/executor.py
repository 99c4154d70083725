"""The executor contract: what a prepared model runs on, the reference interpreter and device
plans alike."""
from __future__ import annotations

from typing import Any, Mapping, Protocol, Sequence

import numpy as np

from ..backends.base import DeviceValue
from ..hal.types import Model_1_3

Value = np.ndarray | DeviceValue


class Executor(Protocol):
    model: Model_1_3

    def execute(self, inputs: Sequence[Value | None], out_buffers: Mapping[int, Any],
                deadline_ns: int | None = None) -> list[Value]:
        """The main graph's outputs for these input values (None: an omitted input). An output
        whose position is in `out_buffers` (an IBuffer) may be written into that buffer's device
        storage and returned as a DeviceValue; every other output is a host array.
        `deadline_ns` (time.monotonic_ns) bounds WHILE loops. Raises ExecutionError."""
        ...

    def placement(self) -> tuple[int, int]:
        """(operations the last execution ran in device kernels, operations it ran on the host)."""
        ...
