"""`nngpu compare --per-op`: every intermediate tensor that both nngpu and TFLite expose, operator
by operator, and the first operator whose output is past its tolerance.

TFLite keeps every tensor with `experimental_preserve_all_tensors`, on its reference kernels (the
values of record) and its builtin ones (their difference is TFLite's own spread, as for outputs:
compare.py's rule). nngpu runs a copy of the imported model whose mapped intermediate operands
are also model outputs, on the chosen backend. A tensor the importer folded, rewrote away (the
rank-5 steps of an upsampling) or never mapped is not compared. The model must run whole on the
driver: a partitioned one has no single operand table."""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..hal.types import Model_1_3, OperandLifeTime
from ..modelutil import as_model_1_3
from .compare import BUILTIN, REFERENCE, OutputCheck, check_output, interpreter, prepared
from .importer import ImportedModel, io_of
from .reader import TFLiteGraph, read_tflite


@dataclass
class OperatorCheck:
    index: int
    name: str                      # the TFLite builtin, e.g. CONV_2D
    outputs: list[OutputCheck]
    inputs: list[OutputCheck] = field(default_factory=list)   # its inputs' own checks, where compared

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.outputs)


def _exposed(imported: ImportedModel, graph: TFLiteGraph) -> tuple[ImportedModel, list[int]]:
    """A copy of `imported` whose intermediate operands that stand for TFLite tensors are outputs
    too; the tensors, in the order of the outputs added."""
    model: Model_1_3 = copy.deepcopy(as_model_1_3(imported.model))
    operands = model.main.operands
    tensors = [t for t, k in sorted(imported.tensors.items(), key=lambda tk: tk[1])
               if operands[k].lifetime == OperandLifeTime.TEMPORARY_VARIABLE]
    for t in tensors:
        operands[imported.tensors[t]].lifetime = OperandLifeTime.SUBGRAPH_OUTPUT
        model.main.outputIndexes.append(imported.tensors[t])
    extra = [io_of(graph.tensors[t], list(operands[imported.tensors[t]].dimensions)) for t in tensors]
    return ImportedModel(model, imported.inputs, imported.outputs + extra, max(imported.version, 13)), tensors


def _tflite_tensors(path: Path, inputs: list[np.ndarray], kind: str) -> dict[int, np.ndarray]:
    it = prepared(interpreter(path, kind, keep_all=True), inputs)
    it.invoke()
    values = {}
    for d in it.get_tensor_details():
        try:
            values[d["index"]] = it.get_tensor(d["index"]).copy()
        except ValueError:  # a tensor TFLite holds no data for (a folded constant's input)
            pass
    return values


def per_operator(path: Path, imported: ImportedModel, backend: str, inputs: list[np.ndarray]) -> list[OperatorCheck]:
    """Every TFLite operator with a compared output, in TFLite's order."""
    from ..session import Session

    graph = read_tflite(Path(path).read_bytes())
    model, tensors = _exposed(imported, graph)
    with Session(model, backend) as session:
        got = list(session.run(inputs).values())[len(imported.outputs):]
    ours = dict(zip(tensors, got))
    ref, alt = (_tflite_tensors(path, inputs, kind) for kind in (REFERENCE, BUILTIN))
    checks: dict[int, OutputCheck] = {}
    for t, value in ours.items():
        if t in ref and t in alt:
            tensor = graph.tensors[t]
            scale = float(tensor.quant.scales[0]) if tensor.quant is not None else 0.0
            checks[t] = check_output(tensor.name, ref[t], alt[t], value.astype(ref[t].dtype, copy=False), scale)
    out = []
    for op in graph.operators:
        outputs = [checks[t] for t in op.outputs if t in checks]
        if outputs:
            out.append(OperatorCheck(op.index, op.name, outputs, [checks[t] for t in op.inputs if t in checks]))
    return out


def first_failure(ops: list[OperatorCheck]) -> OperatorCheck | None:
    return next((op for op in ops if not op.ok), None)


__all__ = ["OperatorCheck", "first_failure", "per_operator"]
