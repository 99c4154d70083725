"""What every executor of one prepared model reads and nobody writes: the model, the HAL version
it was prepared for, its subgraphs and their constants, read once."""
from __future__ import annotations

import numpy as np

from ..hal.types import Model_1_3, OperandLifeTime, Subgraph
from ..modelutil import read_constant
from ..ops.registry import HalVersion


def _constants(model: Model_1_3, graph: Subgraph) -> dict[int, np.ndarray | None]:
    out: dict[int, np.ndarray | None] = {}
    for idx, operand in enumerate(graph.operands):
        if operand.lifetime in (OperandLifeTime.CONSTANT_COPY, OperandLifeTime.CONSTANT_REFERENCE):
            arr = read_constant(model, operand)
            arr.flags.writeable = False  # kernels must not modify weights shared by executions
            out[idx] = arr
        elif operand.lifetime == OperandLifeTime.SUBGRAPH:
            out[idx] = None
    return out


class ModelContext:
    def __init__(self, model: Model_1_3, version: HalVersion = HalVersion.V1_3) -> None:
        self.model = model
        self.version = version
        self.relaxed = model.relaxComputationFloat32toFloat16
        self.graphs = [model.main, *model.referenced]
        self.constants = [_constants(model, g) for g in self.graphs]

    def constant(self, operand_index: int, graph_index: int = 0) -> np.ndarray | None:
        return self.constants[graph_index].get(operand_index)
