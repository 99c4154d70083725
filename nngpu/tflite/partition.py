"""Split a TFLite model the way the TFLite NNAPI delegate does when the driver cannot run all of it.

    plan = plan_tflite(Path("m.tflite").read_bytes(), supported=lambda model: [True, ...])
    plan.parts      # [Partition(on_host, ops, inputs, outputs, imported)] in execution order

An operator is a host operator when its mapper cannot express it in NNAPI (`map_operators` with
a host set) or when the driver's getSupportedOperations (`supported`) refuses an operation it
became. The graph is rewritten first as import_graph rewrites it (rewrite.py); the operators it
keeps are ordered topologically, staying with one kind (driver or host) while any operator of that
kind is ready, so that runs are maximal; consecutive operators of one kind make a partition. A partition's inputs are the tensors it reads that earlier partitions (or the caller)
produce; its outputs are the tensors it produces that later partitions read or the model returns.
Each driver partition is imported as an NNAPI model of its own (import_graph on a graph holding
just its operators); host partitions are left to nngpu.tflite.host."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Callable

from ..hal.types import Model, Model_1_3
from ..named_io import IOTensor
from .errors import TFLiteFormatError, TFLiteImportError, UnsupportedOperatorError
from .importer import ImportedModel, fix_input_shapes, import_graph, io_of, map_operators, new_table, rewrite
from .reader import NP_DTYPES, TFLiteGraph, read_tflite

# The driver's answer for a model: one flag per operation (getSupportedOperations).
Supported = Callable[[Model | Model_1_3], list[bool]]


class HostOperatorsRefused(TFLiteImportError):
    """fallback=False and some operators would not run on the driver."""

    def __init__(self, graph: TFLiteGraph, host: set[int]):
        self.indexes = sorted(host)
        names = ", ".join(f"#{i} {graph.operators[i].name}{' (custom)' if graph.operators[i].custom else ''}"
                          for i in self.indexes)
        n = len(self.indexes)
        super().__init__(f"{n} operator{'s' if n != 1 else ''} would not run on the driver: {names}")


@dataclass
class Partition:
    on_host: bool
    ops: list[int]                      # operator indexes, in execution order
    inputs: list[int]                   # tensor indexes read from outside the partition
    outputs: list[int]                  # tensor indexes read after it, or model outputs
    imported: ImportedModel | None = None   # a driver partition's NNAPI model


@dataclass
class PartitionPlan:
    data: bytes                         # the .tflite file (host partitions are cut from it; b"" if none)
    graph: TFLiteGraph                  # as rewritten for import (rewrite.py; no tensors if no host)
    parts: list[Partition]
    skipped: list[int]                  # operators folded into constants or left unused
    file_ops: int                       # operators in the file (the rewrites may add copies)
    inputs: list[IOTensor] = field(default_factory=list)
    outputs: list[IOTensor] = field(default_factory=list)

    @property
    def whole(self) -> ImportedModel | None:
        """The NNAPI model when the driver runs all of the model, else None."""
        if len(self.parts) == 1 and not self.parts[0].on_host:
            return self.parts[0].imported
        return None

    @property
    def host_ops(self) -> list[int]:
        return [i for p in self.parts if p.on_host for i in p.ops]

    def describe(self, backend: str) -> str:
        """E.g. "212 operators: 2 partitions on opencl (208), 1 on the host (4: BATCH_MATMUL ×4)"."""
        driver = [p for p in self.parts if not p.on_host]
        host = [p for p in self.parts if p.on_host]
        text = f"{self.file_ops} operator{'s' if self.file_ops != 1 else ''}: "
        pieces = []
        if driver or not host:
            n = sum(1 for p in driver for i in p.ops if i < self.file_ops)
            pieces.append(f"{len(driver)} partition{'s' if len(driver) != 1 else ''} on {backend} ({n})")
        if host:
            names = Counter(self.graph.operators[i].name for i in self.host_ops)
            listed = ", ".join(name if k == 1 else f"{name} ×{k}" for name, k in names.most_common())
            pieces.append(f"{len(host)} on the host ({len(self.host_ops)}: {listed})")
        text += ", ".join(pieces)
        skipped = sum(1 for i in self.skipped if i < self.file_ops)
        if skipped:
            text += f"; {skipped} folded into constants or unused"
        return text


def plan_tflite(data: bytes, fallback: bool = True, supported: Supported | None = None,
                input_shapes: dict[str, list[int]] | None = None) -> PartitionPlan:
    """The partitions of the .tflite model `data` (TFLiteImportError when it cannot be run:
    HostOperatorsRefused when `fallback` is False and some operators would need the host);
    input_shapes as import_graph takes them."""
    graph = read_tflite(data)
    if input_shapes:
        fix_input_shapes(graph, input_shapes)
    file_ops = len(graph.operators)
    skip = rewrite(graph)
    inputs, _ = graph_io(graph)  # a boundary type numpy lacks: refused before any work
    first: TFLiteImportError | None = None
    try:
        whole = import_graph(read_tflite(data), input_shapes=input_shapes)  # its own reading: it rewrites
    except TFLiteFormatError:
        raise
    except TFLiteImportError as e:  # an operator, or a tensor type, NNAPI lacks: perhaps the host has it
        first = e
    else:
        flags = supported(whole.model) if supported is not None else None
        if flags is None or all(flags):
            ops = [op.index for op in graph.operators if op.index not in skip]
            part = Partition(False, ops, list(graph.inputs), list(graph.outputs), whole)
            # no host partition to cut: drop the weights, and the option tables that hold the file
            outline = replace(graph, tensors=[], subgraphs=[],
                              operators=[replace(op, options=None) for op in graph.operators])
            return PartitionPlan(b"", outline, [part], sorted(skip), file_ops, whole.inputs, whole.outputs)
    host = _trial_host_ops(graph, skip)
    if isinstance(first, UnsupportedOperatorError) and not host:
        host.add(first.index)  # refused after mapping: still that operator's doing
    known = {op.index for op in graph.operators}
    while True:
        parts = split(graph, skip, host)
        refused = _import_driver_parts(graph, parts, supported)
        if not refused:
            break
        if not refused <= known or refused <= host:  # no progress: report it as it is
            raise TFLiteImportError(f"cannot place operators {sorted(refused)} on the driver or the host")
        host |= refused
    if host and not fallback:
        raise HostOperatorsRefused(graph, host)
    return PartitionPlan(data, graph, parts, sorted(skip), file_ops, inputs, _outputs(graph, parts))


def _trial_host_ops(graph: TFLiteGraph, skip: set[int]) -> set[int]:
    """The operators whose mappers cannot express them in NNAPI."""
    host: set[int] = set()
    map_operators(new_table(graph)[0], skip, host)
    return host


def _outputs(graph: TFLiteGraph, parts: list[Partition]) -> list[IOTensor]:
    """The model's outputs: as the driver partition computing one sees it (its settled shape,
    its computed dtype), else as the file declares it."""
    by_tensor = {t: io for p in parts if p.imported is not None for t, io in zip(p.outputs, p.imported.outputs)}
    return [by_tensor.get(t) or io_of(graph.tensors[t]) for t in graph.outputs]


def _import_driver_parts(graph: TFLiteGraph, parts: list[Partition], supported: Supported | None) -> set[int]:
    """Import every driver partition; the operators that turned out not to run on the driver."""
    for p in parts:
        if p.on_host:
            continue
        try:
            p.imported = import_graph(subgraph(graph, p))
        except TFLiteFormatError:
            raise
        except TFLiteImportError as e:  # an operator NNAPI lacks, or an invalid NNAPI model
            if isinstance(e, UnsupportedOperatorError) and e.index in p.ops:
                return {e.index}
            refused = {i for i in p.ops if not _imports_alone(graph, i)}  # the operators invalid alone
            if not refused:
                raise  # the operators together, not one of them: the host cannot help
            return refused
        flags = supported(p.imported.model) if supported is not None else None
        if flags is not None and not all(flags):
            origins = map_operators(new_table(subgraph(graph, p))[0], set(), set())
            if len(origins) != len(flags):
                raise TFLiteImportError("the driver refuses operations of a partition nngpu cannot trace back "
                                        "to their operators")
            return {origins[k] for k, ok in enumerate(flags) if not ok}
    return set()


def _imports_alone(graph: TFLiteGraph, i: int) -> bool:
    """Whether operator i alone makes a valid NNAPI model."""
    op = graph.operators[i]
    reads = [t for t in op.inputs if t >= 0 and graph.tensors[t].data is None]
    try:
        import_graph(replace(graph, operators=[op], inputs=list(dict.fromkeys(reads)), outputs=list(op.outputs),
                             extra={}))
    except TFLiteFormatError:
        raise
    except TFLiteImportError:
        return False
    return True


def subgraph(graph: TFLiteGraph, part: Partition) -> TFLiteGraph:
    """The graph of one partition: the model's tensors (only those its operators touch matter),
    its operators (keeping their indexes, so errors name the model's operators), its boundary."""
    return replace(graph, operators=[graph.operators[i] for i in part.ops], inputs=list(part.inputs),
                   outputs=list(part.outputs), extra={})


def split(graph: TFLiteGraph, skip: set[int], host: set[int]) -> list[Partition]:
    """Partitions of the operators not in `skip`, on a topological order with maximal driver runs."""
    ops = [op for op in graph.operators if op.index not in skip]
    producer = {t: op.index for op in ops for t in op.outputs}
    waiting = {op.index: {producer[t] for t in op.inputs if t in producer} for op in ops}
    readers: dict[int, list[int]] = {}
    for i, deps in waiting.items():
        for d in deps:
            readers.setdefault(d, []).append(i)
    ready = sorted(i for i, deps in waiting.items() if not deps)
    order: list[tuple[bool, int]] = []
    on_host = all(i in host for i in ready)
    while ready:  # stay with one kind while any of its operators is ready: maximal runs
        same = [i for i in ready if (i in host) == on_host]
        if not same:
            on_host = not on_host
            continue
        i = same[0]
        ready.remove(i)
        order.append((on_host, i))
        for r in readers.get(i, []):
            waiting[r].discard(i)
            if not waiting[r]:
                ready.append(r)
        ready.sort()
    if len(order) != len(ops):
        raise TFLiteImportError("the model's operators form a cycle")
    groups: list[tuple[bool, list[int]]] = []
    for kind, i in order:
        if groups and groups[-1][0] == kind:
            groups[-1][1].append(i)
        else:
            groups.append((kind, [i]))
    return _boundaries(graph, groups)


def _boundaries(graph: TFLiteGraph, groups: list[tuple[bool, list[int]]]) -> list[Partition]:
    def crossing(t: int) -> bool:  # a tensor that flows between partitions (not a constant)
        tensor = graph.tensors[t]
        return t >= 0 and tensor.data is None and not tensor.is_variable

    reads = [[t for i in g for t in graph.operators[i].inputs if crossing(t)] for _, g in groups]
    made = [[t for i in g for t in graph.operators[i].outputs] for _, g in groups]
    parts = []
    for k, (kind, g) in enumerate(groups):
        own = set(made[k])
        later = {t for r in reads[k + 1:] for t in r} | set(graph.outputs)
        inputs = list(dict.fromkeys(t for t in reads[k] if t not in own))
        outputs = [t for t in dict.fromkeys(made[k]) if t in later]
        parts.append(Partition(kind, g, inputs, outputs))
    return parts


def graph_io(graph: TFLiteGraph):
    """The model's inputs and outputs as IOTensors (names, shapes, dtypes, quantization);
    TFLiteImportError names one whose type has no numpy dtype to hand it over in."""
    for kind, indexes in (("input", graph.inputs), ("output", graph.outputs)):
        for k, t in enumerate(indexes):
            tensor = graph.tensors[t]
            if NP_DTYPES.get(tensor.type) is None:
                raise TFLiteImportError(f"model {kind} {k} ({tensor.name}, tensor {t}): type {tensor.type_name} "
                                        f"is not supported")
    return [io_of(graph.tensors[t]) for t in graph.inputs], [io_of(graph.tensors[t]) for t in graph.outputs]
