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
from the start."""
from __future__ import annotations

import logging
import threading
from typing import Any, Mapping, Sequence

import numpy as np

from .. import profiling, progress
from ..backends.base import Backend, DeviceValue, ProgramSet, compiling_for
from ..hal.types import ErrorStatus
from ..ir.storage import STORAGE_DTYPE
from ..ops.lib.dtypes import dtype_of
from .capture import Run, split_runs
from .infer import Known, initial_known
from .interpreter import ExecutionError, GraphRunner
from .lower import (NO_DATA, GemmStep, HostStep, KernelStep, SegmentSpec, Transfer, declared_input_shapes, host_segment,
                    lower_segment)
from .replay import Replay

log = logging.getLogger("nngpu.plan")

CACHE_SIZE = 16


class _State:
    """One execution's values: host arrays by operand, and the inputs given as device values."""

    def __init__(self, graph, inputs: Sequence) -> None:
        self.host: dict[int, np.ndarray | None] = {}
        self.device_inputs: dict[int, DeviceValue] = {}
        for idx, value in zip(graph.inputIndexes, inputs):
            if isinstance(value, DeviceValue):
                self.device_inputs[idx] = value
            else:
                self.host[idx] = value  # None: an input the request leaves without a value


class Barrier:
    """Where shapes start to depend on data: the segments that follow, by key."""

    def __init__(self, values: Sequence[int], shapes: Sequence[int], make, make_host, limit: int) -> None:
        self.values, self.shapes = tuple(values), tuple(shapes)
        self.make = make              # key, state → the segment compiled for that key
        self.make_host = make_host    # → the segment running the rest on the host
        self.limit = limit            # specialisations compiled at most
        self.children: dict[tuple, Segment] = {}
        self.host: Segment | None = None

    def key(self, lookup) -> tuple:
        """The values (dtype, shape, bytes) and shapes this barrier's segments are keyed by."""
        vals = []
        for t in self.values:
            v = np.asarray(lookup(t))
            vals.append((v.dtype.str, v.shape, v.tobytes()))
        return tuple(vals) + tuple(tuple(lookup(t).shape) for t in self.shapes)

    def next(self, key: tuple, state: _State) -> "Segment":
        seg = self.children.get(key)
        if seg is not None:
            return seg
        if len(self.children) >= self.limit:
            if self.host is None:
                self.host = self.make_host()
            return self.host
        seg = self.children[key] = self.make(key, state)
        return seg


class Segment:
    """A SegmentSpec on a backend: buffers allocated, constants uploaded, kernels compiled, and
    each launch bound to its buffers, so that an execution only enqueues. Its steps run as the
    runs of capture.py: on CUDA a device run replays a captured graph (replay.py); step by step
    with `plan.graphs` off, while profiling (each step timed alone) and on other backends."""

    def __init__(self, plan: "Plan", spec: SegmentSpec, parent_buffers: Mapping[int, Any]) -> None:
        backend = plan.backend
        self.plan, self.spec = plan, spec
        slots = [backend.alloc(n) for n in spec.slot_sizes]
        self.buffers: dict[int, Any] = dict(parent_buffers)
        self.buffers.update({t: slots[s] for t, s in spec.slot_of.items()})
        for view, source in spec.aliases.items():
            self.buffers[view] = self.buffers[source]
        with profiling.span("prepare", "upload constants", bytes=sum(spec.tensors[t].nbytes for t in spec.constants)):
            for t, value in spec.constants.items():
                storage = STORAGE_DTYPE[spec.tensors[t].storage]
                backend.upload(self.buffers[t], np.ascontiguousarray(value, dtype=storage))
        self.kernels: dict[str, Any] = {}
        with compiling_for(plan.programs):
            with progress.bar(len(spec.kernels), f"compiling {backend.name} kernels", "kernel") as bar:
                for source, names in spec.units(backend.kernels_per_unit):
                    with profiling.span("prepare", "compile", backend=backend.name, kernels=names):
                        self.kernels.update(zip(names, backend.compile(source, names)))
                    bar.update(len(names))
            if any(isinstance(s, GemmStep) for s in spec.steps):
                backend.prepare_gemm()
        self.steps = [self._compile(s) for s in spec.steps]
        self.runs = split_runs(spec.steps)
        # the device runs as CUDA graphs, by run index (captured now for host inputs; see replay.py)
        self.replays = {i: Replay(self, r) for i, r in enumerate(self.runs) if not r.host} if backend.graphs else {}
        self.barrier = None
        self.ran = False                # the first run reports progress
        if spec.stop is not None:
            self.barrier = Barrier(spec.stop.values, spec.stop.shapes, self._next, self._host_rest, plan.limit)

    def _compile(self, step):
        """The step with everything bound that stays the same between executions (an OpenCL
        kernel's arguments are set here, once)."""
        b, backend = self.buffers, self.plan.backend
        if isinstance(step, KernelStep):
            return ("launch", backend.bind(self.kernels[step.name], step.size, [b[t] for t in step.args]))
        if isinstance(step, GemmStep):
            return ("gemm", backend.bind_gemm(*(b[t] for t in step.args), step.m, step.n, step.k))
        if isinstance(step, Transfer):
            return ("upload" if step.to_device else "download", step.tensor, b[step.tensor])
        return ("host", step)

    def _next(self, key: tuple, state: _State) -> "Segment":
        """The segment after this one's barrier, for the values of this execution."""
        known = self.spec.known.copy()
        stop = self.spec.stop
        for t in stop.values:
            known.values[t] = np.array(self.plan.lookup(state, self, t))
        for t in stop.shapes:
            known.shapes[t] = tuple(self.plan.lookup(state, self, t).shape)
        return self.plan.segment(stop.at, known, self.buffers)

    def _host_rest(self) -> "Segment":
        return self.plan.host_rest(self.spec.stop.at, self.spec.known, self.buffers)

    def run(self, state: _State, deadline_ns: int | None) -> None:
        first, self.ran = not self.ran, True
        if first and progress.enabled():
            # A driver may finish compiling a kernel at its first launch (PoCL does, for seconds):
            # step by step, so the bar moves with that work.
            with progress.bar(len(self.steps), "first run", "step") as bar:
                self._run(state, deadline_ns, bar)
        else:
            self._run(state, deadline_ns, None)

    def _run(self, state: _State, deadline_ns: int | None, bar: progress.Bar | None) -> None:
        prof = profiling.current  # None unless recording
        stepwise = prof is not None or bar is not None or not self.plan.graphs  # profiles time each step
        for index, run in enumerate(self.runs):
            replay = None if stepwise else self.replays.get(index)
            if replay is not None and replay.replay(state):
                continue
            self._steps(run, state, deadline_ns, prof, bar)
            if run.downloads:   # what follows (a host step, a barrier's key) reads them
                self.plan.backend.synchronize()
            if replay is not None:
                replay.capture(state)

    def _steps(self, run: Run, state: _State, deadline_ns: int | None, prof: profiling.Profiler | None,
               bar: progress.Bar | None) -> None:
        backend, plan = self.plan.backend, self.plan
        for i in range(run.start, run.stop):
            step = self.steps[i]
            start = prof.now() if prof else 0
            kind = step[0]
            device_ns = None
            if kind == "launch" or kind == "gemm":
                if prof:
                    device_ns = backend.timed(step[1])
                else:
                    step[1]()
            elif kind == "upload":
                plan.upload(state, self, step[1], step[2])
            elif kind == "download":
                plan.transfers += 1
                state.host[step[1]] = self.download(step[1], step[2])
            else:
                plan.host_step(state, self, step[1], deadline_ns)
            if prof:
                prof.step(self, i, start, state, device_ns)
            if bar is not None:
                backend.synchronize()
                bar.update(1)

    def download(self, t: int, buf) -> np.ndarray:
        """Tensor t's value from `buf`, valid after the backend's next synchronize()."""
        return self.plan.backend.download_async(buf, self.spec.known.shapes[t],
                                                dtype_of(self.plan.graph.operands[t].type))


class Plan:
    """The executor of a prepared model on a device backend (see the module docstring)."""

    def __init__(self, reference: GraphRunner, backend: Backend, fuse: bool = True, specialise: bool = True,
                 programs: ProgramSet | None = None) -> None:
        self.reference = reference
        self.programs = programs or ProgramSet()   # the binaries it compiled or was given
        self.model = reference.model
        self.graph = reference.model.main
        self.backend, self.fuse = backend, fuse
        self.graphs = backend.graphs    # replay device runs as captured graphs (CUDA); False: step by step
        self.transfers = 0
        self._lock = threading.Lock()   # executions share the planned buffers
        self._last: list[Segment] = []
        self.limit = CACHE_SIZE if specialise else 0
        self.entry = Barrier((), (), self._first, self._all_on_host, max(self.limit, 1))
        declared = declared_input_shapes(reference)
        if declared is not None:        # compile now what the model declares
            key = tuple(declared[i] for i in self.graph.inputIndexes)
            self._last = [self.entry.next(key, None)]

    # ---- compiling ----------------------------------------------------------------------------
    def _first(self, key: tuple, state) -> Segment:
        shapes = {i: s for i, s in zip(self.graph.inputIndexes, key) if s is not None}
        return self.segment(0, initial_known(self.reference, shapes), {})

    def _all_on_host(self) -> Segment:
        return self.host_rest(0, initial_known(self.reference, {}), {})

    def host_rest(self, start: int, known: Known, parent_buffers: Mapping[int, Any]) -> Segment:
        """The operations from `start` on the host reference (no shapes assumed)."""
        with profiling.span("prepare", "plan host segment", from_operation=start):
            spec = host_segment(self.reference, start, known, self.backend.dialect)
        return Segment(self, spec, parent_buffers)

    def segment(self, start: int, known: Known, parent_buffers: Mapping[int, Any]) -> Segment:
        with profiling.span("prepare", "plan segment", from_operation=start):
            spec = lower_segment(self.reference, start, known, self.backend.dialect, self.fuse)
        log.info("segment from operation %d: %d operations in %d kernels, %d on the host%s", start,
                 spec.device_ops, len(spec.kernels), spec.host_ops,
                 f", then a barrier at operation {spec.stop.at}" if spec.stop else "")
        return Segment(self, spec, parent_buffers)

    # ---- running ------------------------------------------------------------------------------
    def placement(self) -> tuple[int, int]:
        return sum(s.spec.device_ops for s in self._last), sum(s.spec.host_ops for s in self._last)

    def execute(self, inputs: Sequence, out_buffers: Mapping[int, Any], deadline_ns: int | None = None) -> list:
        with self._lock, profiling.execution():
            state = _State(self.graph, inputs)
            key = tuple(None if v is None else tuple(v.shape) for v in inputs)
            segments = [self.entry.next(key, state)]
            while True:
                seg = segments[-1]
                seg.run(state, deadline_ns)
                if seg.barrier is None:
                    break
                segments.append(seg.barrier.next(seg.barrier.key(lambda t: self.lookup(state, seg, t)), state))
            self._last = segments
            prof = profiling.current
            start = prof.now() if prof else 0
            outputs = [self._output(state, seg, k, out_buffers.get(k)) for k in range(len(self.graph.outputIndexes))]
            self.backend.synchronize()
            if prof:
                prof.record("transfer", "outputs", start, bytes=sum(int(v.nbytes) for v in outputs))
            return outputs

    def lookup(self, state: _State, seg: Segment, t: int) -> np.ndarray | None:
        """Operand t's value on the host: computed there, known to the plan, or an input (None
        for one the request left without a value)."""
        if t in state.host:
            return state.host[t]
        value = seg.spec.known.values.get(t)
        if value is not None:
            return value
        if t in state.device_inputs:
            self.transfers += 1
            state.host[t] = state.device_inputs[t].to_host()
            return state.host[t]
        raise ExecutionError(ErrorStatus.GENERAL_FAILURE, f"operand {t} has no host value")

    def upload(self, state: _State, seg: Segment, t: int, buf) -> None:
        if t in state.device_inputs:
            value = state.device_inputs[t]
            self.backend.copy(buf, value.buf, value.nbytes, 0, value.offset)
            return
        self.transfers += 1
        self.backend.upload(buf, np.ascontiguousarray(self.lookup(state, seg, t)))

    def host_step(self, state: _State, seg: Segment, step: HostStep, deadline_ns: int | None) -> None:
        operands = self.graph.operands
        values = [None if operands[t].lifetime in NO_DATA else self.lookup(state, seg, t) for t in step.inputs]
        outs = self.reference.run_operation(step.op, values, deadline_ns=deadline_ns)
        for t, value, shape in zip(step.outputs, outs, step.shapes):
            if shape is not None and tuple(value.shape) != shape:
                raise ExecutionError(ErrorStatus.GENERAL_FAILURE,
                                     f"operation {step.op}: the plan assumed shape {list(shape)} for operand {t}, "
                                     f"the reference gave {list(value.shape)}")
            state.host[t] = value

    def _output(self, state: _State, seg: Segment, k: int, buffer):
        """Output k: into `buffer`'s storage (an IBuffer), or device-side into `buffer`'s bytes
        when it is a DeviceValue region of a registered pool that the value fits (else, and for
        a host value, a host array: the caller writes it or reports the region too small)."""
        t = self.graph.outputIndexes[k]
        on_device = t in seg.buffers and t not in state.host
        if isinstance(buffer, DeviceValue):
            if on_device:
                value = DeviceValue(buffer.buf, seg.spec.known.shapes[t], dtype_of(self.graph.operands[t].type),
                                    self.backend, buffer.offset)
                if value.nbytes <= buffer.nbytes:
                    self.backend.copy(buffer.buf, seg.buffers[t], value.nbytes, buffer.offset)
                    return value
            buffer = None
        if buffer is None:
            return seg.download(t, seg.buffers[t]) if on_device else self.lookup(state, seg, t)
        shape = seg.spec.known.shapes[t] if on_device else tuple(self.lookup(state, seg, t).shape)
        value = DeviceValue(None, shape, dtype_of(self.graph.operands[t].type), self.backend)
        value.buf = buffer.storage(value.nbytes)
        if on_device:
            self.backend.copy(value.buf, seg.buffers[t], value.nbytes)
        else:
            self.backend.upload(value.buf, np.ascontiguousarray(self.lookup(state, seg, t)))
        return value

