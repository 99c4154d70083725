"""A value compared with itself: an integer comparison of one IR node with itself folds to its
constant (C compilers warn at `x >= x`, and PoCL's warning reached pyopencl as a
CompilerWarning in the random-graph fuzz), a float one stays a comparison (NaN is not equal to
itself), and every backend agrees with the reference either way."""
from __future__ import annotations

import uuid

import numpy as np
import pytest

import nngpu
from nngpu.backends import create, device_backends
from nngpu.compiler.lower import trace_segments
from nngpu.compiler.steps import KernelStep
from nngpu.ir.expr import Binary, Buffer, Const, Load, Var, binary
from nngpu.modelutil import as_model_1_3
from nngpu.runtime.interpreter import GraphRunner

COMPARES = {"<": False, "<=": True, ">": False, ">=": True, "==": True, "!=": False}
# each comparison operation and numpy's, the reference
OPS = {"LESS": np.less, "LESS_EQUAL": np.less_equal, "GREATER": np.greater, "GREATER_EQUAL": np.greater_equal,
       "EQUAL": np.equal, "NOT_EQUAL": np.not_equal}


@pytest.mark.parametrize("op", COMPARES)
def test_an_integer_compared_with_itself_is_its_constant(op: str) -> None:
    for dtype in ("int", "long"):
        x = Var("x", dtype)
        folded = binary(op, x, x)
        assert isinstance(folded, Const) and folded.value is COMPARES[op]
        assert isinstance(binary(op, x, Var("y", dtype)), Binary)   # another value is compared
    ints, i = Buffer(0, "int"), Var("i")
    assert isinstance(binary(op, Load(ints, i * 2), Load(ints, i * 2)), Const)   # two loads of one element
    assert isinstance(binary(op, Load(ints, i), Load(ints, i + 1)), Binary)
    assert isinstance(binary(op, Load(ints, i), Load(Buffer(0, "int"), i)), Const)   # one tensor's buffers
    assert isinstance(binary(op, Load(ints, i), Load(Buffer(2, "int"), i)), Binary)   # another tensor
    f = Var("f", "float")
    assert isinstance(binary(op, f, f), Binary)   # NaN: f == f may be false
    floats = Buffer(1, "float")
    assert isinstance(binary(op, Load(floats, i), Load(floats, i)), Binary)


def _model() -> nngpu.ModelBuilder:
    """Each comparison of an int32 ARGMAX result with itself (the kernel loads it twice: two
    loads of one element) and of a float input with itself."""
    b = nngpu.ModelBuilder()
    x = b.input("x", np.float32, [5, 4])
    index = b.op("ARGMAX", x, 0)
    for op in OPS:
        b.output(f"i_{op}", b.op(op, index, index))
        b.output(f"f_{op}", b.op(op, x, x))
    return b


def _reference(x: np.ndarray) -> dict[str, np.ndarray]:
    index = np.argmax(x, axis=0).astype(np.int32)
    out = {}
    for op, fn in OPS.items():
        out[f"i_{op}"], out[f"f_{op}"] = fn(index, index), fn(x, x)
    return out


@pytest.mark.parametrize("backend", ["numpy", *device_backends()])
def test_self_comparisons_match_the_reference(backend: str) -> None:
    x = np.random.default_rng(5).standard_normal((5, 4)).astype(np.float32)
    x[0, 1], x[3, 2] = np.nan, np.inf
    with nngpu.Session(_model().build(), backend=backend) as s:
        out = s.run({"x": x})
    for name, want in _reference(x).items():
        np.testing.assert_array_equal(out[name], want, err_msg=name)


def test_pocl_compiles_every_kernel_without_a_diagnostic() -> None:
    if "opencl" not in device_backends():
        pytest.skip("no OpenCL device")
    backend = create("opencl")
    runner = GraphRunner(as_model_1_3(_model().build().model))
    x = np.random.default_rng(5).standard_normal((5, 4)).astype(np.float32)
    sources = [step.source for seg in trace_segments(runner, runner.trace([x]), backend.target)
               for step in seg.steps if isinstance(step, KernelStep)]
    assert len(sources) >= len(OPS)
    nonce = f"-DNNGPU_TEST_NONCE={uuid.uuid4().int % (1 << 62)}"   # a fresh compile: no cached binary
    for source in sources:
        program = backend.cl.Program(backend.context, source).build([*backend.OPTIONS, nonce], cache_dir=False)
        log = program.get_build_info(backend.device, backend.cl.program_build_info.LOG).strip()
        assert not log, f"{log}\n{source}"


def test_shared_subexpressions_are_compared_once() -> None:
    """Two copies of a DAG in which each level uses the one below twice: 2^60 paths, 60 pairs."""
    ints, i = Buffer(0, "int"), Var("i")
    a, b = Load(ints, i), Load(ints, i)
    for _ in range(60):
        a, b = a * a + a, b * b + b
    assert isinstance(binary(">=", a, b), Const)
    assert isinstance(binary(">=", a, b + 1), Binary)
