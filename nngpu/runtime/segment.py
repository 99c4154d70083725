"""A segment of a device plan: a SegmentSpec on a backend (buffers allocated, constants
uploaded, kernels compiled, each step bound to its buffers as a runner), and the barrier after
it (plan.py says how a plan chains them)."""
from __future__ import annotations

from typing import Any, Callable, Mapping, Protocol, Sequence

import numpy as np

from .. import profiling, progress
from ..backends.base import Backend, ProgramSet, compiling_for
from ..compiler.steps import GemmStep, HostStep, KernelStep, Known, SegmentSpec, TemplateStep, Transfer, writes
from ..hal.types import Subgraph
from ..ir.storage import STORAGE_DTYPE
from ..ops.lib.dtypes import dtype_of
from .capture import Run, split_runs
from .interpreter import GraphRunner
from .replay import Replay
from .runners import DeviceCall, Download, HostOperation, StepRunner, Upload
from .state import ExecutionState


class Owner(Protocol):
    """What a segment needs of its plan (plan.Plan)."""

    backend: Backend
    programs: ProgramSet
    reference: GraphRunner
    graph: Subgraph
    graphs: bool        # replay device runs as captured graphs
    limit: int          # specialisations a barrier compiles at most

    def segment(self, start: int, known: Known, parent_buffers: Mapping[int, Any]) -> "Segment": ...

    def host_rest(self, start: int, known: Known, parent_buffers: Mapping[int, Any]) -> "Segment": ...


class Barrier:
    """Where shapes start to depend on data: the segments that follow, by key."""

    def __init__(self, values: Sequence[int], shapes: Sequence[int], make: Callable[[tuple, ExecutionState | None], "Segment"],
                 make_host: Callable[[], "Segment"], limit: int) -> None:
        self.values, self.shapes = tuple(values), tuple(shapes)
        self.make = make              # key, state → the segment compiled for that key
        self.make_host = make_host    # → the segment running the rest on the host
        self.limit = limit            # specialisations compiled at most
        self.children: dict[tuple, Segment] = {}
        self.host: Segment | None = None

    def key(self, lookup: Callable[[int], np.ndarray]) -> tuple:
        """The values (dtype, shape, bytes) and shapes this barrier's segments are keyed by."""
        vals = []
        for t in self.values:
            v = np.asarray(lookup(t))
            vals.append((v.dtype.str, v.shape, v.tobytes()))
        return tuple(vals) + tuple(tuple(lookup(t).shape) for t in self.shapes)

    def next(self, key: tuple, state: ExecutionState | None) -> "Segment":
        seg = self.children.get(key)
        if seg is not None:
            return seg
        if len(self.children) >= self.limit:
            if self.host is None:
                self.host = self.make_host()
            return self.host
        seg = self.children[key] = self.make(key, state)
        return seg


def _constant_buffers(backend: Backend, spec: SegmentSpec) -> dict[int, Any]:
    """A buffer for each of the segment's constants (each in a slot of its own), on the constant's
    host memory where the backend reads it in place, else allocated and uploaded. spec.constants
    is emptied: an uploaded value is given up, so the backend's copy is the one kept."""
    written = {spec.aliases.get(t, t) for s in spec.steps for t in writes(s)}
    buffers: dict[int, Any] = {}
    while spec.constants:
        t, value = spec.constants.popitem()
        host = np.ascontiguousarray(value, dtype=STORAGE_DTYPE[spec.tensors[t].storage])
        del value
        size = spec.slot_sizes[spec.slot_of[t]]
        buf = backend.constant_buffer(host) if t not in written and host.nbytes >= size else None
        if buf is None:
            buf = backend.alloc(size)
            backend.upload(buf, host)
        buffers[t] = buf
    return buffers


class Segment:
    """Its steps run as the runs of capture.py: on CUDA a device run replays a captured graph
    (replay.py); step by step with `plan.graphs` off, while profiling (each step timed alone)
    and on other backends."""

    def __init__(self, plan: Owner, spec: SegmentSpec, parent_buffers: Mapping[int, Any]) -> None:
        backend = self.backend = plan.backend
        self.plan, self.spec = plan, spec
        with profiling.span("prepare", "upload constants", bytes=sum(spec.tensors[t].nbytes for t in spec.constants)):
            constants = _constant_buffers(backend, spec)
        taken = {spec.slot_of[t] for t in constants}
        slots = [None if s in taken else backend.alloc(n) for s, n in enumerate(spec.slot_sizes)]
        self.buffers: dict[int, Any] = dict(parent_buffers)
        self.buffers.update({t: slots[s] for t, s in spec.slot_of.items()})
        self.buffers.update(constants)
        for view, source in spec.aliases.items():
            self.buffers[view] = self.buffers[source]
        self.kernels: dict[str, Any] = {}
        with compiling_for(plan.programs):
            with progress.bar(spec.kernel_count, f"compiling {backend.name} kernels", "kernel") as bar:
                for source, names in spec.units(backend.kernels_per_unit):
                    with profiling.span("prepare", "compile", backend=backend.name, kernels=names):
                        self.kernels.update(zip(names, backend.compile(source, names)))
                    bar.update(len(names))
            if any(isinstance(s, GemmStep) for s in spec.steps):
                backend.prepare_gemm()
            # bound inside: a GEMM's program, compiled as it is bound, joins the compilation cache
            self.runners = [self._runner(s) for s in spec.steps]
        # not where a graph records the arguments; nor before a barrier: a later segment reads
        # this one's buffers
        if backend.rebinds and not backend.graphs and spec.stop is None:
            self._read_inputs_in_place()
        self.runs = split_runs(spec.steps)
        where = f"segment from operation {spec.start}"
        # the device runs as CUDA graphs, by run index (captured now for host inputs; see replay.py)
        self.replays = ({i: Replay(backend, self.runners, r, where) for i, r in enumerate(self.runs) if not r.host}
                        if backend.graphs else {})
        self._labels: list[tuple[str, str, dict]] | None = None
        self.barrier = None
        self.ran = False                # the first run reports progress
        if spec.stop is not None:
            self.barrier = Barrier(spec.stop.values, spec.stop.shapes, self._next, self._host_rest, plan.limit)

    def _runner(self, step) -> StepRunner:
        """The step with everything bound that stays the same between executions (an OpenCL
        kernel's arguments are set here, once)."""
        b, backend, known = self.buffers, self.backend, self.spec.known
        if isinstance(step, (KernelStep, TemplateStep)):
            return DeviceCall(backend, backend.bind(self.kernels[step.name], step.grid, [b[t] for t in step.args]))
        if isinstance(step, GemmStep):
            a, w, *extra, c = (b[t] for t in step.args)   # extra: the bias, the residual or then's buffers, A's scale
            scale = extra.pop() if step.scale_a else None
            epilogue = None if step.bounds is None else (extra[0], *step.bounds)
            if step.residual is not None:
                epilogue += (extra[1], *step.residual)
            then = None if step.then is None else (step.then, extra[1:])
            half_c, half_scale = step.half_storages(self.spec.tensors)
            return DeviceCall(backend, backend.bind_gemm(a, w, c, step.m, step.n, step.k, step.b_transposed,
                                                         epilogue, then, step.ldb, scale, step.relaxed, step.half,
                                                         half_c, half_scale))
        if isinstance(step, Transfer):
            # a relaxed temporary moves as its float16 storage (ExecutionState.lookup widens it)
            t = step.tensor
            dtype = np.dtype(np.float16 if t in known.half else dtype_of(self.plan.graph.operands[t].type))
            kind = Upload if step.to_device else Download
            return kind(backend, t, b[t], known, dtype)
        assert isinstance(step, HostStep)
        return HostOperation(self.plan.reference, self.plan.graph, step, known)

    def _read_inputs_in_place(self) -> None:
        """Each Upload's readers (runners.Upload), where only kernels read its tensor (or a view
        of it), as arguments they never write (a GEMM as its A), and it is no model output: an
        execution's device value is then read where it is, not copied."""
        spec, outputs = self.spec, set(self.plan.graph.outputIndexes)
        for upload, step in zip(self.runners, spec.steps):
            if not isinstance(upload, Upload):
                continue
            views = {step.tensor} | {v for v, source in spec.aliases.items() if source == step.tensor}
            readers: list | None = None if views & outputs else []
            for runner, other in zip(self.runners, spec.steps):
                if readers is None:
                    break
                if other is step or isinstance(other, HostStep) or not views & set(other.tensors):
                    continue   # a host step reads the execution's value itself
                kernel = isinstance(other, (KernelStep, TemplateStep, GemmStep))
                at = [i for i, t in enumerate(other.args) if t in views] if kernel else []
                if not at or views & set(writes(other)) or (isinstance(other, GemmStep) and at != [0]):
                    readers = None
                else:
                    readers += [(runner.call, i) for i in at]
            upload.readers = readers or []

    def _next(self, key: tuple, state: ExecutionState) -> "Segment":
        """The segment after this one's barrier, for the values of this execution."""
        known = self.spec.known.copy()
        stop = self.spec.stop
        for t in stop.values:
            known.values[t] = np.array(self.lookup(state, t))
        for t in stop.shapes:
            known.shapes[t] = tuple(self.lookup(state, t).shape)
        return self.plan.segment(stop.at, known, self.buffers)

    def _host_rest(self) -> "Segment":
        return self.plan.host_rest(self.spec.stop.at, self.spec.known, self.buffers)

    def lookup(self, state: ExecutionState, t: int) -> np.ndarray | None:
        return state.lookup(t, self.spec.known)

    def run(self, state: ExecutionState) -> None:
        first, self.ran = not self.ran, True
        if first and progress.enabled():
            # A driver may finish compiling a kernel at its first launch (PoCL does, for seconds):
            # step by step, so the bar moves with that work.
            with progress.bar(len(self.runners), "first run", "step") as bar:
                self._run(state, bar)
        else:
            self._run(state, None)

    def _run(self, state: ExecutionState, bar: progress.Bar | None) -> None:
        prof = profiling.current  # None unless recording
        stepwise = prof is not None or bar is not None or not self.plan.graphs  # profiles time each step
        for index, run in enumerate(self.runs):
            replay = None if stepwise else self.replays.get(index)
            if replay is not None and replay.replay(state):
                continue
            self._steps(run, state, prof, bar)
            if run.downloads:   # what follows (a host step, a barrier's key) reads them
                self.backend.synchronize()
            if replay is not None:
                replay.capture(state)

    def _steps(self, run: Run, state: ExecutionState, prof: profiling.Profiler | None, bar: progress.Bar | None) -> None:
        for i in range(run.start, run.stop):
            runner = self.runners[i]
            if prof is None:
                runner(state)
            else:
                start = prof.now()
                device_ns = runner.timed(state)
                self.backend.synchronize()  # the step's span covers its device work
                prof.step(self.labels()[i], start, device_ns, runner.moved_bytes(state))
            if bar is not None:
                self.backend.synchronize()
                bar.update(1)

    def labels(self) -> list[tuple[str, str, dict]]:
        if self._labels is None:
            self._labels = profiling.step_labels(self.plan.graph, self.spec.steps)
        return self._labels
