"""Import a .tflite model as an NNAPI model, the way the TFLite NNAPI delegate maps it.

    imported = import_tflite(Path("model.tflite").read_bytes())
    imported.model        # hal Model (1.2 flat) or Model_1_3 when 1.3 ops/types are needed
    imported.inputs       # [IOTensor(name, shape, dtype, scale, zero_point)] in model input order

The graph rewrites of rewrite.py run first (folding what is known at import, lowering patterns
NNAPI cannot express as written); every other operator goes through mappers.MAPPERS, and one
with no NNAPI counterpart raises UnsupportedOperatorError naming it and its index. Subgraphs
that WHILE / IF name become the model's referenced subgraphs, mapped the same way."""
from __future__ import annotations

from dataclasses import dataclass, field

from ..hal.types import Model, Model_1_3, OperandLifeTime, Subgraph
from ..named_io import IOTensor, NamedIO
from .builder import GraphBuilder
from .context import OpCtx, OperandTable
from .errors import TFLiteImportError, UnsupportedOperatorError
from .fold import FoldError
from .mappers import MAPPERS
from .reader import NP_DTYPES, Tensor, TFLiteGraph, read_tflite
from .rewrite import rewrite_graph
from .shapes import settle_shapes
from .tensors import numpy_dtype

L = OperandLifeTime


@dataclass
class ImportedModel(NamedIO):
    model: Model | Model_1_3
    inputs: list[IOTensor]
    outputs: list[IOTensor]
    version: int                                   # HAL version the model needs: 12, 13, 15 (AIDL v2), ...
    folded: int = 0                                # operators the rewrites folded or left unused
    description: str = ""
    op_counts: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)  # options TFLite itself ignores, by operator
    tensors: dict[int, int] = field(default_factory=dict)  # TFLite tensor -> its main-graph operand

    def __iter__(self):  # `model, input_names, output_names = load_tflite(path)`
        return iter((self.model, self.input_names, self.output_names))


def map_operators(table: OperandTable, skip: set[int], host: set[int] | None = None) -> list[int]:
    """Map every operator not in `skip` (folded) through MAPPERS, then set the model's inputs and
    outputs; returns, per NNAPI operation emitted, the index of the operator it came from.

    With `host` (a set to fill), an operator that cannot be mapped is not an error: what its mapper
    emitted is undone, its index goes into `host` (the partitioner runs it on the host), and the
    model's outputs are left unset."""
    g, b = table.g, table.b
    for t in g.inputs:  # fix the input operands' order before any op creates others
        try:
            table.operand_for(g.tensors[t])
        except TFLiteImportError:
            if host is None:
                raise  # else: an input only host operators can read (its readers fail to map)
    origins: list[int] = []
    for op in g.operators:
        if op.index in skip:
            continue
        mark = _Mark(table)
        try:
            _map_one(table, op)
        except TFLiteImportError:
            if host is None:
                raise
            mark.undo(table)
            host.add(op.index)
            continue
        origins += [op.index] * (len(b.operations) - mark.operations)
    if host is not None:
        return origins
    for t in g.outputs:
        tensor = g.tensors[t]
        if t not in table.cache or b.operands[table.cache[t]].lifetime != L.SUBGRAPH_OUTPUT:
            raise TFLiteImportError(f"model output {tensor.name} is not computed by any operator")
    b.inputs = [table.cache[t] for t in g.inputs]
    b.outputs = [table.cache[t] for t in g.outputs]
    return origins


def _map_one(table: OperandTable, op) -> None:
    mapper = MAPPERS.get(op.name)
    if mapper is None:
        kind = "custom operator" if op.custom else "builtin operator"
        raise UnsupportedOperatorError(op.name, op.index, f"{kind} with no NNAPI counterpart")
    try:
        mapper(OpCtx(table, op))
    except TFLiteImportError:
        raise
    except Exception as e:  # malformed options/tensors: name the operator
        raise UnsupportedOperatorError(op.name, op.index, f"cannot map: {type(e).__name__}: {e}") from e


class _Mark:
    """How far the model being built had got before one operator's mapper ran, to undo it."""

    def __init__(self, table: OperandTable):
        b = table.b
        self.operands, self.operations, self.values = len(b.operands), len(b.operations), len(b.values)
        self.warnings = len(table.warnings)

    def undo(self, table: OperandTable) -> None:
        b = table.b
        del b.operands[self.operands:], b.operations[self.operations:]
        b.values.truncate(self.values)
        del table.warnings[self.warnings:]
        for cache in (table.cache, table.float_cache):
            for t in [t for t, idx in cache.items() if idx >= self.operands]:
                del cache[t]


def io_of(t: Tensor, dims: list[int] | None = None) -> IOTensor:
    """The IOTensor of tensor t; dims: its operand's settled shape (see shapes.py)."""
    q = t.quant
    io = IOTensor(t.name, list(t.shape) if dims is None or not t.shape else list(dims), numpy_dtype(t),
                  float(q.scales[0]) if q else 0.0, int(q.zero_points[0]) if q else 0)
    if t.dynamic:
        io.signature = list(t.signature)
    if t.shown_type is not None:  # computed narrower than the user sees it (int64 indices)
        io.computed, io.dtype = io.dtype, NP_DTYPES[t.shown_type]
    return io


def rewrite(graph: TFLiteGraph) -> set[int]:
    """rewrite.py's pass, its refusals as import errors: the operators the importer skips."""
    try:
        return rewrite_graph(graph)
    except FoldError as e:
        raise TFLiteImportError(str(e)) from e


class _Subgraphs:
    """The file's subgraphs that IF / WHILE reference, as NNAPI referenced subgraphs, each mapped
    once, on first reference, into a builder of its own (its constants join the model's at the
    end, so undoing a main-graph operator never touches them)."""

    def __init__(self, graph: TFLiteGraph, warnings: list[str]):
        self.graph, self.warnings = graph, warnings
        self.builders: list[GraphBuilder | None] = []
        self.index: dict[int, int] = {}

    def ref(self, k: int) -> int:
        if k in self.index:
            return self.index[k]
        if not 0 < k < len(self.graph.subgraphs):
            raise TFLiteImportError(f"subgraph {k} is referenced but the file has {len(self.graph.subgraphs)}")
        n = len(self.builders)
        self.index[k] = n
        self.builders.append(None)  # taken before mapping: a subgraph may reference itself
        sub = self.graph.subgraphs[k]
        table = OperandTable(sub, GraphBuilder(), self.ref, self.warnings)
        try:
            map_operators(table, rewrite(sub))
            settle_shapes(table)
        except TFLiteImportError as e:
            del self.builders[n:]
            self.index = {key: v for key, v in self.index.items() if v < n}
            if isinstance(e, UnsupportedOperatorError):
                raise UnsupportedOperatorError(e.op_name, e.index, f"{e.reason} (in subgraph {k} {sub.name})") from e
            raise
        self.builders[n] = table.b
        return n

    def assemble(self, main: GraphBuilder) -> list[Subgraph]:
        """The referenced subgraphs, their constants moved into main's operand values."""
        out = []
        for b in self.builders:
            assert b is not None, "a referenced subgraph left unmapped"
            base = main.values.extend(b.values)
            for operand in b.operands:
                if operand.lifetime == L.CONSTANT_COPY:
                    operand.location.offset += base
            out.append(b.subgraph())
        return out


def new_table(graph: TFLiteGraph) -> tuple[OperandTable, _Subgraphs]:
    """The operand table a graph is mapped into, with its WHILE / IF bodies' subgraphs."""
    warnings: list[str] = []
    subgraphs = _Subgraphs(graph, warnings)
    return OperandTable(graph, GraphBuilder(), subgraphs.ref, warnings), subgraphs


def fix_input_shapes(graph: TFLiteGraph, shapes: dict[str, list[int]]) -> None:
    """Give model inputs the shapes asked for, where their shape signature leaves extents open."""
    by_name = {graph.tensors[t].name: graph.tensors[t] for t in graph.inputs}
    for name, shape in shapes.items():
        t = by_name.get(name)
        if t is None:
            raise TFLiteImportError(f"input_shapes names {name!r}, which is no model input")
        sig = t.signature or t.shape
        if len(shape) != len(sig) or any(s >= 0 and s != d for s, d in zip(sig, shape)):
            raise TFLiteImportError(f"input {name}: shape {list(shape)} does not fit its signature {sig}")
        t.shape = [int(d) for d in shape]


def import_graph(graph: TFLiteGraph, validate: bool = True,
                 input_shapes: dict[str, list[int]] | None = None) -> ImportedModel:
    """input_shapes: {input name: shape} for inputs whose signature has dynamic (-1) extents,
    which otherwise run at the stored shape (1 for each dynamic extent)."""
    if input_shapes:
        fix_input_shapes(graph, input_shapes)
    skip = rewrite(graph)
    table, subgraphs = new_table(graph)
    map_operators(table, skip)
    settle_shapes(table)
    referenced = subgraphs.assemble(table.b)
    model13 = table.b.model_1_3(referenced)
    version = 13
    if validate:
        from ..validation import (  # loads the op registry: only when asked
            ValidationError,
            validate_model,
        )

        try:
            version = int(validate_model(model13))
        except ValidationError as e:
            raise TFLiteImportError(f"the imported model is not a valid NNAPI model: {e}") from e
    model: Model | Model_1_3 = table.b.model_1_2() if version <= 12 and not referenced else model13
    counts: dict[str, int] = {}
    for op in graph.operators:
        counts[op.name] = counts.get(op.name, 0) + 1
    dims = table.b.operands
    return ImportedModel(model, [io_of(graph.tensors[t]) for t in graph.inputs],
                         [io_of(graph.tensors[t], list(dims[table.cache[t]].dimensions)) for t in graph.outputs],
                         max(version, 12), len(skip), graph.description, counts, table.warnings, dict(table.cache))


def import_tflite(data: bytes, validate: bool = True,
                  input_shapes: dict[str, list[int]] | None = None) -> ImportedModel:
    return import_graph(read_tflite(data), validate, input_shapes)
