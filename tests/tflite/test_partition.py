"""Partitioned execution of TFLite models with operators nngpu cannot lower: the split, the run
on numpy and every device backend against TFLite on the whole model, the placement message,
--no-fallback and the refusals, each one line with exit 2 from the CLI."""
from __future__ import annotations

import re

import numpy as np
import pytest

pytest.importorskip("tflite", reason="the `tflite` flatbuffer package is not installed")
pytest.importorskip("ai_edge_litert.interpreter", reason="ai-edge-litert is not installed")

from nngpu.backends import device_backends  # noqa: E402
from nngpu.hal.types import OperationType  # noqa: E402
from nngpu.session import Session  # noqa: E402
from nngpu.tflite.host import HostOperatorError  # noqa: E402
from nngpu.tflite.partition import HostOperatorsRefused, plan_tflite  # noqa: E402

from .tfl_util import assert_close, run_reference  # noqa: E402
from .tflbuild import FLOAT32, INT32, TFLModel, opt  # noqa: E402

BACKENDS = ["numpy", *device_backends()]
RNG = np.random.default_rng(21)
SHAPE = [2, 5]


def _x() -> np.ndarray:
    return RNG.uniform(-1, 1, SHAPE).astype(np.float32)


def _binary(m: TFLModel, code: str, a: int, b: int, name: str) -> int:
    out = m.tensor(name, SHAPE)
    table = {"ADD": "AddOptions", "MUL": "MulOptions", "SUB": "SubOptions"}[code]
    m.op(code, [a, b], [out], table, lambda bld: opt(bld, table, FusedActivationFunction=0))
    return out


def _cumsum(m: TFLModel, x: int, name: str, axis: int = 1, axis_type: int = INT32) -> int:
    out = m.tensor(name, SHAPE)
    ax = m.const(f"{name}_axis", np.array(axis, np.int32 if axis_type == INT32 else np.float32), axis_type)
    m.op("CUMSUM", [x, ax], [out], "CumsumOptions", lambda b: opt(b, "CumsumOptions", Exclusive=False, Reverse=False))
    return out


def _middle() -> bytes:
    """ADD -> CUMSUM -> MUL: a host operator between two driver ones."""
    m = TFLModel()
    x = m.tensor("x", SHAPE)
    a = _binary(m, "ADD", x, x, "a")
    c = _cumsum(m, a, "c")
    return m.build([x], [_binary(m, "MUL", c, x, "y")])


def _host_first() -> bytes:
    """CUMSUM -> SUB (reads the model input too): the model starts on the host."""
    m = TFLModel()
    x = m.tensor("x", SHAPE)
    c = _cumsum(m, x, "c", axis=0)
    return m.build([x], [_binary(m, "SUB", c, x, "y")])


def _host_last() -> bytes:
    """MUL -> CUMSUM, and the MUL's output is a model output as well: it ends on the host."""
    m = TFLModel()
    x, z = m.tensor("x", SHAPE), m.tensor("z", SHAPE)
    p = _binary(m, "MUL", x, z, "p")
    return m.build([x, z], [_cumsum(m, p, "y"), p])


def _branches() -> bytes:
    """Two independent CUMSUMs of the input, then driver operators that read both: one host
    partition (not two) when driver runs are maximal."""
    m = TFLModel()
    x = m.tensor("x", SHAPE)
    h0 = _cumsum(m, x, "h0", axis=0)
    s = _binary(m, "ADD", h0, x, "s")
    h1 = _cumsum(m, x, "h1", axis=1)
    return m.build([x], [_binary(m, "MUL", s, h1, "y")])


def _write(tmp_path, data: bytes, name: str = "m.tflite") -> str:
    path = tmp_path / name
    path.write_bytes(data)
    return str(path)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("build, n_inputs, placement", [
    (_middle, 1, "3 operators: 2 partitions on {b} (2), 1 on the host (1: CUMSUM)"),
    (_host_first, 1, "2 operators: 1 partition on {b} (1), 1 on the host (1: CUMSUM)"),
    (_host_last, 2, "2 operators: 1 partition on {b} (1), 1 on the host (1: CUMSUM)"),
    (_branches, 1, "4 operators: 1 partition on {b} (2), 1 on the host (2: CUMSUM ×2)"),
])
def test_partitioned_run_matches_tflite_on_the_whole_model(tmp_path, backend, build, n_inputs, placement):
    data = build()
    path = _write(tmp_path, data)
    inputs = [_x() for _ in range(n_inputs)]
    with Session(path, backend) as s:
        assert s.placement == placement.format(b=backend)
        assert s.prepared is None  # no one prepared model: one per driver partition
        got = list(s.run(inputs).values())
        assert_close(run_reference(data, inputs, xnnpack=False), got, rel=1e-6)
        first = [g.copy() for g in got]
        s.run([-a for a in inputs])  # a second run leaves the first one's outputs alone
        assert all(np.array_equal(f, g) for f, g in zip(first, got))


def test_branches_make_one_host_partition():
    plan = plan_tflite(_branches())
    assert [(p.on_host, p.ops) for p in plan.parts] == [(True, [0, 2]), (False, [1, 3])]
    host, driver = plan.parts
    assert host.inputs == [0] and host.outputs == [plan.graph.operators[0].outputs[0],
                                                   plan.graph.operators[2].outputs[0]]
    assert driver.inputs == [*host.outputs[:1], 0, host.outputs[1]]


def test_a_whole_model_is_one_driver_partition(tmp_path):
    m = TFLModel()
    x = m.tensor("x", SHAPE)
    path = _write(tmp_path, m.build([x], [_binary(m, "ADD", x, x, "y")]))
    with Session(path, "numpy", fallback=False) as s:
        assert s.placement == "1 operator: 1 partition on numpy (1)"
        assert s.prepared is not None
        np.testing.assert_array_equal(s.run([np.ones(SHAPE, np.float32)])["y"], np.full(SHAPE, 2, np.float32))


def test_burst_through_every_driver_partition(tmp_path):
    pytest.importorskip("nngpu.burst")
    data = _middle()
    x = _x()
    with Session(_write(tmp_path, data), "numpy", burst=True) as s:
        assert_close(run_reference(data, [x], xnnpack=False), list(s.run([x]).values()), rel=1e-6)


def test_relaxed_reaches_every_driver_partition(tmp_path, caplog):
    import logging

    data = _middle()   # two driver partitions around a host one
    x = _x()
    with caplog.at_level(logging.INFO, logger="nngpu.device"), \
            Session(_write(tmp_path, data), "numpy", relaxed=True) as s:
        assert_close(run_reference(data, [x], xnnpack=False), list(s.run([x]).values()), rel=1e-6)
    assert len([r for r in caplog.records if r.getMessage().startswith("relaxComputationFloat32toFloat16 on")]) == 2


def test_driver_refusal_moves_operators_to_the_host():
    """An operation getSupportedOperations refuses puts its operator on the host, like an
    operator with no NNAPI mapping."""
    from nngpu.driver.device import Device
    from nngpu.modelutil import as_model_1_3

    device = Device("numpy")

    def no_mul(model) -> list[bool]:
        _, flags = device.getSupportedOperations_1_3(as_model_1_3(model))
        ops = as_model_1_3(model).main.operations
        return [ok and op.type != OperationType.MUL for ok, op in zip(flags, ops)]

    plan = plan_tflite(_middle(), supported=no_mul)
    assert [(p.on_host, p.ops) for p in plan.parts] == [(False, [0]), (True, [1, 2])]
    assert plan.describe("numpy") == "3 operators: 1 partition on numpy (1), 1 on the host (2: CUMSUM, MUL)"


def test_no_fallback_names_every_host_operator(tmp_path):
    path = _write(tmp_path, _branches())
    with pytest.raises(HostOperatorsRefused) as e:
        Session(path, "numpy", fallback=False)
    assert str(e.value) == "2 operators would not run on the driver: #0 CUMSUM, #2 CUMSUM"
    assert e.value.indexes == [0, 2]


def _custom() -> bytes:
    m = TFLModel()
    x = m.tensor("x", SHAPE)
    a = _binary(m, "ADD", x, x, "a")
    c = m.tensor("c", SHAPE)
    m.op("MyCustomOp", [a], [c], custom=True)
    return m.build([x], [_binary(m, "MUL", c, x, "y")])


def test_custom_operator_without_a_host_implementation_is_refused(tmp_path):
    with pytest.raises(HostOperatorError, match=r"^operator #1 MyCustomOp: a custom operator"):
        Session(_write(tmp_path, _custom()), "numpy")


# ---- the CLI ---------------------------------------------------------------------------------
def _one_line(capsys, argv: list[str], code: int, *needles: str) -> str:
    from nngpu.cli import main

    assert main(argv) == code
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in err[0], err
    for n in needles:
        assert n in err[0], err[0]
    return err[0]


def test_cli_run_prints_the_placement(tmp_path, capsys):
    import json

    from nngpu.cli import main

    path = _write(tmp_path, _middle())
    report = tmp_path / "r.json"
    assert main(["run", path, "--backend", "numpy", "--repeat", "2", "--json", str(report)]) == 0
    out = capsys.readouterr().out
    assert "placement: 3 operators: 2 partitions on numpy (2), 1 on the host (1: CUMSUM)" in out
    assert "-> 2 NNAPI operations" in out
    assert json.loads(report.read_text())["placement"]["partitions"].startswith("3 operators: 2 partitions")
    assert main(["profile", path, "--backend", "numpy", "--repeat", "2"]) == 0
    out = capsys.readouterr().out
    assert "placement: 3 operators: 2 partitions on numpy (2), 1 on the host (1: CUMSUM)" in out
    # one execution per run (the partitions' own are part of it): the host partition once per run
    assert re.search(r"^CUMSUM \(TFLite\)\s+host\s+1\s", out, re.M), out
    assert re.search(r"^ADD\s+op\s+1\s", out, re.M) and re.search(r"^MUL\s+op\s+1\s", out, re.M), out


@pytest.mark.parametrize("command", ["run", "profile"])
def test_cli_no_fallback_is_one_line(tmp_path, capsys, command):
    path = _write(tmp_path, _branches())
    line = _one_line(capsys, [command, path, "--backend", "numpy", "--no-fallback"], 2)
    assert line == f"nngpu {command}: m.tflite: 2 operators would not run on the driver: #0 CUMSUM, #2 CUMSUM"


def test_cli_custom_operator_is_one_line(tmp_path, capsys):
    _one_line(capsys, ["run", _write(tmp_path, _custom()), "--backend", "numpy"], 2, "m.tflite", "#1 MyCustomOp")


def test_cli_host_operators_tflite_cannot_load(tmp_path, capsys):
    m = TFLModel()
    x = m.tensor("x", SHAPE)
    c = _cumsum(m, _binary(m, "ADD", x, x, "a"), "c", axis_type=FLOAT32)  # CUMSUM's axis must be int32
    path = _write(tmp_path, m.build([x], [c]))
    _one_line(capsys, ["run", path, "--backend", "numpy"], 2, "TFLite cannot load the host operators #1 CUMSUM")


def test_cli_unsupported_boundary_dtype_is_one_line(tmp_path, capsys):
    m = TFLModel()
    s, y = m.tensor("s", [2], 5), m.tensor("y", [2])  # 5: a STRING input
    m.op("CUMSUM", [s, m.const("axis", np.array(0, np.int32), INT32)], [y], "CumsumOptions",
         lambda b: opt(b, "CumsumOptions", Exclusive=False, Reverse=False))
    _one_line(capsys, ["run", _write(tmp_path, m.build([s], [y])), "--backend", "numpy"], 2, "model input 0 (s, tensor 0): type STRING is not supported")


def test_cli_corrupt_model_is_one_line(tmp_path, capsys):
    data = bytearray(_middle())
    data[8:] = bytes(len(data) - 8)
    _one_line(capsys, ["run", _write(tmp_path, bytes(data)), "--backend", "numpy"], 2, "m.tflite")


def test_int64_crosses_into_the_host_and_back(tmp_path):
    """An int64 model input (no NNAPI type): what reads it runs on the host, and its int32 result
    goes on to the driver."""
    from .tflbuild import INT64

    m = TFLModel()
    x, i = m.tensor("x", SHAPE, INT64), m.tensor("i", SHAPE, INT32)
    m.op("CAST", [x], [i])
    y = m.tensor("y", SHAPE, INT32)
    m.op("ADD", [i, i], [y], "AddOptions", lambda b: opt(b, "AddOptions", FusedActivationFunction=0))
    data = m.build([x], [y])
    v = RNG.integers(-1000, 1000, SHAPE).astype(np.int64)
    with Session(_write(tmp_path, data), "numpy") as s:
        assert s.inputs[0].dtype == np.int64
        got = list(s.run([v]).values())
    assert_close(run_reference(data, [v], xnnpack=False), got)


def test_while_on_the_host_takes_its_subgraphs_along():
    """A WHILE the driver refuses runs on the host with its cond / body subgraphs copied into
    the host partition's flatbuffer."""
    from pathlib import Path

    from nngpu.driver.device import Device
    from nngpu.modelutil import as_model_1_3
    from nngpu.named_model import NamedModel
    from nngpu.session import random_inputs

    path = Path(__file__).resolve().parents[1] / "data" / "tflite" / "lstm_keras3.tflite"
    if not path.is_file():
        pytest.skip("tests/data/tflite/lstm_keras3.tflite is not there")
    data = path.read_bytes()
    device = Device("numpy")

    def no_while(model) -> list[bool]:
        _, flags = device.getSupportedOperations_1_3(as_model_1_3(model))
        return [ok and op.type != OperationType.WHILE for ok, op in zip(flags, as_model_1_3(model).main.operations)]

    plan = plan_tflite(data, supported=no_while)
    host = [plan.graph.operators[i].name for i in plan.host_ops]
    assert host == ["WHILE"], plan.describe("numpy")
    inputs = random_inputs(plan.inputs, seed=3)
    with Session(NamedModel(None, plan.inputs, plan.outputs, plan=plan), device) as s:
        got = list(s.run(inputs).values())
    assert_close(run_reference(data, inputs, xnnpack=False), got, rel=1e-5)


def test_host_kernel_refusing_the_values_is_an_execution_error(tmp_path, capsys):
    """GATHER_ND with an index out of range at run time: TFLite's kernel refuses it, and so does
    the run (ExecutionError; the CLI: one line, exit 1)."""
    from nngpu.session import ExecutionError

    m = TFLModel()
    x, i = m.tensor("x", SHAPE), m.tensor("i", [3, 2], INT32)
    g = m.tensor("g", [3])
    m.op("GATHER_ND", [x, i], [g])
    y = m.tensor("y", [3])
    m.op("ADD", [g, g], [y], "AddOptions", lambda b: opt(b, "AddOptions", FusedActivationFunction=0))
    path = _write(tmp_path, m.build([x, i], [y]))
    good = np.array([[0, 1], [1, 4], [0, 0]], np.int32)
    with Session(path, "numpy") as s:
        x_v = _x()
        np.testing.assert_array_equal(s.run([x_v, good])["y"], 2 * x_v[good[:, 0], good[:, 1]])
        with pytest.raises(ExecutionError, match=r"#0 GATHER_ND"):
            s.run([x_v, np.array([[0, 1], [7, 4], [0, 0]], np.int32)])
    np.save(tmp_path / "x.npy", x_v)
    np.save(tmp_path / "i.npy", np.array([[0, 1], [7, 4], [0, 0]], np.int32))
    _one_line(capsys, ["run", path, "--backend", "numpy", "--input", str(tmp_path / "x.npy"),
                       "--input", str(tmp_path / "i.npy")], 1, "#0 GATHER_ND")


def test_int64_indices_cross_from_the_driver_to_the_host(tmp_path):
    """ARG_MAX with an int64 output runs on the driver (as int32, rewrite.py) and hands its
    indices to a host CUMSUM as the int64 tensor TFLite's kernel reads."""
    from .tflbuild import INT64

    m = TFLModel()
    x, a = m.tensor("x", SHAPE), m.tensor("a", [2], INT64)
    m.op("ARG_MAX", [x, m.const("axis", np.array([1], np.int32), INT32)], [a], "ArgMaxOptions",
         lambda b: opt(b, "ArgMaxOptions", OutputType=INT64))
    y = m.tensor("y", [2], INT64)
    m.op("CUMSUM", [a, m.const("axis0", np.array(0, np.int32), INT32)], [y], "CumsumOptions",
         lambda b: opt(b, "CumsumOptions", Exclusive=False, Reverse=False))
    data = m.build([x], [y, a])
    x_v = _x()
    with Session(_write(tmp_path, data), "numpy") as s:
        got = list(s.run([x_v]).values())
    assert [g.dtype for g in got] == [np.int64, np.int64]
    assert_close(run_reference(data, [x_v], xnnpack=False), got)


def test_an_operator_nnapi_cannot_validate_runs_on_the_host(tmp_path):
    """int32 CONCATENATION maps, but NNAPI has no such signature (the model would not validate):
    the operator that is invalid alone goes to the host, its neighbours stay on the driver."""
    m = TFLModel()
    x, a, c, y = (m.tensor("x", [2, 3], INT32), m.tensor("a", [2, 3], INT32), m.tensor("c", [4, 3], INT32),
                  m.tensor("y", [4, 3], INT32))
    add = lambda b: opt(b, "AddOptions", FusedActivationFunction=0)  # noqa: E731
    m.op("ADD", [x, x], [a], "AddOptions", add)
    m.op("CONCATENATION", [a, x], [c], "ConcatenationOptions",
         lambda b: opt(b, "ConcatenationOptions", Axis=0, FusedActivationFunction=0))
    m.op("ADD", [c, c], [y], "AddOptions", add)
    data = m.build([x], [y])
    v = RNG.integers(-100, 100, [2, 3]).astype(np.int32)
    with Session(_write(tmp_path, data), "numpy") as s:
        assert s.placement == "3 operators: 2 partitions on numpy (2), 1 on the host (1: CONCATENATION)"
        got = list(s.run([v]).values())
    assert_close(run_reference(data, [v], xnnpack=False), got)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_reshape_to_rank_5_runs_on_the_host_and_the_rest_on_the_driver(tmp_path, backend):
    """The driver refuses a RESHAPE whose constant shape has rank 5 at getSupportedOperations, so
    the model is partitioned around it and runs, instead of preparing and then failing every
    execution."""
    m = TFLModel()
    x = m.tensor("x", SHAPE)
    a = _binary(m, "ADD", x, x, "a")
    five = m.tensor("five", [2, 1, 5, 1, 1])
    m.op("RESHAPE", [a, m.const("s5", np.array([2, 1, 5, 1, 1], np.int32), INT32)], [five])
    back = m.tensor("back", SHAPE)
    m.op("RESHAPE", [five, m.const("s2", np.array(SHAPE, np.int32), INT32)], [back])
    data = m.build([x], [_binary(m, "MUL", back, back, "y")])
    with Session(_write(tmp_path, data), backend) as s:
        # the second RESHAPE takes the rank-5 tensor, which the driver refuses as well
        assert s.placement == f"4 operators: 2 partitions on {backend} (2), 1 on the host (2: RESHAPE ×2)"
        x_value = np.arange(10, dtype=np.float32).reshape(SHAPE)
        assert_close(run_reference(data, [x_value], xnnpack=False), list(s.run([x_value]).values()), rel=1e-6)
