"""Import a .tflite model as an NNAPI model, the way the TFLite NNAPI delegate maps it.

    imported = import_tflite(Path("model.tflite").read_bytes())
    imported.model        # hal Model (1.2 flat) or Model_1_3 when 1.3 ops/types are needed
    imported.inputs       # [IOTensor(name, shape, dtype, scale, zero_point)] in model input order

Weights-unpacking subgraphs (DENSIFY, DEQUANTIZE of constants) are folded first; every other
operator goes through ops_map.MAPPERS, and one with no NNAPI counterpart raises
UnsupportedOperatorError naming it and its index."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..hal.types import FusedActivationFunc, Model, Model_1_3, OperandLifeTime, OperandType, OperationType
from .builder import GraphBuilder
from .errors import TFLiteImportError, UnsupportedOperatorError
from .fold import FoldError, dequantize, fold_constants
from .reader import Operator, TFLiteGraph, Tensor, read_tflite
from .tensors import FLOAT16, FLOAT32, nn_dims, numpy_dtype, operand_spec

T = OperandType
L = OperandLifeTime

_ACT_NAMES = {0: "NONE", 1: "RELU", 2: "RELU_N1_TO_1", 3: "RELU6", 4: "TANH", 5: "SIGN_BIT"}


@dataclass
class IOTensor:
    name: str
    shape: list[int]
    dtype: np.dtype
    scale: float = 0.0
    zero_point: int = 0


@dataclass
class ImportedModel:
    model: Model | Model_1_3
    inputs: list[IOTensor]
    outputs: list[IOTensor]
    version: int                                   # HAL version the model needs: 12 or 13
    folded: int = 0                                # operators folded into constants
    description: str = ""
    op_counts: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)  # options TFLite itself ignores, by operator

    @property
    def input_names(self) -> list[str]:
        return [t.name for t in self.inputs]

    @property
    def output_names(self) -> list[str]:
        return [t.name for t in self.outputs]

    def __iter__(self):  # `model, input_names, output_names = load_tflite(path)`
        return iter((self.model, self.input_names, self.output_names))


class OpCtx:
    """What a mapper sees of one TFLite operator: its tensors as NNAPI operands, and the builder."""

    def __init__(self, imp: "_Importer", op: Operator):
        self.imp = imp
        self.b: GraphBuilder = imp.b
        self.op = op
        self.opts = op.options

    # ---- tensors ---------------------------------------------------------------------------
    def has(self, k: int) -> bool:
        return k < len(self.op.inputs) and self.op.inputs[k] >= 0

    def t_in(self, k: int) -> Tensor:
        if not self.has(k):
            self.unsupported(f"input {k} is missing")
        return self.imp.g.tensors[self.op.inputs[k]]

    def t_out(self, k: int = 0) -> Tensor:
        return self.imp.g.tensors[self.op.outputs[k]]

    def inp(self, k: int, as_float: bool = False) -> int:
        """Operand for input k; as_float turns a quantized/float16 constant into float32 (hybrid
        weights, which NNAPI ops cannot take with a float input)."""
        t = self.t_in(k)
        if as_float and t.data is not None and t.type != FLOAT32:
            return self.imp.float_constant(t)
        return self.imp.operand_for(t)

    def out(self, k: int = 0) -> int:
        return self.imp.operand_for(self.t_out(k))

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
        self.imp.warnings.append(f"operator #{self.op.index} {self.op.name}: fused activation "
                                 f"{_ACT_NAMES.get(act, act)} is ignored, as the TFLite kernel ignores it")
        return FusedActivationFunc.NONE

    def unsupported(self, reason: str = ""):
        raise UnsupportedOperatorError(self.op.name, self.op.index, reason)


class _Importer:
    def __init__(self, graph: TFLiteGraph):
        self.g = graph
        self.b = GraphBuilder()
        self.cache: dict[int, int] = {}
        self.float_cache: dict[int, int] = {}
        self.warnings: list[str] = []

    def operand_for(self, t: Tensor) -> int:
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
            self.b.set_value(idx, spec.value.astype(np.dtype(spec.value.dtype), copy=False))
        self.cache[t.index] = idx
        return idx

    def float_constant(self, t: Tensor) -> int:
        idx = self.float_cache.get(t.index)
        if idx is None:
            idx = self.b.constant(T.TENSOR_FLOAT32, dequantize(t), nn_dims(t.shape))
            self.float_cache[t.index] = idx
        return idx

    def run(self, skip: set[int]) -> None:
        from .ops_map import MAPPERS

        for t in self.g.inputs:  # fix the input operands' order before any op creates others
            self.operand_for(self.g.tensors[t])
        for op in self.g.operators:
            if op.index in skip:
                continue
            mapper = MAPPERS.get(op.name)
            if mapper is None:
                kind = "custom operator" if op.custom else "builtin operator"
                raise UnsupportedOperatorError(op.name, op.index, f"{kind} with no NNAPI counterpart")
            ctx = OpCtx(self, op)
            try:
                mapper(ctx)
            except (UnsupportedOperatorError, TFLiteImportError):
                raise
            except Exception as e:  # malformed options/tensors: name the operator
                raise UnsupportedOperatorError(op.name, op.index, f"cannot map: {type(e).__name__}: {e}") from e
        for t in self.g.outputs:
            tensor = self.g.tensors[t]
            if t not in self.cache or self.b.operands[self.cache[t]].lifetime != L.SUBGRAPH_OUTPUT:
                raise TFLiteImportError(f"model output {tensor.name} is not computed by any operator")
        self.b.inputs = [self.cache[t] for t in self.g.inputs]
        self.b.outputs = [self.cache[t] for t in self.g.outputs]


def _io(t: Tensor) -> IOTensor:
    q = t.quant
    return IOTensor(t.name, list(t.shape), numpy_dtype(t), float(q.scales[0]) if q else 0.0,
                    int(q.zero_points[0]) if q else 0)


def import_graph(graph: TFLiteGraph, validate: bool = True) -> ImportedModel:
    try:
        folded = fold_constants(graph)
    except FoldError as e:
        raise TFLiteImportError(str(e)) from e
    imp = _Importer(graph)
    imp.run(set(folded))
    model13 = imp.b.model_1_3()
    version = 13
    if validate:
        from ..validation import ValidationError, validate_model

        try:
            version = int(validate_model(model13))
        except ValidationError as e:
            raise TFLiteImportError(f"the imported model is not a valid NNAPI model: {e}") from e
    model: Model | Model_1_3 = imp.b.model_1_2() if version <= 12 else model13
    counts: dict[str, int] = {}
    for op in graph.operators:
        counts[op.name] = counts.get(op.name, 0) + 1
    return ImportedModel(model, [_io(graph.tensors[t]) for t in graph.inputs],
                         [_io(graph.tensors[t]) for t in graph.outputs], max(version, 12), len(folded),
                         graph.description, counts, imp.warnings)


def import_tflite(data: bytes, validate: bool = True) -> ImportedModel:
    return import_graph(read_tflite(data), validate)
