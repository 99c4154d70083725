"""The numpy backend's executor: the reference interpreter precompiled into a plan.

Once per set of input shapes (at prepare when the model gives them all), the main graph is
walked with the shape functions (compiler/infer.py): operations of constants only are folded,
and an operation with static output shapes whose spec has `bind` gets a Kernel that writes into
preallocated outputs with its parameters parsed once. Every other operation runs its reference
as GraphRunner runs it (a fresh OpContext, the outputs cast and checked), among them those whose
shapes depend on values computed, and everything downstream of them: a shape is never guessed.
IF / WHILE bodies run on the GraphRunner.

The bound operations' outputs live in one byte buffer per execution: outputs whose lifetimes
(from the step that writes them to the last step that reads them, or the end for the graph's
outputs) do not overlap share bytes (compiler/memory_plan.py), a bound RESHAPE / SQUEEZE
(a view of its input) lives in its input's bytes, and an operation whose kernel may write over
its input writes into an input that dies there. An output that is not in its planned buffer
yet views the buffer set (a reference step or kernel returning a view of its input) is copied
out: nothing outlives the bytes it lives in.

Executions of one prepared model may run concurrently: each takes a buffer set of its own from
a free list, and the graph's outputs are copied out of it."""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from .. import profiling
from ..backends.base import DeviceValue
from ..hal.types import ErrorStatus, Operand
from ..ops.lib.dtypes import dtype_of, is_tensor, nbytes
from ..ops.node import DataDependent, NeedsValue
from ..ops.registry import Alias, Kernel, OpError, lookup
from .infer import Known, infer, initial_known, node_of
from .interpreter import ExecutionError, GraphRunner
from .memory_plan import first_fit

log = logging.getLogger("nngpu.numpy_plan")

Shapes = tuple[tuple[int, ...] | None, ...]
MAX_SHAPE_SETS = 8  # bound plans kept per model, one per set of input shapes seen
ALIGN = 64          # buffer offsets: a cache line, which suits every dtype


@dataclass(frozen=True)
class Step:
    k: int                           # the operation
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    kernel: Kernel | None            # None: the reference
    shapes: Shapes                   # static output shapes; None where known once it has run
    dtypes: tuple[np.dtype, ...]
    view: bool = False               # the kernel returns input 0 viewed in the output's shape
    in_place: bool = False           # the kernel may write its output over an input of that shape


Layout = list[tuple[int | None, ...]]  # by step: each output's byte offset (None: no buffer)


@dataclass
class Bound:
    """The steps for one set of input shapes, the values known before running, where each
    bound output lives in a buffer set, and the free buffer sets of its executions."""

    steps: list[Step]
    values: list[np.ndarray | None]  # by operand index: constants and folded values
    layout: Layout
    nbytes: int                      # one buffer set's size
    free: list["Buffers"] = field(default_factory=list)

    def unshared_nbytes(self) -> int:
        """The size a buffer set would have with a buffer per bound output (what sharing saves)."""
        return sum(nbytes(s, d) for st in self.steps if st.kernel for s, d in zip(st.shapes, st.dtypes))

    def take_buffers(self) -> "Buffers":
        try:
            return self.free.pop()   # atomic: concurrent executions never share a set
        except IndexError:
            raw = np.empty(self.nbytes + ALIGN, np.uint8)
            shift = -raw.ctypes.data % ALIGN
            arena = raw[shift: shift + self.nbytes]
            return Buffers(arena, [[None if at is None else
                                    arena[at: at + nbytes(s, d)].view(d).reshape(s)
                                    for at, s, d in zip(offsets, st.shapes, st.dtypes)]
                                   for st, offsets in zip(self.steps, self.layout)])


@dataclass
class Buffers:
    """One execution's buffer set: the bytes, and each step's outputs viewed in them."""

    arena: np.ndarray
    outs: list[list[np.ndarray | None]]


def layout(steps: list[Step], graph_outputs: Sequence[int]) -> tuple[Layout, int]:
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
    steps: list[Step] = []
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
    return Bound(steps, values, *layout(steps, graph.outputIndexes))


def _step(runner: GraphRunner, k: int, known: Known, dynamic: bool) -> Step:
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
    return Step(k, tuple(op.inputs), tuple(op.outputs), kernel, shapes, dtypes,
                view=alias == Alias.VIEW, in_place=alias == Alias.IN_PLACE)


def _owned(v: np.ndarray, arena: np.ndarray) -> np.ndarray:
    """v, or a copy of it where it views the buffer set outside the planned lifetimes (a view of
    an input), whose bytes a later output may take."""
    return v.copy() if np.may_share_memory(v, arena) else v


def _declared_shape(operand: Operand) -> tuple[int, ...] | None:
    """The shape every execution's value has, or None when the model leaves it open."""
    if not is_tensor(operand.type):
        return ()
    dims = tuple(operand.dimensions)
    return dims if dims and all(dims) else None


class NumpyPlan:
    """A prepared model's executor on the numpy backend (compiler/executor.py)."""

    def __init__(self, runner: GraphRunner):
        self.runner = runner
        self.model = runner.model
        self._bound: dict[Shapes, Bound] = {}
        self._lock = threading.Lock()
        declared = [_declared_shape(self.model.main.operands[i]) for i in self.model.main.inputIndexes]
        if all(s is not None for s in declared):  # all fully specified: bind now, at prepare
            try:
                self._get(tuple(declared))
            except Exception:  # a shape function bug: the executions report it, prepare succeeds as before
                log.exception("binding the numpy plan failed")

    def placement(self) -> tuple[int, int]:
        return 0, len(self.model.main.operations)

    def _get(self, key: Shapes) -> Bound:
        bound = self._bound.get(key)
        if bound is None:
            with self._lock:
                bound = self._bound.get(key)
                if bound is None:
                    inputs = self.model.main.inputIndexes
                    bound = bind(self.runner, {i: s for i, s in zip(inputs, key) if s is not None})
                    if len(self._bound) >= MAX_SHAPE_SETS:
                        self._bound.pop(next(iter(self._bound)))
                    self._bound[key] = bound
        return bound

    def execute(self, inputs: Sequence, out_buffers: Mapping[int, Any], deadline_ns: int | None = None) -> list[np.ndarray]:
        """The Executor contract: device values are read to the host, outputs are host arrays."""
        with profiling.execution():
            host = [v.to_host() if isinstance(v, DeviceValue) else v for v in inputs]
            return self.run(host, deadline_ns)

    def run(self, inputs: Sequence[np.ndarray | None], deadline_ns: int | None = None) -> list[np.ndarray]:
        """The main graph's outputs for these input values (None: omitted)."""
        main = self.model.main
        bound = self._get(tuple(None if v is None else tuple(v.shape) for v in inputs))
        values = list(bound.values)
        for idx, v in zip(main.inputIndexes, inputs):
            values[idx] = v
        buffers = bound.take_buffers()
        try:
            with np.errstate(all="ignore"):
                self._run_steps(bound.steps, buffers, values, deadline_ns)
            # copies: the buffers go back to the free list, for the next execution to overwrite
            return [np.array(values[i]) for i in main.outputIndexes]
        finally:
            bound.free.append(buffers)

    def _run_steps(self, steps: list[Step], buffers: Buffers, values: list, deadline_ns: int | None) -> None:
        prof = profiling.current
        arena = buffers.arena
        for step, outs in zip(steps, buffers.outs):
            start = prof.now() if prof else 0
            ins = [values[i] for i in step.inputs]
            if step.kernel is not None:
                try:
                    got = step.kernel(ins, outs)
                except OpError as e:
                    raise ExecutionError(ErrorStatus(e.status or ErrorStatus.GENERAL_FAILURE),
                                         f"operation {step.k} ({self._name(step)}): {e}") from e
                except Exception as e:  # a kernel bug must not escape a HAL method
                    log.exception("operation %d (%s): bound kernel raised", step.k, self._name(step))
                    raise ExecutionError(ErrorStatus.GENERAL_FAILURE,
                                         f"operation {step.k} ({self._name(step)}): {type(e).__name__}: {e}") from e
                for j, (v, planned) in enumerate(zip(got, outs)):
                    if v is not planned and not (j == 0 and step.view):
                        values[step.outputs[j]] = _owned(v, arena)
                    else:
                        values[step.outputs[j]] = v
            else:
                for i, v in zip(step.outputs, self._reference(step, ins, deadline_ns)):
                    values[i] = _owned(v, arena)
            if prof:
                prof.operation(self.runner, step.k, start)

    def _name(self, step: Step) -> str:
        return self.model.main.operations[step.k].type.name

    def _reference(self, step: Step, ins: list, deadline_ns: int | None) -> list[np.ndarray]:
        """The reference's outputs, cast and checked only where they differ from the static
        shape and type (which bound consumers rely on)."""
        outs = self.runner.call_reference(step.k, ins, 0, deadline_ns)
        checked = []
        for idx, v, shape, dtype in zip(step.outputs, outs, step.shapes, step.dtypes):
            if not (isinstance(v, np.ndarray) and v.dtype == dtype and v.shape == shape):
                v = GraphRunner.conform(step.k, self.model.main, idx, v)
                if shape is not None and v.shape != shape:
                    log.error("operation %d: shape function gave %s, the reference %s", step.k, shape, v.shape)
                    raise ExecutionError(ErrorStatus.GENERAL_FAILURE,
                                         f"operation {step.k}: output operand {idx} has shape {list(v.shape)}, "
                                         f"expected {list(shape)}")
            checked.append(v)
        return checked
