"""Cut a .tflite model down to some of its operators: the flatbuffer a host partition's TFLite
interpreter loads. Written with the object API of the schema that ai-edge-litert ships (the
interpreter that runs it), so every operator's options are copied as TFLite itself reads them.

Only what the operators touch is kept: their tensors (renumbered), the constants' data (from the
reader, so constants nngpu folded, e.g. dequantized weights, come along as they are now), and
every operator code (indexes stay valid). When an operator calls subgraphs (WHILE, IF), every
other subgraph is copied whole, at its index, with its constants from the file."""
from __future__ import annotations

from typing import Sequence

import flatbuffers
import numpy as np

from .errors import TFLiteImportError
from .reader import TFLiteGraph


def schema():
    """ai-edge-litert's generated schema module (ImportError when the package is missing)."""
    from ai_edge_litert import schema_py_generated

    return schema_py_generated


def cut(data: bytes, graph: TFLiteGraph, ops: Sequence[int], inputs: Sequence[int],
        outputs: Sequence[int]) -> tuple[bytes, dict[int, int]]:
    """(the flatbuffer of `ops` with model inputs `inputs` and outputs `outputs`, the new index
    of each tensor kept)."""
    fb = schema()
    model = fb.Model.GetRootAs(data, 0)
    sub = model.Subgraphs(0)
    operators = []
    for i in ops:
        op = fb.OperatorT.InitFromObj(sub.Operators(i))
        if op.largeCustomOptionsSize:
            raise TFLiteImportError(f"operator #{i} {graph.operators[i].name}: custom options stored outside "
                                    f"the flatbuffer are not supported on the host")
        operators.append(op)
    kept: dict[int, int] = {}
    for t in [*inputs, *outputs, *(t for op in operators for t in _tensor_refs(op))]:
        if t >= 0 and t not in kept:
            kept[t] = len(kept)
    buffers = [fb.BufferT()]

    def buffer(raw: bytes | None) -> int:
        if raw is None:
            return 0
        buf = fb.BufferT()
        buf.data = np.frombuffer(raw, np.uint8)
        buffers.append(buf)
        return len(buffers) - 1

    tensors = []
    for t in kept:
        tensor = fb.TensorT.InitFromObj(sub.Tensors(t))
        value = graph.tensors[t].data  # the reader's: folded values included
        tensor.buffer = buffer(np.ascontiguousarray(value).tobytes() if value is not None
                               else _file_bytes(model, data, tensor.buffer))
        tensors.append(tensor)
    others = []
    if any(_calls_subgraphs(op) for op in operators):
        for k in range(1, model.SubgraphsLength()):
            other = fb.SubGraphT.InitFromObj(model.Subgraphs(k))
            for tensor in other.tensors or []:
                tensor.buffer = buffer(_file_bytes(model, data, tensor.buffer))
            others.append(other)
    for op in operators:
        op.inputs = [kept[t] if t >= 0 else -1 for t in op.inputs] if op.inputs is not None else None
        op.outputs = [kept[t] for t in op.outputs] if op.outputs is not None else None
        if op.intermediates is not None:
            op.intermediates = [kept[t] for t in op.intermediates]
    g = fb.SubGraphT()
    g.tensors, g.operators, g.name = tensors, operators, "host partition"
    g.inputs, g.outputs = [kept[t] for t in inputs], [kept[t] for t in outputs]
    m = fb.ModelT()
    m.version = model.Version()
    m.operatorCodes = [fb.OperatorCodeT.InitFromObj(model.OperatorCodes(k)) for k in range(model.OperatorCodesLength())]
    m.subgraphs, m.buffers, m.description = [g, *others], buffers, "nngpu host partition"
    b = flatbuffers.Builder(1024)
    b.Finish(m.Pack(b), file_identifier=b"TFL3")
    return bytes(b.Output()), kept


def _tensor_refs(op) -> list[int]:
    return [*(op.inputs if op.inputs is not None else []), *(op.outputs if op.outputs is not None else []),
            *(op.intermediates if op.intermediates is not None else [])]


def _calls_subgraphs(op) -> bool:
    o = op.builtinOptions
    return any(hasattr(o, f) for f in ("thenSubgraphIndex", "condSubgraphIndex", "subgraph", "initSubgraphIndex"))


def _file_bytes(model, data: bytes, index: int) -> bytes | None:
    """The bytes of buffer `index` of the file (inline, or after the flatbuffer at an offset)."""
    if index <= 0 or index >= model.BuffersLength():
        return None
    buf = model.Buffers(index)
    if buf.Offset() > 1:
        return data[buf.Offset(): buf.Offset() + buf.Size()]
    return buf.DataAsNumpy().tobytes() if buf.DataLength() else None
