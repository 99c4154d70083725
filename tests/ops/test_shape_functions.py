"""Every operation's shape function agrees with its reference on the conformance corpus.

For each corpus model, the reference interpreter runs on the case's inputs; then each
operation's shape function is asked twice:
- with every input value known (as a plan specialised on them would): it must give exactly
  the shapes the reference produced, or say DataDependent;
- with only the model's constants known (as at prepare): it must give the same shapes, or ask
  for a value (NeedsValue) or say DataDependent. It must never give other shapes.
By default one case in four (by a hash of its name); --full-cts runs all of them."""
from __future__ import annotations

import warnings
import zlib
from pathlib import Path

import numpy as np
import pytest

from nngpu.runtime.interpreter import ExecutionError, GraphRunner
from nngpu.json_models import build_model, build_request, load_cases
from nngpu.hal.types import OperandLifeTime
from nngpu.modelutil import as_model_1_3
from nngpu.ops.lib.dtypes import dtype_of, is_tensor
from nngpu.ops.node import DataDependent, NeedsValue, OpNode
from nngpu.ops.registry import OpError, lookup

CORPUS = Path(__file__).resolve().parents[1] / "data" / "nnapi-cts"
SAMPLE_EVERY = 4


def case_inputs(case, model) -> list[np.ndarray | None]:
    """A corpus case's input values, as the driver reads them from its request."""
    ex = build_request(case)
    values = []
    for arg, idx in zip(ex.request.inputs, model.main.inputIndexes):
        operand = model.main.operands[idx]
        if arg.hasNoValue:
            values.append(None)
            continue
        raw = ex.input_pool.view(arg.location.offset, arg.location.length)
        arr = np.frombuffer(raw, dtype=dtype_of(operand.type)).copy()
        values.append(arr.reshape(operand.dimensions) if is_tensor(operand.type) else arr.reshape(()))
    return values


def _check(runner: GraphRunner, values: dict) -> list[str]:
    graph = runner.model.main
    problems = []
    shapes = {i: tuple(np.shape(v)) for i, v in values.items() if v is not None}
    constants = {i for i, o in enumerate(graph.operands)
                 if o.lifetime in (OperandLifeTime.CONSTANT_COPY, OperandLifeTime.CONSTANT_REFERENCE)}
    for k, op in enumerate(graph.operations):
        spec = lookup(op.type)
        if spec.shape is None:
            continue
        expected = [shapes.get(o) for o in op.outputs]
        for label, known in (("all values", lambda i: True), ("constants", lambda i: i in constants)):
            vals = [values.get(i) if known(i) else None for i in op.inputs]
            node = OpNode(spec, k, op, graph.operands, vals, shapes, runner.context.relaxed)
            try:
                got = node.output_shapes()
            except DataDependent:
                continue
            except NeedsValue as e:
                if label == "all values":
                    problems.append(f"op {k} {op.type.name}: asks for operand {e.operand} although all are known")
                continue
            except OpError as e:
                problems.append(f"op {k} {op.type.name} ({label}): shape function rejects it: {e}")
                continue
            if got != expected:
                problems.append(f"op {k} {op.type.name} ({label}): {got}, the reference gave {expected}")
    return problems


def _cases(full: bool):
    for case in load_cases(CORPUS):
        if case.expect_failure:
            continue
        if full or zlib.crc32((case.version + case.name).encode()) % SAMPLE_EVERY == 0:
            yield pytest.param(case, id=f"{case.version}/{case.name}")


def pytest_generate_tests(metafunc):
    if "shape_case" in metafunc.fixturenames:
        metafunc.parametrize("shape_case", list(_cases(metafunc.config.getoption("--full-cts"))))


def test_shape_functions_match_the_reference(shape_case):
    model = as_model_1_3(build_model(shape_case))
    runner = GraphRunner(model)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            values = runner.trace(case_inputs(shape_case, model))
        except ExecutionError:
            pytest.skip("the reference rejects these inputs")
    problems = _check(runner, values)
    assert not problems, "\n".join(problems)
