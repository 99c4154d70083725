"""ir/work.py's static work counts, and with them the proof that no per-axis normalization's
work grows quadratically with the axis: 100x the slice length is 100x the work (each slice's
statistics are computed once, not once per element). Softmax over 100,000 elements then runs
in kernels on each device backend and matches the reference."""
from __future__ import annotations

import numpy as np
import pytest

from nngpu.backends import device_backends
from nngpu.compiler.lower import lower_model
from nngpu.hal.types import OperationType as Op
from nngpu.ir import Buffer, Const, Load, Loop, Var, reduce_sum
from nngpu.ir.kernel import Kernel
from nngpu.ir.work import kernel_work, thread_work
from nngpu.runtime.interpreter import GraphRunner
from nngpu.backends.opencl import TARGET as OPENCL

from tests.compiler.model_builder import T, ModelBuilder

F32, Q8 = T.TENSOR_FLOAT32, T.TENSOR_QUANT8_ASYMM


def test_a_reduce_counts_its_body_once_per_iteration():
    j = Var("j", "int")
    body = Load(Buffer(0, "float"), j) * 2.0
    red = reduce_sum([Loop(j, 10)], body)
    per_iteration = thread_work(body)
    assert thread_work(red) >= 10 * per_iteration
    assert thread_work(reduce_sum([Loop(j, 20)], body)) - thread_work(red) == 10 * per_iteration
    i = Var("i", "long")
    assert thread_work(reduce_sum([Loop(j, i)], body)) is None     # a bound known only at run time
    kernel = Kernel("k", Buffer(1, "float"), (3, 5), i, red)
    assert kernel_work(kernel) == 15 * thread_work(red)
    assert thread_work(Const(1.0, "float")) == 1


def _model(op: Op, t: int, n: int):
    b = ModelBuilder()
    x = b.input(t, (2, n), *((0.1, 3) if t == Q8 else ()))
    if op == Op.ARGMAX:
        b.output(b.op(op, [x, b.constant(T.INT32, 1)], T.TENSOR_INT32, (2,)))
        return b.build()
    out = {Op.SOFTMAX: (1 / 256, 0), Op.L2_NORMALIZATION: (1 / 128, 128)}.get(op, (0.0, 0)) if t == Q8 else ()
    extra = {Op.SOFTMAX: [(T.FLOAT32, 1.0)], Op.LOG_SOFTMAX: [(T.FLOAT32, 1.0), (T.INT32, -1)]}.get(op, [])
    b.output(b.op(op, [x] + [b.constant(tt, v) for tt, v in extra], t, (2, n), *out))
    return b.build()


def _work(model) -> int:
    segment = lower_model(GraphRunner(model), OPENCL)
    assert segment is not None and segment.kernels and not segment.host_ops, "the operation should run in kernels"
    works = [kernel_work(k.kernel) for k in segment.kernels]
    assert None not in works
    return sum(works)


@pytest.mark.parametrize("op,t", [(Op.SOFTMAX, F32), (Op.SOFTMAX, Q8), (Op.LOG_SOFTMAX, F32),
                                  (Op.L2_NORMALIZATION, F32), (Op.L2_NORMALIZATION, Q8), (Op.ARGMAX, F32)])
def test_per_axis_work_is_linear_in_the_axis(op, t):
    short, long = _work(_model(op, t, 1_000)), _work(_model(op, t, 100_000))
    assert long < 110 * short, f"{op.name}: 100x the axis is {long / short:.0f}x the work"


@pytest.mark.parametrize("backend", device_backends())
def test_softmax_over_100000_elements_runs_in_kernels(backend):
    from nngpu.session import Session

    rng = np.random.default_rng(51)
    x = (rng.standard_normal((2, 100_000)) * 4).astype(np.float32)
    model = _model(Op.SOFTMAX, F32, 100_000)
    _work(model)                                 # lowered to kernels only, none on the host
    want = GraphRunner(model).run([x])[0]
    with Session(model, backend) as session:
        got = next(iter(session.run([x]).values()))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-9)
