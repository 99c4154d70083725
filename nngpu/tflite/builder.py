"""Accumulate NNAPI operands, constant values and operations, then emit a HAL Model."""
from __future__ import annotations

import numpy as np

from ..hal.types import (
    DataLocation,
    Model,
    Model_1_3,
    Operand,
    OperandExtraParams,
    OperandLifeTime,
    OperandType,
    Operation,
    OperationType,
    Subgraph,
    SymmPerChannelQuantParams,
)
from ..modelutil import count_consumers
from .constant_bytes import ConstantBytes

T = OperandType
L = OperandLifeTime
_SCALAR_DTYPES = {T.INT32: np.int32, T.FLOAT32: np.float32, T.BOOL: np.bool_, T.FLOAT16: np.float16,
                  T.UINT32: np.uint32}


class GraphBuilder:
    """One NNAPI graph under construction: operands, their constant bytes, and operations."""

    def __init__(self) -> None:
        self.operands: list[Operand] = []
        self.operations: list[Operation] = []
        self.values = ConstantBytes()
        self.inputs: list[int] = []
        self.outputs: list[int] = []

    def operand(self, type_: int, dims: list[int], scale: float = 0.0, zero_point: int = 0,
                lifetime: int = L.TEMPORARY_VARIABLE,
                channel_quant: tuple[list[float], int] | None = None) -> int:
        extra = None
        if channel_quant is not None:
            extra = OperandExtraParams(channelQuant=SymmPerChannelQuantParams(
                [float(s) for s in channel_quant[0]], int(channel_quant[1])))
        self.operands.append(Operand(T(type_), [int(d) for d in dims], 0, float(scale), int(zero_point),
                                     L(lifetime), DataLocation(), extra))
        return len(self.operands) - 1

    def set_value(self, index: int, value: np.ndarray) -> None:
        """Make operand `index` a CONSTANT_COPY holding `value` (8-byte aligned in operandValues)."""
        offset, length = self.values.append(np.ascontiguousarray(value))
        op = self.operands[index]
        op.lifetime = L.CONSTANT_COPY
        op.location = DataLocation(0, offset, length)

    def constant(self, type_: int, value: np.ndarray, dims: list[int] | None = None, scale: float = 0.0,
                 zero_point: int = 0, channel_quant: tuple[list[float], int] | None = None) -> int:
        idx = self.operand(type_, list(value.shape) if dims is None else dims, scale, zero_point,
                           L.CONSTANT_COPY, channel_quant)
        self.set_value(idx, value)
        return idx

    def scalar(self, type_: int, value) -> int:
        return self.constant(type_, np.asarray(value, dtype=_SCALAR_DTYPES[type_]), [])

    def i32(self, value: int) -> int:
        return self.scalar(T.INT32, int(value))

    def f32(self, value: float) -> int:
        return self.scalar(T.FLOAT32, float(value))

    def boolean(self, value: bool) -> int:
        return self.scalar(T.BOOL, bool(value))

    def i32_tensor(self, values) -> int:
        return self.constant(T.TENSOR_INT32, np.asarray(values, dtype=np.int32).reshape(-1))

    def like(self, index: int, dims: list[int] | None = None) -> int:
        """A new temporary with the type and quantization of operand `index`."""
        src = self.operands[index]
        cq = None
        if src.extraParams is not None and src.extraParams.channelQuant is not None:
            cq = (src.extraParams.channelQuant.scales, src.extraParams.channelQuant.channelDim)
        return self.operand(src.type, list(src.dimensions) if dims is None else dims, src.scale,
                            src.zeroPoint, L.TEMPORARY_VARIABLE, cq)

    def subgraph_ref(self, index: int) -> int:
        """A SUBGRAPH operand naming referenced subgraph `index` (IF / WHILE inputs)."""
        idx = self.operand(T.SUBGRAPH, [], lifetime=L.SUBGRAPH)
        self.operands[idx].location = DataLocation(0, int(index), 0)
        return idx

    def op(self, type_: OperationType, inputs: list[int], outputs: list[int]) -> None:
        self.operations.append(Operation(OperationType(type_), list(inputs), list(outputs)))

    def subgraph(self) -> Subgraph:
        count_consumers(self.operands, self.operations)
        return Subgraph(self.operands, self.operations, list(self.inputs), list(self.outputs))

    def model_1_3(self, referenced: list[Subgraph] | None = None) -> Model_1_3:
        return Model_1_3(self.subgraph(), list(referenced or []), self._frozen_values())

    def model_1_2(self) -> Model:
        count_consumers(self.operands, self.operations)
        return Model(self.operands, self.operations, list(self.inputs), list(self.outputs), self._frozen_values())

    def _frozen_values(self) -> bytes:
        """operandValues as immutable bytes, made once and shared by every model made from here
        (the driver then reads the weights in place)."""
        return self.values.freeze()
