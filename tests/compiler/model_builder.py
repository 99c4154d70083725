"""Multi-operation models for the compiler tests: `ModelBuilder` writes a 1.3 model operand by
operand; `prepare` and `execute` drive it through the driver on the sync, async or burst path
(each execution its own shared-memory pools)."""
from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Sequence

import numpy as np

from nngpu.cts.runner import execute_on, prepare_on
from nngpu.hal.types import (DataLocation, ErrorStatus, MeasureTiming, Model_1_3, Operand, OperandExtraParams,
                             OperandLifeTime, OperandType, Operation, OperationType, OutputShape, Request,
                             RequestArgument, Subgraph, SymmPerChannelQuantParams)
from nngpu.memory import allocate_shared
from nngpu.modelutil import count_consumers
from nngpu.ops import load_all
from nngpu.ops.lib.dtypes import dtype_of, is_tensor

load_all()  # the signature tables

T = OperandType
PATHS = ("sync", "async", "burst")


def _align(n: int) -> int:
    return (n + 7) // 8 * 8


class ModelBuilder:
    """Operands and operations in execution order; `build` fills in numberOfConsumers."""

    def __init__(self) -> None:
        self.operands: list[Operand] = []
        self.operations: list[Operation] = []
        self.inputs: list[int] = []
        self.outputs: list[int] = []
        self._values = bytearray()

    def _operand(self, t: int, dims: Sequence[int], lifetime: OperandLifeTime, scale: float = 0.0,
                 zero_point: int = 0, location: DataLocation | None = None,
                 extra: OperandExtraParams | None = None) -> int:
        self.operands.append(Operand(T(t), [int(d) for d in dims], 0, float(scale), int(zero_point), lifetime,
                                     location or DataLocation(), extra))
        return len(self.operands) - 1

    def input(self, t: int, dims: Sequence[int], scale: float = 0.0, zero_point: int = 0) -> int:
        """A model input; 0 in `dims` (or no dims) leaves that extent to the request."""
        idx = self._operand(t, dims, OperandLifeTime.SUBGRAPH_INPUT, scale, zero_point)
        self.inputs.append(idx)
        return idx

    def constant(self, t: int, value, scale: float = 0.0, zero_point: int = 0,
                 channel_quant: tuple[Sequence[float], int] | None = None) -> int:
        """A CONSTANT_COPY operand: a tensor of value's shape, or a scalar for scalar types."""
        arr = np.asarray(value, dtype=dtype_of(t))
        data = arr.tobytes()
        off = _align(len(self._values))
        self._values.extend(b"\0" * (off - len(self._values)))
        self._values.extend(data)
        extra = None
        if channel_quant is not None:
            extra = OperandExtraParams(channelQuant=SymmPerChannelQuantParams(list(channel_quant[0]),
                                                                              channel_quant[1]))
        dims = list(arr.shape) if is_tensor(t) else []
        return self._operand(t, dims, OperandLifeTime.CONSTANT_COPY, scale, zero_point,
                             DataLocation(0, off, len(data)), extra)

    def operation(self, op: OperationType, inputs: Sequence[int],
                  outputs: Sequence[tuple[int, Sequence[int], float, int]]) -> list[int]:
        """An operation writing new temporaries, each given as (type, dims, scale, zeroPoint)."""
        outs = [self._operand(t, dims, OperandLifeTime.TEMPORARY_VARIABLE, s, z) for t, dims, s, z in outputs]
        self.operations.append(Operation(op, list(inputs), outs))
        return outs

    def op(self, op: OperationType, inputs: Sequence[int], t: int, dims: Sequence[int], scale: float = 0.0,
           zero_point: int = 0) -> int:
        """An operation with one output."""
        return self.operation(op, inputs, [(t, dims, scale, zero_point)])[0]

    def subgraph(self, index: int) -> int:
        """A SUBGRAPH operand naming referenced subgraph `index` (build's `referenced`)."""
        return self._operand(T.SUBGRAPH, [], OperandLifeTime.SUBGRAPH, location=DataLocation(0, index, 0))

    def omitted(self, t: int) -> int:
        """A NO_VALUE operand (an optional input left out)."""
        return self._operand(t, [], OperandLifeTime.NO_VALUE)

    def output(self, idx: int) -> int:
        """Make a temporary a model output."""
        self.operands[idx].lifetime = OperandLifeTime.SUBGRAPH_OUTPUT
        self.outputs.append(idx)
        return idx

    def graph(self) -> Subgraph:
        count_consumers(self.operands, self.operations)
        return Subgraph(self.operands, self.operations, list(self.inputs), list(self.outputs))

    def build(self, referenced: Sequence[Subgraph] = ()) -> Model_1_3:
        """The model of this main graph; `referenced`: its subgraphs (other builders' `graph()`,
        without constants of their own)."""
        return Model_1_3(self.graph(), list(referenced), bytes(self._values))


def prepare(device, model: Model_1_3):
    """The prepared model (through prepareModel_1_3); fails the test when preparation fails."""
    status, prepared = prepare_on(device, model, flat=False)
    assert status == ErrorStatus.NONE and prepared is not None, f"prepareModel_1_3 returned {ErrorStatus(status).name}"
    return prepared


@dataclass
class Result:
    status: ErrorStatus
    outputs: list[np.ndarray] = field(default_factory=list)
    shapes: list[OutputShape] = field(default_factory=list)   # as the driver reports them


def execute(prepared, model: Model_1_3, inputs: Sequence[np.ndarray], capacities: Sequence[int],
            path: str = "sync") -> Result:
    """One execution through `path`: inputs from one pool, each output given `capacities[k]`
    bytes in another; the outputs are read back in the shapes the driver reports."""
    blob, in_args = bytearray(), []
    for arr in inputs:
        off = _align(len(blob))
        blob.extend(b"\0" * (off - len(blob)))
        blob.extend(np.ascontiguousarray(arr).tobytes())
        in_args.append(RequestArgument(False, DataLocation(0, off, arr.nbytes), list(arr.shape)))
    out_args, size = [], 0
    for cap in capacities:
        out_args.append(RequestArgument(False, DataLocation(1, size, cap), []))
        size = _align(size + cap)
    in_pool, out_pool = allocate_shared(max(len(blob), 1)), allocate_shared(max(size, 1))
    in_pool.map()[: len(blob)] = blob
    try:
        request = SimpleNamespace(request=Request(in_args, out_args, [in_pool, out_pool]))  # all execute_on reads
        status, shapes, _ = execute_on(prepared, path, request, False, MeasureTiming.NO)
        if status != ErrorStatus.NONE:
            return Result(ErrorStatus(status), [], list(shapes))
        outputs = []
        for k, shape in enumerate(shapes):
            dt = dtype_of(model.main.operands[model.main.outputIndexes[k]].type)
            dims = list(shape.dimensions)
            n = int(np.prod(dims)) if dims else 1
            outputs.append(out_pool.array(dt, out_args[k].location.offset, n).copy().reshape(dims))
        return Result(ErrorStatus.NONE, outputs, list(shapes))
    finally:
        in_pool.close()
        out_pool.close()
