"""What an operator mapper (mappers/) works on: the operands being built for a TFLite graph's
tensors (OperandTable), and one operator's view of them and of the builder (OpCtx)."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..hal.types import FusedActivationFunc, OperandLifeTime, OperandType, OperationType
from .builder import GraphBuilder
from .errors import UnsupportedOperatorError
from .fold import dequantize
from .reader import Operator, Tensor, TFLiteGraph
from .tensors import FLOAT16, FLOAT32, nn_dims, operand_spec

T = OperandType
L = OperandLifeTime

_ACT_NAMES = {0: "NONE", 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6", 4: "TANH", 5: "SIGN_BIT"}


class OperandTable:
    """The NNAPI model being built from a TFLite graph: each tensor's operand, made on first use
    (model inputs and outputs keep their lifetimes, constants their values), the float32 copies
    of quantized / float16 constants, and the warnings the mappers record."""

    def __init__(self, graph: TFLiteGraph, builder: GraphBuilder | None = None,
                 subgraph_ref: Callable[[int], int] | None = None, warnings: list[str] | None = None):
        self.g = graph
        self.b = builder or GraphBuilder()
        self.cache: dict[int, int] = {}
        self.float_cache: dict[int, int] = {}
        self.warnings: list[str] = [] if warnings is None else warnings
        self._subgraph_ref = subgraph_ref

    def subgraph(self, tflite_index: int) -> int | None:
        """The NNAPI referenced-subgraph index of the file's subgraph `tflite_index`, mapped on
        first use (IF branches, WHILE condition and body); None where this table's model can
        reference none (a partition of a model)."""
        return None if self._subgraph_ref is None else self._subgraph_ref(tflite_index)

    def operand_for(self, t: Tensor) -> int:
        """The operand of tensor t."""
        idx = self.cache.get(t.index)
        if idx is not None:
            return idx
        spec = operand_spec(t)
        if t.index in self.g.inputs:
            lifetime = L.SUBGRAPH_INPUT
        elif t.index in self.g.outputs:
            lifetime = L.SUBGRAPH_OUTPUT
        else:
            lifetime = L.TEMPORARY_VARIABLE
        idx = self.b.operand(spec.type, spec.dims, spec.scale, spec.zero_point, lifetime, spec.channel_quant)
        if spec.value is not None and lifetime == L.TEMPORARY_VARIABLE:
            self.b.set_value(idx, spec.value)
        self.cache[t.index] = idx
        return idx

    def float_constant(self, t: Tensor) -> int:
        """A float32 constant operand holding constant tensor t dequantized."""
        idx = self.float_cache.get(t.index)
        if idx is None:
            idx = self.b.constant(T.TENSOR_FLOAT32, dequantize(t), nn_dims(t.shape))
            self.float_cache[t.index] = idx
        return idx


class OpCtx:
    """What a mapper sees of one TFLite operator: its tensors as NNAPI operands, and the builder."""

    def __init__(self, table: OperandTable, op: Operator):
        self.table = table
        self.b: GraphBuilder = table.b
        self.op = op
        self.opts = op.options

    # ---- tensors ---------------------------------------------------------------------------
    def has(self, k: int) -> bool:
        return k < len(self.op.inputs) and self.op.inputs[k] >= 0

    def t_in(self, k: int) -> Tensor:
        if not self.has(k):
            self.unsupported(f"input {k} is missing")
        return self.table.g.tensors[self.op.inputs[k]]

    def t_out(self, k: int = 0) -> Tensor:
        return self.table.g.tensors[self.op.outputs[k]]

    def inp(self, k: int, as_float: bool = False) -> int:
        """Operand for input k; as_float turns a quantized/float16 constant into float32 (hybrid
        weights, which NNAPI ops cannot take with a float input)."""
        t = self.t_in(k)
        if as_float and t.data is not None and t.type != FLOAT32:
            return self.table.float_constant(t)
        return self.table.operand_for(t)

    def out(self, k: int = 0) -> int:
        return self.table.operand_for(self.t_out(k))

    def value(self, k: int) -> np.ndarray:
        """The constant value of input k (an error when it is computed at run time)."""
        t = self.t_in(k)
        if t.data is None:
            self.unsupported(f"input {k} ({t.name}) must be a constant")
        return t.data

    def ints(self, k: int) -> list[int]:
        return [int(v) for v in np.asarray(self.value(k)).reshape(-1)]

    def is_float(self, k: int = 0) -> bool:
        return self.t_in(k).type in (FLOAT32, FLOAT16)

    def hybrid(self) -> bool:
        """A float32 data input: quantized / float16 constant weights get dequantized for it."""
        return self.t_in(0).type == FLOAT32

    # ---- building --------------------------------------------------------------------------
    def emit(self, op_type: OperationType, inputs: list[int], outputs: list[int]) -> None:
        self.b.op(op_type, inputs, outputs)

    def activation(self, act: int, fusable: bool = True) -> int:
        """The NNAPI fused code for TFLite activation `act`. TFLite's kernels apply only the RELU
        family, and only on ops with a fused input: anything else (TANH / SIGN_BIT, or any
        activation on CONCATENATION / L2_NORMALIZATION) is a no-op there, so it maps to NONE
        and is recorded as a warning rather than invented."""
        if act == 0:
            return FusedActivationFunc.NONE
        if fusable and act in (1, 2, 3):
            return act
        self.table.warnings.append(f"operator #{self.op.index} {self.op.name}: fused activation "
                                 f"{_ACT_NAMES.get(act, act)} is ignored, as the TFLite kernel ignores it")
        return FusedActivationFunc.NONE

    def unsupported(self, reason: str = ""):
        raise UnsupportedOperatorError(self.op.name, self.op.index, reason)
