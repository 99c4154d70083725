"""nngpu.profiling: the trace `nngpu run --profile` writes has every step of every execution and
the prepare phases; the op table adds up; recording off records nothing."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from nngpu import cli, profiling
from nngpu.backends import device_backends
from nngpu.cli.common import DEMO_MODEL
from nngpu.compiler.steps import GemmStep, HostStep, KernelStep, TemplateStep, Transfer
from nngpu.named_model import load_model
from nngpu.session import Session

REPEAT, WARMUP = 2, 1
RUNS = 1 + WARMUP + REPEAT          # `nngpu run` executes a first run, the warm-up, the repeats
PREPARE_PHASES = {"validate", "build executor", "plan segment", "compile", "upload constants"}
needs_opencl = pytest.mark.skipif("opencl" not in device_backends(), reason="no OpenCL device here")


def write_small_model(path: Path) -> Path:
    """A corpus-format model with a GEMM convolution (+ its im2col kernel), a view, a host
    operation on device backends (EMBEDDING_LOOKUP, with a download and an upload) and an ADD."""
    rng = np.random.default_rng(0)

    def operand(type_: str, dims: list[int], lifetime: str = "TEMPORARY_VARIABLE", data=()) -> dict:
        return {"channelQuant": None, "data": list(data), "dimensions": dims, "isIgnored": False,
                "lifetime": lifetime, "numberOfConsumers": 0, "scale": 0.0, "type": type_, "zeroPoint": 0}

    def const(type_: str, dims: list[int], data) -> dict:
        return operand(type_, dims, "CONSTANT_COPY", data)

    operands = [operand("TENSOR_FLOAT32", [1, 16, 16, 16], "SUBGRAPH_INPUT", rng.uniform(-1, 1, 4096).round(4)),
                const("TENSOR_FLOAT32", [64, 3, 3, 16], rng.uniform(-0.2, 0.2, 9216).round(4)),
                const("TENSOR_FLOAT32", [64], [0.01] * 64), const("INT32", [], [1]), const("INT32", [], [1]),
                const("INT32", [], [1]), operand("TENSOR_FLOAT32", [1, 16, 16, 64]),
                const("TENSOR_INT32", [2], [256, 64]), operand("TENSOR_FLOAT32", [256, 64]),
                const("TENSOR_INT32", [4], [0, 5, 7, 255]), operand("TENSOR_FLOAT32", [4, 64]),
                const("TENSOR_FLOAT32", [64], [0.5] * 64), const("INT32", [], [0]),
                operand("TENSOR_FLOAT32", [4, 64], "SUBGRAPH_OUTPUT")]
    for o in operands:
        o["data"] = [float(v) if o["type"] == "TENSOR_FLOAT32" else int(v) for v in o["data"]]
    operations = [{"type": "CONV_2D", "inputs": [0, 1, 2, 3, 4, 4, 5], "outputs": [6]},
                  {"type": "RESHAPE", "inputs": [6, 7], "outputs": [8]},
                  {"type": "EMBEDDING_LOOKUP", "inputs": [9, 8], "outputs": [10]},
                  {"type": "ADD", "inputs": [10, 11, 12], "outputs": [13]}]
    for op in operations:
        for i in op["inputs"]:
            operands[i]["numberOfConsumers"] += 1
    case = {"name": "small", "spec": "small", "version": "V1_2", "minSupportedVersion": "V1_0", "isRelaxed": False,
            "expectFailure": False, "expectedMultinomialDistributionTolerance": 0.0, "referenced": [],
            "main": {"inputIndexes": [0], "outputIndexes": [13], "operands": operands, "operations": operations}}
    path.write_text(json.dumps({"cases": [case], "spec": "small", "version": "V1_2"}))
    return path


@pytest.fixture(params=["demo", "small"])
def model(request, tmp_path) -> Path:
    return DEMO_MODEL if request.param == "demo" else write_small_model(tmp_path / "small.json")


def run_with_profile(tmp_path: Path, model: Path, backend: str) -> list[dict]:
    """The complete events of the trace `nngpu run MODEL --profile` writes."""
    trace = tmp_path / "t.json"
    rc = cli.main(["run", str(model), "--backend", backend, "--repeat", str(REPEAT), "--warmup", str(WARMUP),
                   "--profile", str(trace), "-q"])
    assert rc == 0
    doc = json.loads(trace.read_text())
    assert doc["displayTimeUnit"] == "ms"
    events = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    for e in events:
        assert {"name", "cat", "ts", "dur", "pid", "tid", "args"} <= e.keys() and e["dur"] >= 0
    return events


def by_execution(events: list[dict]) -> dict[int, list[dict]]:
    """The step events of each execution, checked to lie inside that execution's span."""
    spans = {e["args"]["index"]: e for e in events if e["cat"] == "execution"}
    assert sorted(spans) == list(range(RUNS))
    steps: dict[int, list[dict]] = {k: [] for k in spans}
    for e in events:
        if e["cat"] in profiling.STEPS:
            span = spans[e["args"]["execution"]]
            assert span["ts"] <= e["ts"] and e["ts"] + e["dur"] <= span["ts"] + span["dur"] + 1e-3
            steps[e["args"]["execution"]].append(e)
    return steps


def test_numpy_trace_has_every_operation_per_execution(tmp_path, model, capsys):
    operations = load_model(model).model.operations
    events = run_with_profile(tmp_path, model, "numpy")
    for steps in by_execution(events).values():
        assert [e["cat"] for e in steps] == ["op"] * len(operations)
        assert [e["args"]["ops"] for e in steps] == [[k] for k in range(len(operations))]
        assert [e["name"] for e in steps] == [op.type.name for op in operations]
    assert {e["name"] for e in events if e["cat"] == "prepare"} == {"validate", "build executor"}
    assert "trace written to" in capsys.readouterr().out


def _plan_steps(model: Path, backend: str) -> list:
    """The steps of the segments the plan runs for the model's own inputs."""
    named = load_model(model)
    with Session(named, backend) as s:
        s.run(named.example_inputs)
        return [step for seg in s.prepared.executor._last for step in seg.spec.steps]


@needs_opencl
def test_opencl_trace_has_every_step_per_execution(tmp_path, model):
    plan = _plan_steps(model, "opencl")
    graph = load_model(model).model
    events = run_with_profile(tmp_path, model, "opencl")
    for steps in by_execution(events).values():
        kernels = [e for e in steps if e["cat"] == "kernel"]
        launched = [s for s in plan if isinstance(s, (KernelStep, TemplateStep))]   # generated or from kernels/
        assert [e["args"]["kernel"] for e in kernels] == [s.name for s in launched]
        for e, s in zip(kernels, launched):
            if s.ops:  # the op types of the operations fused into it
                assert e["name"] == "+".join(graph.operations[k].type.name for k in sorted(s.ops))
                assert e["args"]["ops"] == sorted(s.ops)
        gemms = [e for e in steps if e["cat"] == "gemm"]
        assert [(e["args"]["m"], e["args"]["n"], e["args"]["k"]) for e in gemms] == \
               [(s.m, s.n, s.k) for s in plan if isinstance(s, GemmStep)]
        assert all(e["args"]["op_types"] == ["CONV_2D"] for e in gemms)
        assert [e["args"]["ops"] for e in steps if e["cat"] == "host"] == \
               [[s.op] for s in plan if isinstance(s, HostStep)]
        moves = [e for e in steps if e["cat"] == "transfer" and e["name"] != "outputs"]
        assert [(e["name"], e["args"]["tensor"]) for e in moves] == \
               [("upload" if s.to_device else "download", s.tensor) for s in plan if isinstance(s, Transfer)]
        # a download moves its tensor; an upload may move nothing (0 bytes): the kernels read an
        # input where the request's registered pool has it (runners.Upload.readers)
        assert all(e["args"]["bytes"] > 0 for e in moves if e["name"] == "download")
        assert [e["name"] for e in steps if e["cat"] == "transfer"][-1] == "outputs"
    assert PREPARE_PHASES <= {e["name"] for e in events if e["cat"] == "prepare"}


@needs_opencl
def test_small_model_covers_every_kind_of_step(tmp_path):
    events = run_with_profile(tmp_path, write_small_model(tmp_path / "small.json"), "opencl")
    kinds = Counter((e["cat"], e["name"]) for e in events if e["args"].get("execution") == RUNS - 1)
    assert {("gemm", "CONV_2D"), ("host", "EMBEDDING_LOOKUP"), ("kernel", "ADD"), ("transfer", "upload"),
            ("transfer", "download")} <= kinds.keys()


def test_op_table_adds_up_over_the_executions_asked_for():
    named = load_model(DEMO_MODEL)
    with profiling.recording() as prof, Session(named, "numpy") as s:
        for _ in range(4):
            s.run(named.example_inputs)
    rows = prof.op_table(skip=1)
    assert len(prof.executions(skip=1)) == 3
    assert {r.name for r in rows} == {op.type.name for op in named.model.operations} | {profiling.REST}
    assert all(r.count == 1 for r in rows if r.kind)
    assert sum(r.percent for r in rows) == pytest.approx(100.0)
    assert [r.total_ms for r in rows[:-1]] == sorted((r.total_ms for r in rows[:-1]), reverse=True)
    table = prof.format_op_table(skip=1)
    assert table.splitlines()[0].split()[:2] == ["op", "type"] and "CONV_2D" in table
    assert "validate" in prof.format_prepare()
    assert prof.op_table(skip=4) == [] and prof.format_op_table(skip=4) == "no executions recorded"


def test_recording_off_adds_no_events():
    named = load_model(DEMO_MODEL)
    assert profiling.current is None
    with profiling.recording() as prof:
        with profiling.recording() as inner:  # nested: the outer one is back afterwards
            assert profiling.current is inner
        assert profiling.current is prof
        with Session(named, "numpy") as s:
            s.run(named.example_inputs)
    assert profiling.current is None
    recorded = len(prof.events)
    assert recorded > 0 and not inner.events
    with Session(named, "numpy") as s:
        s.run(named.example_inputs)
    assert len(prof.events) == recorded
