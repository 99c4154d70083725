"""Float elementwise kernels in explicit vectors on a target whose schedule has a vector width
(OpenCL on CPU devices): a kernel whose loads read the output's own element, a row repeated
along it or one constant element runs 16, 8 or 4 lanes a work-item, as its size and rows allow,
and matches the reference (NaN and the infinities included) on PoCL; anything else (a column
repeated across rows, an integer, a size or row no width divides) keeps the scalar kernel. The
launch and the kernel agree by construction: both ask the schedule's lanes()."""
from __future__ import annotations

import numpy as np
import pytest

from nngpu.backends import device_backends
from nngpu.compiler.steps import KernelStep
from nngpu.hal import OperandType as T
from nngpu.hal import OperationType as Op
from nngpu.ir.schedule import Schedule
from nngpu.testing import output, run_op, scalar, single_op_model, tensor
from tests.ops.device_check import _device, segments

F32 = T.TENSOR_FLOAT32
rng = np.random.default_rng(3)


def _values(n: int) -> np.ndarray:
    x = (rng.standard_normal(n) * 5).astype(np.float32)
    x[:4] = [np.nan, np.inf, -np.inf, -0.0]
    return x


def _unary(op):
    return lambda n: ([tensor(F32, _values(n).reshape(-1, n))], op)


def _add_uniform(n):
    return [tensor(F32, _values(n)), tensor(F32, np.float32([2.5]), const=True), scalar(T.INT32, 3)], Op.ADD


def _mul_row(c: int):
    """x [.., c] times a row [c] repeated along it (a per-channel scale): loads at i % c."""
    return lambda n: ([tensor(F32, _values(n).reshape(-1, c)), tensor(F32, _values(c)), scalar(T.INT32, 0)], Op.MUL)


def _mul_column(n):
    """x [n / 8, 8] times a column [n / 8, 1] repeated across it: loads at i / 8, scalar."""
    return [tensor(F32, _values(n).reshape(-1, 8)), tensor(F32, _values(n // 8).reshape(-1, 1)),
            scalar(T.INT32, 0)], Op.MUL


# name: (inputs and op for n elements, the lanes expected at each n)
CASES = {
    "logistic": (_unary(Op.LOGISTIC), {48: 16, 24: 8, 12: 4, 6: 1}),
    "hard-swish": (_unary(Op.HARD_SWISH), {32: 16, 40: 8}),
    "relu": (_unary(Op.RELU), {64: 16}),
    "elu": (lambda n: ([tensor(F32, _values(n)), scalar(T.FLOAT32, 0.7)], Op.ELU), {6: 1, 16: 16}),
    "add-a-constant-scalar-relu6": (_add_uniform, {32: 16, 20: 4}),
    "mul-a-row-of-32": (_mul_row(32), {64: 16, 96: 16}),
    "mul-a-row-of-24": (_mul_row(24), {48: 8}),
    "mul-a-row-of-12": (_mul_row(12), {48: 4}),
    "mul-a-row-of-6": (_mul_row(6), {48: 1}),
    "mul-a-column": (_mul_column, {64: 1}),
    "floor": (_unary(Op.FLOOR), {16: 16}),
}


@pytest.mark.skipif("opencl" not in device_backends(), reason="no OpenCL device here")
@pytest.mark.parametrize("case", CASES)
def test_vector_kernels_match_the_reference(case):
    make, widths = CASES[case]
    for n, lanes in widths.items():
        inputs, op = make(n)
        shape = list(inputs[0].value.shape)
        out = output(F32, shape)
        model = single_op_model(op, inputs, [out])
        steps = [s for seg in segments(model, inputs, "opencl-cpu") for s in seg.steps if isinstance(s, KernelStep)]
        assert len(steps) == 1
        source = steps[0].source
        assert (f"vload{lanes}(" in source) == (lanes > 1), source
        assert steps[0].grid.total >= -(-n // lanes) and (lanes == 1 or f"get_global_id(0) * {lanes}" in source)
        with np.errstate(all="ignore"):
            ref = run_op(op, inputs, [out], version=13)
        got = run_op(op, inputs, [out], device=_device("opencl"), version=13)
        assert got.status == ref.status == 0
        np.testing.assert_allclose(got.outputs[0], ref.outputs[0], rtol=1e-6, atol=1e-6, err_msg=f"{case} n={n}")


def test_a_schedule_takes_vectors_or_several_outputs_a_thread():
    with pytest.raises(ValueError, match="either vectors or several outputs"):
        Schedule(vector=16, per_thread=2)
