"""Runs corpus cases through a device on the sync / async / burst / fenced paths and judges them."""
from __future__ import annotations

import logging
import os
import select
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable, Iterable

from ..hal.types import (ErrorStatus, ExecutionPreference, MeasureTiming, Model, NativeHandle, OperandType,
                         OptionalTimePoint, OptionalTimeoutDuration, OutputShape, Priority, Request)
from ..driver.callbacks import ExecutionCallback, PreparedModelCallback
from .compare import check_multinomial, compare_output
from ..json_models import Execution, TestCase, build_model, build_request
from ..memory import allocate_shared
from ..modelutil import fully_specified

log = logging.getLogger("nngpu.cts")

PATHS = ("sync", "async", "burst", "fenced")
TIMEOUT_S = 120.0


@dataclass
class Record:
    name: str
    spec: str
    version: str
    path: str
    backend: str
    result: str  # passed | failed | skipped
    detail: str = ""
    operations: list[str] = field(default_factory=list)
    placement: tuple[int, int] = (0, 0)  # (operations run in device kernels, on the host), first path only

    def as_json(self) -> dict:
        return {k: getattr(self, k) for k in ("name", "spec", "version", "path", "backend", "result", "detail")}


def execute_on(prepared, path: str, ex: Execution, flat: bool, measure: MeasureTiming):
    """(status, outputShapes, timing) of one execution through `path`."""
    if path == "sync":
        if flat:
            return prepared.executeSynchronously(ex.request, measure)
        return prepared.executeSynchronously_1_3(ex.request, measure, OptionalTimePoint(), OptionalTimeoutDuration())
    if path == "async":
        cb = ExecutionCallback()
        if flat:
            launch = prepared.execute_1_2(ex.request, measure, cb)
        else:
            launch = prepared.execute_1_3(ex.request, measure, OptionalTimePoint(), OptionalTimeoutDuration(), cb)
        if not cb.wait(TIMEOUT_S):
            return ErrorStatus.GENERAL_FAILURE, [], None
        status, shapes, timing = cb.get()
        # A failure found while executing reaches only the callback; a failed launch must
        # report the same status to both.
        if launch != ErrorStatus.NONE and launch != status:
            log.warning("execute launch status %s differs from callback %s", launch, status)
        return status, shapes, timing
    if path == "burst":
        from ..burst import ExecutionBurstController

        with ExecutionBurstController.create(prepared) as burst:
            return burst.compute(ex.request, measure)
    if path == "fenced":
        return _execute_fenced_chain(prepared, ex, measure)
    raise ValueError(f"unknown path {path}")


def _wait_fence(handle: NativeHandle) -> bool:
    """Whether the fence signalled within TIMEOUT_S (an empty handle: the execution was done)."""
    if not handle.fds:
        return True
    poll = select.poll()
    poll.register(handle.fds[0], select.POLLIN)
    return bool(poll.poll(int(TIMEOUT_S * 1000)))


def _fenced(prepared, ex: Execution, wait_for: list[NativeHandle], measure: MeasureTiming):
    return prepared.executeFenced(ex.request, wait_for, measure, OptionalTimePoint(), OptionalTimeoutDuration(),
                                  OptionalTimeoutDuration())


def _execute_fenced_chain(prepared, ex: Execution, measure: MeasureTiming):
    """A chain of two fenced executions of the case: a first one into its own pools, then `ex`,
    which waits on the first's fence. executeFenced reports no output shapes: the judge takes the
    fully specified ones of the model."""
    first = _copy_of(ex)
    status, fence, first_cb = _fenced(prepared, first, [], measure)
    if status != ErrorStatus.NONE:
        return status, [], None
    try:
        status, last_fence, cb = _fenced(prepared, ex, [fence] if fence.fds else [], measure)
    finally:
        for fd in fence.fds:  # the caller's: the driver holds its own dup while it waits
            os.close(fd)
    if status != ErrorStatus.NONE:
        return status, [], None
    try:
        if not _wait_fence(last_fence):
            return ErrorStatus.GENERAL_FAILURE, [], None
    finally:
        for fd in last_fence.fds:
            os.close(fd)
    first_status = first_cb.getExecutionInfo()[0]
    status, timing, _ = cb.getExecutionInfo()
    if first_status != ErrorStatus.NONE:
        log.warning("the first fenced execution of the chain returned %s", ErrorStatus(first_status).name)
        return first_status, [], None
    if status != ErrorStatus.NONE:
        return status, [], None
    return status, [OutputShape(list(operand["dimensions"])) for operand, _ in ex.outputs], timing


def _copy_of(ex: Execution) -> Execution:
    """Another execution of the same request in fresh pools (the input bytes copied)."""
    inputs, outputs = allocate_shared(ex.input_pool.size), allocate_shared(ex.output_pool.size)
    inputs.map()[:] = ex.input_pool.map()
    return Execution(Request(ex.request.inputs, ex.request.outputs, [inputs, outputs]), inputs, outputs, ex.outputs)


def unspecified_outputs(ex: Execution) -> list[int]:
    """The outputs whose dimensions the case's model leaves open (0 or an unknown rank)."""
    return [k for k, (o, _) in enumerate(ex.outputs) if not fully_specified(OperandType[o["type"]], o["dimensions"])]


def prepare_on(device, model, flat: bool):
    cb = PreparedModelCallback()
    if flat:
        status = device.prepareModel_1_2(model, ExecutionPreference.FAST_SINGLE_ANSWER, [], [], bytes(32), cb)
    else:
        status = device.prepareModel_1_3(model, ExecutionPreference.FAST_SINGLE_ANSWER, Priority.MEDIUM,
                                         OptionalTimePoint(), [], [], bytes(32), cb)
    if not cb.wait(TIMEOUT_S):
        return ErrorStatus.GENERAL_FAILURE, None
    cb_status, prepared = cb.get()
    if status != ErrorStatus.NONE:
        return status, None
    return cb_status, prepared


_REASON_LOGGERS = ("nngpu.execution", "nngpu.device", "nngpu.fenced", "nngpu.prepared_model")


class _Reasons(logging.Handler):
    """Collects the driver's logged rejection reasons while one case runs."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())

    def __enter__(self) -> "_Reasons":
        for name in _REASON_LOGGERS:
            logger = logging.getLogger(name)
            logger.addHandler(self)
            logger.setLevel(logging.INFO)
        return self

    def __exit__(self, *exc) -> None:
        for name in _REASON_LOGGERS:
            logging.getLogger(name).removeHandler(self)

    def last(self) -> str:
        return f" ({self.messages[-1]})" if self.messages else ""


def _judge(case: TestCase, ex: Execution, status, shapes, timing, measure) -> tuple[str, str]:
    if case.expect_failure:
        return ("passed", f"failed as expected: {status.name}") if status != ErrorStatus.NONE \
            else ("failed", "execution succeeded, the case expects a failure")
    if status != ErrorStatus.NONE:
        return "failed", f"execution returned {ErrorStatus(status).name}"
    if timing is not None and measure == MeasureTiming.YES:
        if timing.timeOnDevice > timing.timeInDriver:
            return "failed", f"timeOnDevice {timing.timeOnDevice} > timeInDriver {timing.timeInDriver}"
    if len(shapes) != len(ex.outputs):
        return "failed", f"{len(shapes)} output shapes for {len(ex.outputs)} outputs"
    if case.multinomial_tolerance > 0:
        return _verdict(check_multinomial(case, ex.output_array(0, shapes[0].dimensions)))
    for k, (operand, _loc) in enumerate(ex.outputs):
        if operand["isIgnored"]:
            continue
        if list(shapes[k].dimensions) != list(operand["dimensions"]):
            return "failed", f"output {k}: shape {list(shapes[k].dimensions)}, expected {operand['dimensions']}"
        problem = compare_output(case, operand, ex.output_array(k, shapes[k].dimensions))
        if problem:
            return "failed", f"output {k}: {problem}"
    return "passed", ""


def _judge_unspecified(ex: Execution, status: ErrorStatus) -> tuple[str, str]:
    """executeFenced needs fully specified outputs: INVALID_ARGUMENT is right, and VTS
    FencedComputeTest skips such a case (it runs fenced only on fully specified outputs)."""
    open_dims = ", ".join(f"output {k} {ex.outputs[k][0]['dimensions']}" for k in unspecified_outputs(ex))
    if status == ErrorStatus.INVALID_ARGUMENT:
        return "skipped", f"fenced: INVALID_ARGUMENT, as required for outputs not fully specified ({open_dims})"
    return "failed", f"fenced: executeFenced returned {status.name} for outputs not fully specified ({open_dims})"


def _verdict(problem: str | None) -> tuple[str, str]:
    return ("failed", problem) if problem else ("passed", "")


class HidlFace:
    """How the runner reaches a device through the HIDL HAL (1.2 calls for models 1.2 can
    express, 1.3 ones for the rest)."""

    paths = PATHS

    @staticmethod
    def build(case: TestCase):
        flat = not case.needs_1_3()
        return build_model(case, flat), flat

    @staticmethod
    def supported(device, model, flat: bool) -> tuple[ErrorStatus, list[bool]]:
        return (device.getSupportedOperations_1_2 if flat else device.getSupportedOperations_1_3)(model)

    prepare = staticmethod(prepare_on)
    execute = staticmethod(execute_on)


def run_case(device, backend: str, case: TestCase, paths: Iterable[str], measure: MeasureTiming = MeasureTiming.NO,
             face=HidlFace) -> list[Record]:
    with _Reasons() as reasons:
        records = _run_case(device, backend, case, list(paths), measure, face)
    for r in records:
        if r.result == "failed" and "returned" in r.detail:
            r.detail += reasons.last()
    return records


def _run_case(device, backend: str, case: TestCase, paths: list[str], measure: MeasureTiming, face) -> list[Record]:
    def records(result: str, detail: str) -> list[Record]:
        return case_records(case, backend, paths, result, detail)

    try:
        model, flat = face.build(case)
    except Exception as e:  # a case the JSON reader cannot express
        return records("failed", f"cannot build model: {type(e).__name__}: {e}")
    status, supported = face.supported(device, model, flat)
    if status != ErrorStatus.NONE:
        return records("passed", "model rejected as expected") if case.expect_failure else \
            records("failed", f"getSupportedOperations returned {ErrorStatus(status).name}")
    if not all(supported):
        missing = sorted({model_op_name(model, k, flat) for k, ok in enumerate(supported) if not ok})
        return records("skipped", "unsupported: " + ", ".join(missing))
    status, prepared = face.prepare(device, model, flat)
    if status != ErrorStatus.NONE or prepared is None:
        return records("passed", "preparation failed as expected") if case.expect_failure else \
            records("failed", f"prepareModel returned {ErrorStatus(status).name}")
    out = []
    for p in paths:
        ex = build_request(case)
        try:
            status, shapes, timing = face.execute(prepared, p, ex, flat, measure)
            if p == "fenced" and unspecified_outputs(ex):
                result, detail = _judge_unspecified(ex, ErrorStatus(status))
            else:
                result, detail = _judge(case, ex, ErrorStatus(status), shapes, timing, measure)
        except Exception as e:  # a runner or driver bug: report it as this case's failure
            log.exception("case %s path %s", case.name, p)
            result, detail = "failed", f"{type(e).__name__}: {e}"
        # where the first path's execution ran its operations
        placement = _placement(prepared) if not out else (0, 0)
        out.append(Record(case.name, case.spec, case.version, p, backend, result, detail, _operations(case), placement))
    return out


def _operations(case: TestCase) -> list[str]:
    return sorted({t.name for t in case.operation_types()})


def case_records(case: TestCase, backend: str, paths: Iterable[str], result: str, detail: str) -> list[Record]:
    """The same verdict for `case` on every path (one that could not run them one by one)."""
    ops = _operations(case)
    return [Record(case.name, case.spec, case.version, p, backend, result, detail, ops) for p in paths]


def _placement(prepared) -> tuple[int, int]:
    """(in device kernels, on the host) of the last execution; (0, 0) for a model prepared in
    another process (nngpu.connect), whose executor is not here to ask."""
    executor = getattr(getattr(prepared, "core", prepared), "executor", None)   # an AIDL face's: its core's
    return executor.placement() if executor is not None else (0, 0)


def model_op_name(model, k: int, flat: bool) -> str:
    ops = model.operations if isinstance(model, Model) else model.main.operations
    return ops[k].type.name


def summarize(records: list[Record], operations: Iterable[str] = (),
              placement_known: bool = True) -> tuple[str, dict[str, int]]:
    """The per-operation table and the totals. `operations` (the device's) get a row even when no
    case exercised them, marked, so a gap in the corpus is visible. `placement_known`: False when
    the models ran in another process, which keeps where each operation ran to itself."""
    table: dict[str, dict[str, int]] = defaultdict(lambda: {"passed": 0, "failed": 0, "skipped": 0})
    totals = {"passed": 0, "failed": 0, "skipped": 0}
    for r in records:
        totals[r.result] += 1
        for op in r.operations:
            table[op][r.result] += 1
    for op in operations:
        table[op]  # noqa: B018 - creates the empty row
    width = max([len(k) for k in table] + [9])
    lines = [f"{'operation':<{width}}  passed  failed  skipped"]
    for op in sorted(table):
        row = table[op]
        note = "  (no corpus cases)" if not any(row.values()) else ""
        lines.append(f"{op:<{width}}  {row['passed']:6d}  {row['failed']:6d}  {row['skipped']:7d}{note}")
    covered = sum(1 for row in table.values() if any(row.values()))
    lines.append(f"{len(table)} operations, {covered} with corpus cases")
    if placement_known:
        device = sum(r.placement[0] for r in records)
        host = sum(r.placement[1] for r in records)
        lines.append(f"operation instances run: {device} in device kernels, {host} on the host reference")
    else:
        lines.append("operation instances run: not counted (the models ran in the service)")
    return "\n".join(lines), totals


def filter_cases(cases: Iterable[TestCase], pattern: str | None) -> list[TestCase]:
    if not pattern:
        return list(cases)
    terms = [t for t in pattern.split(",") if t]
    return [c for c in cases if any(t in c.name or t == c.spec for t in terms)]


Progress = Callable[[Record], None]
