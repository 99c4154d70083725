"""Per-step profiling: what TFLite's --enable_op_profiling and ONNX Runtime's profiler give, for
nngpu's prepare phases and executions.

    with nngpu.profiling.recording() as profile:
        ...                                  # prepare and execute models
    print(profile.format_op_table())         # time per op type over the executions
    profile.write_chrome_trace("t.json")     # ui.perfetto.dev, chrome://tracing

Recording is process-wide and off by default. When it is off every hook costs one check of the
module global `current` (per step, per operation, per execution, per prepare phase).

Device timing is honest, not free: OpenCL queues and CUDA streams run asynchronously, so a
host-side span around an enqueue measures only the enqueue. While recording, a device plan
therefore synchronises its backend after each step before it reports the step here (the
profiler only records; it never drives a device), and a step's span covers that step's device
work. This serialises the device with the host, so an execution is
slower while recording than without it; compare steps with each other, not with `nngpu run`.

Categories: "prepare" (validate, build executor, plan segment, compile, upload constants),
"execution" (one span per execution), "kernel", "gemm", "host" (a host-reference operation of a
device plan), "op" (an operation on the numpy reference executor), "transfer" (an upload or a
download of a tensor, and the outputs; bytes in args). Operations of IF / WHILE bodies run inside
their IF / WHILE operation's span."""
from __future__ import annotations

import json
import os
import threading
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ContextManager, Iterator

# The profiler recording now, or None: the one check every hook makes.
current: "Profiler | None" = None

STEPS = ("kernel", "gemm", "host", "op", "transfer")   # the categories the op table adds up
REST = "(rest of execution)"


@dataclass
class Event:
    cat: str
    name: str
    tid: int
    start: int                  # perf_counter_ns
    end: int
    args: dict[str, Any]
    execution: int | None       # the index of the execution it ran in, None outside one


@dataclass
class OpRow:
    """One line of the op table: an op type (or fused group) run as one kind of step."""

    name: str
    kind: str                   # a STEPS category; "" for the rest of the execution
    count: float                # per execution
    total_ms: float             # over all executions counted
    mean_us: float              # per execution
    percent: float              # of the executions' time
    device_us: float | None = None  # per execution, from the backend's events (None: it has none)


class Profiler:
    """The events of one recording (see the module docstring)."""

    def __init__(self) -> None:
        self.events: list[Event] = []
        self.origin = time.perf_counter_ns()
        self._lock = threading.Lock()
        self._local = threading.local()
        self._executions = 0
        self._threads: dict[int, str] = {}

    @staticmethod
    def now() -> int:
        return time.perf_counter_ns()

    # ---- recording ----------------------------------------------------------------------------
    def record(self, cat: str, name: str, start: int, /, **args: Any) -> None:
        """An event from `start` to now on this thread."""
        end = time.perf_counter_ns()
        tid = threading.get_native_id()
        event = Event(cat, name, tid, start, end, args, getattr(self._local, "execution", None))
        with self._lock:
            self._threads.setdefault(tid, threading.current_thread().name)
            self.events.append(event)

    @contextmanager
    def span(self, cat: str, name: str, /, **args: Any) -> Iterator[None]:
        start = time.perf_counter_ns()
        try:
            yield
        finally:
            self.record(cat, name, start, **args)

    @contextmanager
    def execution(self) -> Iterator[None]:
        """One execution: the steps recorded inside it on this thread are tagged with its index.
        One begun inside another (a driver partition of a partitioned TFLite model) is part of it."""
        if getattr(self._local, "execution", None) is not None:
            yield
            return
        with self._lock:
            index = self._executions
            self._executions += 1
        outer = getattr(self._local, "execution", None)
        self._local.execution = index
        start = time.perf_counter_ns()
        try:
            yield
        finally:
            self.record("execution", "execution", start, index=index)
            self._local.execution = outer

    def step(self, label: tuple[str, str, dict], start: int, device_ns: int | None = None,
             nbytes: int | None = None) -> None:
        """A device plan's step (its `step_labels` entry), begun at `start`, its device work done.
        `device_ns`: its time on the device from the backend's events, where it has them;
        `nbytes`: what a transfer moved."""
        cat, name, args = label
        if nbytes is not None:
            args = {**args, "bytes": nbytes}
        if device_ns is not None:
            args = {**args, "device_ns": device_ns}
        self.record(cat, name, start, **args)

    def operation(self, name: str, k: int, start: int) -> None:
        """Operation k (of type `name`) of the main graph on the reference executor, begun at `start`."""
        self.record("op", name, start, ops=[k], op_types=[name])

    # ---- reports ------------------------------------------------------------------------------
    def executions(self, skip: int = 0) -> list[Event]:
        """The execution spans, from execution index `skip` on."""
        return [e for e in self.events if e.cat == "execution" and e.args["index"] >= skip]

    def op_table(self, skip: int = 0) -> list[OpRow]:
        """Time per (op type, kind of step) over the executions from index `skip` on, longest
        first, then the execution time no step covers (request handling, plan lookup)."""
        runs = self.executions(skip)
        if not runs:
            return []
        total = sum(e.end - e.start for e in runs)
        groups: dict[tuple[str, str], list] = {}   # count, ns, device ns (None: no device times)
        for e in self.events:
            if e.cat in STEPS and e.execution is not None and e.execution >= skip:
                g = groups.setdefault((e.name, e.cat), [0, 0, None])
                g[0] += 1
                g[1] += e.end - e.start
                if "device_ns" in e.args:
                    g[2] = (g[2] or 0) + e.args["device_ns"]
        n = len(runs)

        def row(name: str, kind: str, count: int, ns: int, device_ns: int | None = None) -> OpRow:
            return OpRow(name, kind, count / n, ns / 1e6, ns / n / 1e3, 100.0 * ns / total if total else 0.0,
                         None if device_ns is None else device_ns / n / 1e3)

        rows = [row(name, kind, c, ns, dev) for (name, kind), (c, ns, dev) in groups.items()]
        rows.sort(key=lambda r: -r.total_ms)
        rest = max(total - sum(g[1] for g in groups.values()), 0)
        return rows + [row(REST, "", 0, rest)]

    def format_op_table(self, skip: int = 0) -> str:
        rows = self.op_table(skip)
        if not rows:
            return "no executions recorded"
        width = max(12, *(len(r.name) for r in rows))
        device = any(r.device_us is not None for r in rows)  # a column only where the backend timed kernels
        lines = [f"{'op type':<{width}}  {'kind':<8}  {'count':>5}  {'total ms':>10}  {'mean µs':>10}  {'% time':>6}"
                 + ("  device µs" if device else "")]
        for r in rows:
            count = f"{r.count:g}" if r.kind else ""
            dev = "" if r.device_us is None else f"{r.device_us:.1f}"
            lines.append(f"{r.name:<{width}}  {r.kind:<8}  {count:>5}  {r.total_ms:>10.3f}  {r.mean_us:>10.1f}  "
                         f"{r.percent:>6.1f}" + (f"  {dev:>9}" if device else ""))
        runs = self.executions(skip)
        total_ms = sum(e.end - e.start for e in runs) / 1e6
        lines.append(f"{'total':<{width}}  {'':<8}  {'':>5}  {total_ms:>10.3f}  {total_ms * 1e3 / len(runs):>10.1f}  "
                     f"{100.0:>6.1f}")
        return "\n".join(lines)

    def prepare_phases(self) -> list[tuple[int, str, int, float]]:
        """(depth, phase, count, total ms) of the "prepare" events, in the order first seen; a
        phase inside another one on the same thread is one level deeper."""
        prep = sorted((e for e in self.events if e.cat == "prepare"), key=lambda e: (e.start, -e.end))
        phases: dict[tuple[int, str], list] = {}
        for e in prep:
            depth = sum(1 for o in prep if o is not e and o.tid == e.tid and o.start <= e.start and e.end <= o.end)
            p = phases.setdefault((depth, e.name), [0, 0])
            p[0] += 1
            p[1] += e.end - e.start
        return [(depth, name, c, ns / 1e6) for (depth, name), (c, ns) in phases.items()]

    def format_prepare(self) -> str:
        phases = self.prepare_phases()
        if not phases:
            return "no prepare phases recorded"
        width = max(12, *(2 * d + len(n) for d, n, _, _ in phases))
        lines = [f"{'prepare phase':<{width}}  {'count':>5}  {'total ms':>10}"]
        lines += [f"{'  ' * d + n:<{width}}  {c:>5}  {ms:>10.3f}" for d, n, c, ms in phases]
        return "\n".join(lines)

    def chrome_trace(self) -> dict[str, Any]:
        """The Chrome trace event format: complete events ("ph": "X"), µs since the recording
        began, plus the process and thread names."""
        pid = os.getpid()
        with self._lock:
            events, threads = list(self.events), dict(self._threads)
        trace: list[dict[str, Any]] = [{"name": "process_name", "ph": "M", "pid": pid, "tid": 0,
                                        "args": {"name": "nngpu"}}]
        trace += [{"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}}
                  for tid, name in threads.items()]
        for e in events:
            args = e.args if e.execution is None else {**e.args, "execution": e.execution}
            trace.append({"name": e.name, "cat": e.cat, "ph": "X", "ts": (e.start - self.origin) / 1e3,
                          "dur": (e.end - e.start) / 1e3, "pid": pid, "tid": e.tid, "args": args})
        return {"traceEvents": trace, "displayTimeUnit": "ms"}

    def write_chrome_trace(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.chrome_trace()) + "\n")


@contextmanager
def recording() -> Iterator[Profiler]:
    """Record from here to the end of the block (process-wide)."""
    global current
    previous = current
    profiler = current = Profiler()
    try:
        yield profiler
    finally:
        current = previous


def span(cat: str, name: str, /, **args: Any) -> ContextManager[None]:
    """A span of the profiler recording now; nothing when none is."""
    return nullcontext() if current is None else current.span(cat, name, **args)


def execution() -> ContextManager[None]:
    """One execution of the profiler recording now; nothing when none is."""
    return nullcontext() if current is None else current.execution()


def step_labels(graph, steps: list) -> list[tuple[str, str, dict]]:
    """(category, name, args) of each step of a segment, named by the operation types it
    computes ("CONV_2D+RELU"; an im2col kernel or a GEMM call by the operation it is part of)."""
    from .compiler.steps import GemmStep, HostStep, KernelStep, TemplateStep

    def types(ops: list[int]) -> list[str]:
        return [graph.operations[k].type.name for k in sorted(ops)]

    labels: list[tuple[str, str, dict]] = []
    for s in steps:
        if isinstance(s, (KernelStep, TemplateStep)):
            labels.append(("kernel", "+".join(types(s.ops)),
                           {"kernel": s.name, "global_size": s.size, "ops": sorted(s.ops), "op_types": types(s.ops)}))
        elif isinstance(s, GemmStep):
            labels.append(("gemm", "+".join(types(s.ops)),
                           {"m": s.m, "n": s.n, "k": s.k, "b_transposed": s.b_transposed, "ops": sorted(s.ops),
                            "op_types": types(s.ops)}))
        elif isinstance(s, HostStep):
            labels.append(("host", types([s.op])[0], {"ops": [s.op], "op_types": types([s.op])}))
        else:
            labels.append(("transfer", "upload" if s.to_device else "download", {"tensor": s.tensor}))
    return labels

