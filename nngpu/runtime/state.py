"""One execution's values as a device plan runs it."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..backends.base import DeviceValue
from ..compiler.steps import Known
from ..hal.types import ErrorStatus, Subgraph
from .interpreter import ExecutionError


class ExecutionState:
    """Host arrays by operand, the inputs given as device values, and the deadline."""

    def __init__(self, graph: Subgraph, inputs: Sequence, deadline_ns: int | None) -> None:
        self.host: dict[int, np.ndarray | None] = {}
        self.device_inputs: dict[int, DeviceValue] = {}
        self.deadline_ns = deadline_ns
        for idx, value in zip(graph.inputIndexes, inputs):
            if isinstance(value, DeviceValue):
                self.device_inputs[idx] = value
            else:
                self.host[idx] = value  # None: an input the request leaves without a value

    def lookup(self, t: int, known: Known) -> np.ndarray | None:
        """Operand t's value on the host: computed there, known to the plan, or an input (None
        for one the request left without a value). A relaxed temporary downloaded as its float16
        storage (Known.half) is float32 again, as its type says, for the host steps reading it."""
        if t in self.host:
            value = self.host[t]
            if t in known.half and value is not None and value.dtype == np.float16:
                value = self.host[t] = value.astype(np.float32)
            return value
        value = known.values.get(t)
        if value is not None:
            return value
        if t in self.device_inputs:
            self.host[t] = self.device_inputs[t].to_host()
            return self.host[t]
        raise ExecutionError(ErrorStatus.GENERAL_FAILURE, f"operand {t} has no host value")
