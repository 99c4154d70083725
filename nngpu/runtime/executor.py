"""The executor contract: what a prepared model runs on, the reference interpreter and device
plans alike."""
from __future__ import annotations

from typing import Callable, Protocol, Sequence

import numpy as np

from ..backends.base import DeviceValue
from ..hal.types import Model_1_3

Value = np.ndarray | DeviceValue

# Takes every output value of one execution at once, while they are valid (a DeviceValue may
# live in the executor's own buffers): the driver checks that all fit, then writes them.
Deliver = Callable[[list[Value]], None]


class Executor(Protocol):
    model: Model_1_3

    def execute(self, inputs: Sequence[Value | None], deliver: Deliver | None = None,
                deadline_ns: int | None = None) -> list[Value]:
        """Run the main graph on these input values (None: an omitted input) and return its
        outputs. With `deliver`, they are handed to it first, where a device plan's are still on
        the device (after the return a DeviceValue's bytes may belong to the next execution);
        without, they are host arrays. `deadline_ns` (time.monotonic_ns) bounds WHILE loops.
        Raises ExecutionError."""
        ...

    def placement(self) -> tuple[int, int]:
        """(operations the last execution ran in device kernels, operations it ran on the host)."""
        ...

    def launches(self) -> int:
        """Device launches of the last execution: generated and hand-written kernels, GEMM calls
        (a replayed CUDA graph counts the launches it holds)."""
        ...
