"""A device plan: the prepared model as a chain of compiled segments, specialised on what its
shapes depend on.

The plan starts at an entry keyed by the input shapes. Each segment runs its steps and ends
either at the model's end or at a barrier: the values (or host-computed shapes) the rest of
the model's shapes depend on. The barrier's key is those values; the segment that follows is
compiled for that key the first time it is seen and cached. So every shape a kernel relies on
was derived from the values this execution actually has, and checking the key is the check
that the plan still applies: a tuple of shapes at the entry, the few bytes of a shape tensor at
a barrier. Host operations are checked against the shapes the plan assumed for them.

Compiling costs far more than an execution (bench/test_bench_dynamic.py), so a barrier
compiles at most CACHE_SIZE specialisations; keys seen after that, values that keep changing,
run what follows on the host reference instead of compiling at every execution (the entry
likewise, for input shapes). With `specialise=False` every barrier after the entry does that
from the start.

The plan compiles nothing itself: its Lowering (compiler/lower.py's SegmentLowering) turns a
start and what is known there into a SegmentSpec, and Segment (segment.py) puts that on the
backend."""
from __future__ import annotations

import logging
import threading
from typing import Any, Mapping, Protocol, Sequence

import numpy as np

from .. import profiling
from ..backends.base import Backend, DeviceValue, ProgramSet
from ..compiler.steps import GemmStep, KernelStep, Known, SegmentSpec, TemplateStep
from ..ops.lib.dtypes import dtype_of
from .executor import Deliver, Value
from .interpreter import GraphRunner
from .segment import Barrier, Segment
from .state import ExecutionState

log = logging.getLogger("nngpu.plan")

CACHE_SIZE = 16


class Lowering(Protocol):
    """How a plan gets its segments' steps (the compiler, for one model and target)."""

    def initial_known(self, input_shapes: dict[int, tuple[int, ...]]) -> Known: ...

    def segment(self, start: int, known: Known) -> SegmentSpec: ...

    def host_segment(self, start: int, known: Known) -> SegmentSpec: ...

    def declared_input_shapes(self) -> dict[int, tuple[int, ...]] | None: ...


class Plan:
    """The executor of a prepared model on a device backend (see the module docstring)."""

    def __init__(self, reference: GraphRunner, backend: Backend, lowering: Lowering, specialise: bool = True,
                 programs: ProgramSet | None = None) -> None:
        self.reference, self.lowering = reference, lowering
        self.programs = programs or ProgramSet()   # the binaries it compiled or was given
        self.model = reference.model
        self.graph = reference.model.main
        self.backend = backend.for_plan()   # its own queue: models overlap, captures stay its own
        self.graphs = backend.graphs    # replay device runs as captured graphs (CUDA); False: step by step
        self._lock = threading.Lock()   # executions share the planned buffers
        self._last: list[Segment] = []
        self.limit = CACHE_SIZE if specialise else 0
        self.entry = Barrier((), (), self._first, self._all_on_host, max(self.limit, 1))
        declared = lowering.declared_input_shapes()
        if declared is not None:        # compile now what the model declares
            key = tuple(declared[i] for i in self.graph.inputIndexes)
            self._last = [self.entry.next(key, None)]

    # ---- compiling ----------------------------------------------------------------------------
    def _first(self, key: tuple, state: ExecutionState | None) -> Segment:
        shapes = {i: s for i, s in zip(self.graph.inputIndexes, key) if s is not None}
        return self.segment(0, self.lowering.initial_known(shapes), {})

    def _all_on_host(self) -> Segment:
        return self.host_rest(0, self.lowering.initial_known({}), {})

    def host_rest(self, start: int, known: Known, parent_buffers: Mapping[int, Any]) -> Segment:
        """The operations from `start` on the host reference (no shapes assumed)."""
        with profiling.span("prepare", "plan host segment", from_operation=start):
            spec = self.lowering.host_segment(start, known)
        return Segment(self, spec, parent_buffers)

    def segment(self, start: int, known: Known, parent_buffers: Mapping[int, Any]) -> Segment:
        with profiling.span("prepare", "plan segment", from_operation=start):
            spec = self.lowering.segment(start, known)
        log.info("segment from operation %d: %d operations in %d kernels, %d on the host%s", start,
                 spec.device_ops, spec.kernel_count, spec.host_ops,
                 f", then a barrier at operation {spec.stop.at}" if spec.stop else "")
        return Segment(self, spec, parent_buffers)

    # ---- running ------------------------------------------------------------------------------
    def placement(self) -> tuple[int, int]:
        return sum(s.spec.device_ops for s in self._last), sum(s.spec.host_ops for s in self._last)

    def launches(self) -> int:
        return sum(isinstance(step, (KernelStep, TemplateStep, GemmStep)) for s in self._last for step in s.spec.steps)

    def execute(self, inputs: Sequence, deliver: Deliver | None = None, deadline_ns: int | None = None) -> list[Value]:
        """The Executor contract (runtime/executor.py). The outputs still on the device reach
        `deliver` as DeviceValues of the plan's buffers; its writes and the downloads of the
        outputs finish at the one wait that ends the execution."""
        with self._lock, profiling.execution():
            state = ExecutionState(self.graph, inputs, deadline_ns)
            seg = self._run(state)
            prof = profiling.current
            start = prof.now() if prof else 0
            outputs = [self._output(state, seg, t) for t in self.graph.outputIndexes]
            if deliver is None:
                outputs = [self._download(v) if isinstance(v, DeviceValue) else v for v in outputs]
            else:
                deliver(outputs)
            self.backend.synchronize()
            if prof:
                prof.record("transfer", "outputs", start, bytes=sum(int(v.nbytes) for v in outputs))
            return outputs

    def _run(self, state: ExecutionState) -> Segment:
        """Run the chain of segments for this execution's values; the last one."""
        key = tuple(self._input_shape(state, i) for i in self.graph.inputIndexes)
        segments = [self.entry.next(key, state)]
        while True:
            seg = segments[-1]
            seg.run(state)
            if seg.barrier is None:
                break
            segments.append(seg.barrier.next(seg.barrier.key(lambda t: seg.lookup(state, t)), state))
        self._last = segments
        return seg

    @staticmethod
    def _input_shape(state: ExecutionState, idx: int) -> tuple[int, ...] | None:
        value = state.device_inputs.get(idx)
        if value is None:
            value = state.host[idx]
        return None if value is None else tuple(value.shape)

    def _output(self, state: ExecutionState, seg: Segment, t: int) -> Value:
        """Operand t's value: on the device in the plan's buffer, else on the host."""
        if t in seg.buffers and t not in state.host:
            return DeviceValue(seg.buffers[t], tuple(seg.spec.known.shapes[t]), np.dtype(dtype_of(self.graph.operands[t].type)),
                               self.backend)
        return seg.lookup(state, t)

    def _download(self, value: DeviceValue) -> np.ndarray:
        return self.backend.download_async(value.buf, value.shape, value.dtype)
