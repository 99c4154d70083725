"""Runs corpus cases through a device on the sync / async / burst paths and judges them."""
from __future__ import annotations

import logging
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable, Iterable

from ..hal.types import ErrorStatus, ExecutionPreference, MeasureTiming, Model, OptionalTimePoint, OptionalTimeoutDuration, Priority
from ..driver.callbacks import ExecutionCallback, PreparedModelCallback
from .compare import check_multinomial, compare_output
from ..json_models import Execution, TestCase, build_model, build_request

log = logging.getLogger("nngpu.cts")

PATHS = ("sync", "async", "burst")
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
    raise ValueError(f"unknown path {path}")


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


class _Reasons(logging.Handler):
    """Collects the driver's logged rejection reasons while one case runs."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())

    def __enter__(self) -> "_Reasons":
        for name in ("nngpu.execution", "nngpu.device"):
            logger = logging.getLogger(name)
            logger.addHandler(self)
            logger.setLevel(logging.INFO)
        return self

    def __exit__(self, *exc) -> None:
        for name in ("nngpu.execution", "nngpu.device"):
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


def _verdict(problem: str | None) -> tuple[str, str]:
    return ("failed", problem) if problem else ("passed", "")


def run_case(device, backend: str, case: TestCase, paths: Iterable[str], measure: MeasureTiming = MeasureTiming.NO) -> list[Record]:
    with _Reasons() as reasons:
        records = _run_case(device, backend, case, list(paths), measure)
    for r in records:
        if r.result == "failed" and "returned" in r.detail:
            r.detail += reasons.last()
    return records


def _run_case(device, backend: str, case: TestCase, paths: list[str], measure: MeasureTiming) -> list[Record]:
    ops = sorted({t.name for t in case.operation_types()})

    def records(result: str, detail: str) -> list[Record]:
        return [Record(case.name, case.spec, case.version, p, backend, result, detail, ops) for p in paths]

    try:
        flat = not case.needs_1_3()
        model = build_model(case, flat)
    except Exception as e:  # a case the JSON reader cannot express
        return records("failed", f"cannot build model: {type(e).__name__}: {e}")
    query = device.getSupportedOperations_1_2 if flat else device.getSupportedOperations_1_3
    status, supported = query(model)
    if status != ErrorStatus.NONE:
        return records("passed", "model rejected as expected") if case.expect_failure else \
            records("failed", f"getSupportedOperations returned {ErrorStatus(status).name}")
    if not all(supported):
        missing = sorted({model_op_name(model, k, flat) for k, ok in enumerate(supported) if not ok})
        return records("skipped", "unsupported: " + ", ".join(missing))
    status, prepared = prepare_on(device, model, flat)
    if status != ErrorStatus.NONE or prepared is None:
        return records("passed", "preparation failed as expected") if case.expect_failure else \
            records("failed", f"prepareModel returned {ErrorStatus(status).name}")
    out = []
    for p in paths:
        ex = build_request(case)
        try:
            status, shapes, timing = execute_on(prepared, p, ex, flat, measure)
            result, detail = _judge(case, ex, ErrorStatus(status), shapes, timing, measure)
        except Exception as e:  # a runner or driver bug: report it as this case's failure
            log.exception("case %s path %s", case.name, p)
            result, detail = "failed", f"{type(e).__name__}: {e}"
        # where the first path's execution ran its operations
        placement = prepared.executor.placement() if not out else (0, 0)
        out.append(Record(case.name, case.spec, case.version, p, backend, result, detail, ops, placement))
    return out


def model_op_name(model, k: int, flat: bool) -> str:
    ops = model.operations if isinstance(model, Model) else model.main.operations
    return ops[k].type.name


def summarize(records: list[Record], operations: Iterable[str] = ()) -> tuple[str, dict[str, int]]:
    """The per-operation table and the totals. `operations` (the device's) get a row even when no
    case exercised them, marked, so a gap in the corpus is visible."""
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
    device = sum(r.placement[0] for r in records)
    host = sum(r.placement[1] for r in records)
    lines.append(f"operation instances run: {device} in device kernels, {host} on the host reference")
    return "\n".join(lines), totals


def filter_cases(cases: Iterable[TestCase], pattern: str | None) -> list[TestCase]:
    if not pattern:
        return list(cases)
    terms = [t for t in pattern.split(",") if t]
    return [c for c in cases if any(t in c.name or t == c.spec for t in terms)]


Progress = Callable[[Record], None]
