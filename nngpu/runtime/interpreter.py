"""The reference graph interpreter: runs a subgraph's operations in order with numpy kernels, on
the data of a ModelContext.

The numpy backend executes it precompiled (numpy_plan.NumpyPlan), which runs through it the
operations it does not bind; device plans run their host operations through it, and the
compiler folds constants with it. IF / WHILE reach referenced subgraphs through the OpContext
executor."""
from __future__ import annotations

import logging
from typing import Callable, Sequence

import numpy as np

from .. import profiling
from ..backends.base import DeviceValue
from ..hal.types import ErrorStatus, Model_1_3, Subgraph
from ..ops import load_all
from ..ops.lib.dtypes import dtype_of, is_tensor
from ..ops.registry import HalVersion, OpContext, OpError, lookup
from .model_context import ModelContext

log = logging.getLogger("nngpu.interpreter")


class ExecutionError(Exception):
    def __init__(self, status: ErrorStatus, reason: str):
        super().__init__(reason)
        self.status = status


class GraphRunner:
    """A model's executable form on the reference path. It is an Executor (runtime/executor.py)."""

    def __init__(self, model: Model_1_3 | ModelContext, version: HalVersion = HalVersion.V1_3):
        load_all()
        self.context = model if isinstance(model, ModelContext) else ModelContext(model, version)
        self.model = self.context.model

    def execute(self, inputs: Sequence, deliver: Callable[[list[np.ndarray]], None] | None = None,
                deadline_ns: int | None = None) -> list[np.ndarray]:
        """The Executor contract: device values are read to the host, outputs are host arrays."""
        with profiling.execution():
            host = [v.to_host() if isinstance(v, DeviceValue) else v for v in inputs]
            outputs = self.run(host, 0, deadline_ns)
            if deliver is not None:
                deliver(outputs)
            return outputs

    def placement(self) -> tuple[int, int]:
        return 0, len(self.model.main.operations)

    def launches(self) -> int:
        return 0

    def run(self, inputs: Sequence[np.ndarray | None], graph_index: int = 0,
            deadline_ns: int | None = None) -> list[np.ndarray]:
        """Run subgraph `graph_index` (0 = main) on its input values; return its outputs.
        `deadline_ns` (time.monotonic_ns) bounds WHILE loops."""
        values = self.trace(inputs, graph_index, deadline_ns)
        return [values[idx] for idx in self.context.graphs[graph_index].outputIndexes]

    def trace(self, inputs: Sequence[np.ndarray | None], graph_index: int = 0,
              deadline_ns: int | None = None) -> dict[int, np.ndarray | None]:
        """Run a subgraph and return the value of every operand it computed or read."""
        graph = self.context.graphs[graph_index]
        values: dict[int, np.ndarray | None] = dict(self.context.constants[graph_index])
        for idx, value in zip(graph.inputIndexes, inputs):
            values[idx] = value
        prof = profiling.current if graph_index == 0 else None  # IF / WHILE bodies: inside their operation
        for k in range(len(graph.operations)):
            start = prof.now() if prof else 0
            outs = self.run_operation(k, [values.get(i) for i in graph.operations[k].inputs], graph_index, deadline_ns)
            values.update(zip(graph.operations[k].outputs, outs))
            if prof:
                prof.operation(graph.operations[k].type.name, k, start)
        return values

    def run_operation(self, k: int, inputs: list[np.ndarray | None], graph_index: int = 0,
                      deadline_ns: int | None = None) -> list[np.ndarray]:
        """Operation k of a subgraph on the given input values (constants included)."""
        graph = self.context.graphs[graph_index]
        outs = self.call_reference(k, inputs, graph_index, deadline_ns)
        return [self.conform(k, graph, idx, value) for idx, value in zip(graph.operations[k].outputs, outs)]

    def call_reference(self, k: int, inputs: list[np.ndarray | None], graph_index: int = 0,
                       deadline_ns: int | None = None) -> list[np.ndarray]:
        """The raw outputs of operation k's reference kernel (not cast to the operands' types
        nor checked against their shapes); failures as ExecutionError."""
        graph = self.context.graphs[graph_index]
        op = graph.operations[k]
        spec = lookup(op.type)
        if spec is None:
            raise ExecutionError(ErrorStatus.GENERAL_FAILURE, f"operation {k}: no kernel for {op.type}")
        ctx = OpContext(op, graph.operands, inputs, self.context.relaxed, self.context.version, self.model.referenced,
                        lambda ref, ins: self.run(ins, ref + 1, deadline_ns), deadline_ns)
        try:
            outs = spec.reference(ctx)
        except OpError as e:
            raise ExecutionError(ErrorStatus(e.status or ErrorStatus.GENERAL_FAILURE),
                                 f"operation {k} ({spec.type.name}): {e}") from e
        except ExecutionError:
            raise
        except Exception as e:  # a kernel bug must not escape a HAL method
            log.exception("operation %d (%s) raised", k, spec.type.name)
            raise ExecutionError(ErrorStatus.GENERAL_FAILURE,
                                 f"operation {k} ({spec.type.name}): {type(e).__name__}: {e}") from e
        if len(outs) != len(op.outputs):
            raise ExecutionError(ErrorStatus.GENERAL_FAILURE, f"operation {k}: wrong output count")
        return outs

    @staticmethod
    def conform(k: int, graph: Subgraph, idx: int, value: np.ndarray) -> np.ndarray:
        """Cast to the operand's storage type and check the shape against the model's dims."""
        operand = graph.operands[idx]
        value = np.asarray(value).astype(dtype_of(operand.type), copy=False)
        if not is_tensor(operand.type):
            return value.reshape(())
        dims = operand.dimensions
        if dims and (len(dims) != value.ndim or any(d and d != v for d, v in zip(dims, value.shape))):
            raise ExecutionError(ErrorStatus.GENERAL_FAILURE,
                                 f"operation {k}: output operand {idx} has shape {list(value.shape)}, model says {dims}")
        return value
