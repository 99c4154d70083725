"""Import a .tflite model as an NNAPI model, the way the TFLite NNAPI delegate maps it.

    imported = import_tflite(Path("model.tflite").read_bytes())
    imported.model        # hal Model (1.2 flat) or Model_1_3 when 1.3 ops/types are needed
    imported.inputs       # [IOTensor(name, shape, dtype, scale, zero_point)] in model input order

Weights-unpacking subgraphs (DENSIFY, DEQUANTIZE of constants) are folded first; every other
operator goes through ops_map.MAPPERS, and one with no NNAPI counterpart raises
UnsupportedOperatorError naming it and its index."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..hal.types import Model, Model_1_3, OperandLifeTime
from ..named_model import IOTensor, NamedIO
from .context import OpCtx, OperandTable
from .errors import TFLiteImportError, UnsupportedOperatorError
from .fold import FoldError, fold_constants
from .ops_map import MAPPERS
from .reader import TFLiteGraph, Tensor, read_tflite
from .tensors import numpy_dtype

L = OperandLifeTime


@dataclass
class ImportedModel(NamedIO):
    model: Model | Model_1_3
    inputs: list[IOTensor]
    outputs: list[IOTensor]
    version: int                                   # HAL version the model needs: 12 or 13
    folded: int = 0                                # operators folded into constants
    description: str = ""
    op_counts: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)  # options TFLite itself ignores, by operator

    def __iter__(self):  # `model, input_names, output_names = load_tflite(path)`
        return iter((self.model, self.input_names, self.output_names))


def _map_operators(table: OperandTable, skip: set[int]) -> None:
    """Map every operator not in `skip` (folded) through MAPPERS, then set the model's inputs and outputs."""
    g, b = table.g, table.b
    for t in g.inputs:  # fix the input operands' order before any op creates others
        table.operand_for(g.tensors[t])
    for op in g.operators:
        if op.index in skip:
            continue
        mapper = MAPPERS.get(op.name)
        if mapper is None:
            kind = "custom operator" if op.custom else "builtin operator"
            raise UnsupportedOperatorError(op.name, op.index, f"{kind} with no NNAPI counterpart")
        ctx = OpCtx(table, op)
        try:
            mapper(ctx)
        except (UnsupportedOperatorError, TFLiteImportError):
            raise
        except Exception as e:  # malformed options/tensors: name the operator
            raise UnsupportedOperatorError(op.name, op.index, f"cannot map: {type(e).__name__}: {e}") from e
    for t in g.outputs:
        tensor = g.tensors[t]
        if t not in table.cache or b.operands[table.cache[t]].lifetime != L.SUBGRAPH_OUTPUT:
            raise TFLiteImportError(f"model output {tensor.name} is not computed by any operator")
    b.inputs = [table.cache[t] for t in g.inputs]
    b.outputs = [table.cache[t] for t in g.outputs]


def _io(t: Tensor) -> IOTensor:
    q = t.quant
    return IOTensor(t.name, list(t.shape), numpy_dtype(t), float(q.scales[0]) if q else 0.0,
                    int(q.zero_points[0]) if q else 0)


def import_graph(graph: TFLiteGraph, validate: bool = True) -> ImportedModel:
    try:
        folded = fold_constants(graph)
    except FoldError as e:
        raise TFLiteImportError(str(e)) from e
    table = OperandTable(graph)
    _map_operators(table, set(folded))
    model13 = table.b.model_1_3()
    version = 13
    if validate:
        from ..validation import ValidationError, validate_model  # loads the op registry: only when asked

        try:
            version = int(validate_model(model13))
        except ValidationError as e:
            raise TFLiteImportError(f"the imported model is not a valid NNAPI model: {e}") from e
    model: Model | Model_1_3 = table.b.model_1_2() if version <= 12 else model13
    counts: dict[str, int] = {}
    for op in graph.operators:
        counts[op.name] = counts.get(op.name, 0) + 1
    return ImportedModel(model, [_io(graph.tensors[t]) for t in graph.inputs],
                         [_io(graph.tensors[t]) for t in graph.outputs], max(version, 12), len(folded),
                         graph.description, counts, table.warnings)


def import_tflite(data: bytes, validate: bool = True) -> ImportedModel:
    return import_graph(read_tflite(data), validate)
