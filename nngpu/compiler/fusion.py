"""Fusion: which operation outputs are never stored, their Compute evaluated inside the
consumer's kernel instead.

Driven by each OpSpec's pattern. An output folds into its consumer when it has exactly one use
(not a model output, not a value a later segment is specialised on) and
- it is ELEMENTWISE or INJECTIVE and its consumer is too: chains of arithmetic and copies
  become one kernel;
- it is a REDUCTION (convolution, pooling, ...) and its consumer is ELEMENTWISE: the
  consumer's arithmetic becomes the reduction's epilogue.
A reduction reads stored inputs (its loops would recompute a fused producer at every tap), and
a consumer larger than the value it reads (broadcasting, tiling) would recompute it for every
copy, so neither fuses."""
from __future__ import annotations

from collections import Counter
from ..ir.tensor import Compute, Stored, View, size_of
from ..ops.registry import Pattern
from ..runtime.interpreter import GraphRunner
from .infer import Inference
from .steps import Known

_CHAINS = (Pattern.ELEMENTWISE, Pattern.INJECTIVE)


Result = Compute | View | Stored


def results_of(built, num_outputs: int) -> list[Result]:
    """A device implementation's return value as one Result per output."""
    results = list(built) if isinstance(built, (list, tuple)) else [built]
    if len(results) != num_outputs or not all(isinstance(r, (Compute, View, Stored)) for r in results):
        raise TypeError(f"a device implementation gave {len(results)} results for {num_outputs} outputs")
    return results


def inlined_outputs(runner: GraphRunner, inference: Inference, on_device: set[int], known: Known,
                    enabled: bool) -> set[int]:
    """The operands (outputs of operations placed on the device) that stay inside their
    consumer's kernel."""
    if not enabled:
        return set()
    graph = runner.model.main
    uses = Counter(i for op in graph.operations for i in op.inputs)
    consumer = {i: k for k, op in enumerate(graph.operations) for i in op.inputs}
    keep = set(graph.outputIndexes) | set(inference.stop.values if inference.stop else ())
    out: set[int] = set()
    for k in inference.ops:
        if k not in on_device:
            continue
        producer = graph.operations[k]
        pattern = inference.nodes[k].spec.pattern
        for t in producer.outputs:
            c = consumer.get(t)
            if uses[t] != 1 or t in keep or c not in on_device:
                continue
            consumer_pattern = inference.nodes[c].spec.pattern
            fits = consumer_pattern in _CHAINS if pattern in _CHAINS else (
                pattern == Pattern.REDUCTION and consumer_pattern == Pattern.ELEMENTWISE)
            sizes = [size_of(known.shapes[o]) for o in graph.operations[c].outputs]
            if fits and all(s == size_of(known.shapes[t]) for s in sizes):
                out.add(t)
    return out
