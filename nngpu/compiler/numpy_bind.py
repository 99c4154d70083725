"""The numpy plan's binding (runtime/numpy_plan.py runs it): the main graph walked with the
shape functions (infer.py) once per set of input shapes. Operations of constants only are folded;
an operation with static output shapes whose spec has `bind` gets a Kernel that writes into
preallocated outputs with its parameters parsed once (8-bit table lookups then compose:
numpy_fuse.py); every other operation is left to the reference, among them those whose shapes
depend on values computed, and everything downstream of them: a shape is never guessed.

The bound operations' outputs live in one byte buffer per execution: outputs whose lifetimes
(from the step that writes them to the last step that reads them, or the end for the graph's
outputs) do not overlap share bytes (memory_plan.py), a bound RESHAPE / SQUEEZE (a view of its
input) lives in its input's bytes, and an operation whose kernel may write over its input writes
into an input that dies there."""
from __future__ import annotations

import logging
from typing import Mapping, Sequence

import numpy as np

from ..ops.lib.dtypes import dtype_of, nbytes
from ..ops.node import DataDependent, NeedsValue
from ..ops.registry import Alias, OpError, lookup
from ..runtime.interpreter import GraphRunner
from ..runtime.numpy_plan import ALIGN, NumpyPlan
from .infer import infer, initial_known, node_of
from .memory_plan import first_fit
from .numpy_fuse import fuse_byte_tables
from .steps import Bound, BoundStep, Known, Layout

log = logging.getLogger("nngpu.numpy_plan")


def layout(steps: list[BoundStep], graph_outputs: Sequence[int]) -> tuple[Layout, int]:
    """Where each bound output lives in a buffer set, and the set's size in bytes.

    A storage group is an output with bytes of its own and the outputs living in its bytes
    (views of it, outputs written over it in place); it is live from the step writing it to the
    last step reading any member, or to the end (len(steps)) when a member is a graph output."""
    end = len(steps)
    last_read: dict[int, int] = {}
    for s, st in enumerate(steps):
        for i in st.inputs:
            last_read[i] = s
    for i in graph_outputs:
        last_read[i] = end
    meta: dict[int, tuple[tuple[int, ...], np.dtype]] = {}
    root: dict[int, int] = {}        # operand -> the group whose bytes it lives in
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for s, st in enumerate(steps):
        if st.kernel is None:
            continue                 # the reference's outputs are fresh arrays
        for j, (o, shape, dtype) in enumerate(zip(st.outputs, st.shapes, st.dtypes)):
            meta[o] = (shape, dtype)
            into = None
            if j == 0 and st.view and st.inputs[0] in root:
                into = root[st.inputs[0]]
            elif j == 0 and st.in_place:
                into = next((root[i] for i in st.inputs
                             if i in root and last[root[i]] <= s and meta[i] == (shape, dtype)), None)
            if into is None:
                into, first[o], last[o] = o, s, s
            root[o] = into
            last[into] = max(last[into], last_read.get(o, s))
    slot_of, sizes = first_fit(first, last, lambda t: -(-max(nbytes(*meta[t]), 1) // ALIGN) * ALIGN,
                               lambda t: False)
    starts = np.concatenate([[0], np.cumsum(sizes, dtype=np.int64)]).tolist()
    offsets = [tuple(starts[slot_of[root[o]]] if o in root else None for o in st.outputs)
               if st.kernel else (None,) * len(st.outputs) for st in steps]
    return offsets, int(starts[-1])


def bind(runner: GraphRunner, input_shapes: Mapping[int, tuple[int, ...]]) -> Bound:
    """The plan of the main graph for these model-input shapes (operand index -> shape)."""
    graph = runner.model.main
    known = initial_known(runner, dict(input_shapes))
    steps: list[BoundStep] = []
    start = 0
    while start < len(graph.operations):
        inf = infer(runner, start, known)
        for k in inf.ops:
            if k not in inf.folded:
                steps.append(_step(runner, k, known, dynamic=k in inf.host_only))
        if inf.stop is None:
            break
        start = inf.stop.at
        if inf.stop.values:  # operation `at` needs a value computed at run time for its shapes
            steps.append(_step(runner, start, known, dynamic=True))
            start += 1
    values: list[np.ndarray | None] = [None] * len(graph.operands)
    for idx, v in known.values.items():
        values[idx] = v
    steps = fuse_byte_tables(steps, graph.outputIndexes)
    return Bound(steps, values, *layout(steps, graph.outputIndexes))


def _step(runner: GraphRunner, k: int, known: Known, dynamic: bool) -> BoundStep:
    graph = runner.model.main
    op = graph.operations[k]
    shapes = tuple(known.shapes.get(i) for i in op.outputs)
    dtypes = tuple(dtype_of(graph.operands[i].type) for i in op.outputs)
    kernel = None
    if not dynamic and all(s is not None for s in shapes):
        node = node_of(runner, k, known)
        if node.spec.bind is not None:
            try:
                kernel = node.spec.bind(node)
            except (OpError, NeedsValue, DataDependent) as e:  # the reference reports it, if anything
                log.debug("operation %d (%s): not bound: %s", k, op.type.name, e)
            except Exception:  # a bind bug must not fail prepare: the reference still runs
                log.exception("operation %d (%s): bind raised", k, op.type.name)
    alias = lookup(op.type).alias if kernel is not None else Alias.NONE
    return BoundStep(k, tuple(op.inputs), tuple(op.outputs), kernel, shapes, dtypes,
                view=alias == Alias.VIEW, in_place=alias == Alias.IN_PLACE)




def numpy_plan(runner: GraphRunner) -> NumpyPlan:
    """A prepared model's executor on the numpy backend."""
    return NumpyPlan(runner, bind)
