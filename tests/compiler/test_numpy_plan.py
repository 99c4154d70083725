"""The numpy plan (compiler/numpy_plan.py) against the reference interpreter it precompiles:
every bound kernel gives the reference's bits, shapes known only at run time stay on the
checked reference path, and executions neither alias each other's buffers nor their results."""
from __future__ import annotations

import dataclasses
import threading

import numpy as np
import pytest

from nngpu import profiling
from nngpu.runtime.interpreter import ExecutionError, GraphRunner
from nngpu.compiler.numpy_bind import numpy_plan
from nngpu.runtime.numpy_plan import ALIGN
from nngpu.hal.types import FusedActivationFunc as Act
from nngpu.hal.types import Model_1_3, OperationType as Op
from nngpu.modelutil import as_model_1_3
from nngpu.session import random_inputs
from nngpu.tflite import load_tflite
from nngpu.tflite.models import MODELS, find_model

from .model_builder import T, ModelBuilder

F32, F16, I32, Q8, Q8S = (T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_INT32, T.TENSOR_QUANT8_ASYMM,
                          T.TENSOR_QUANT8_ASYMM_SIGNED)
rng = np.random.default_rng(3)
SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e30, -1e30, 1e-42, -3.0, 3.0, 6.0, -1.0], np.float32)


def _floats(shape, dtype=np.float32) -> np.ndarray:
    """Random values with the special ones (signed zeros, infinities, NaN, huge, subnormal) mixed in."""
    x = (rng.standard_normal(shape) * 4).astype(np.float32).reshape(-1)
    x[: min(x.size, SPECIAL.size)] = SPECIAL[: x.size]
    with np.errstate(over="ignore"):  # float16: the huge values become infinities
        return rng.permutation(x).reshape(shape).astype(dtype)


def _value(t: int, shape) -> np.ndarray:
    if t in (F32, F16):
        return _floats(shape, np.float32 if t == F32 else np.float16)
    if t == I32:
        return rng.integers(-2**31, 2**31, shape, dtype=np.int64).astype(np.int32)
    info = np.iinfo(np.uint8 if t == Q8 else np.int8)
    return rng.integers(info.min, info.max + 1, shape).astype(info.dtype)


def _unary(op: Op, t: int, shape=(2, 3, 5)) -> tuple[Model_1_3, list[np.ndarray]]:
    b = ModelBuilder()
    scale, zp = (0.1, 3) if t in (Q8, Q8S) else (0.0, 0)
    out_q = {(Op.LOGISTIC, Q8): (1 / 256, 0), (Op.LOGISTIC, Q8S): (1 / 256, -128)}.get((op, t), (scale, zp))
    x = b.input(t, shape, scale, zp)
    b.output(b.op(op, [x], t, shape, *out_q))
    return b.build(), [_value(t, shape)]


def _binary(op: Op, t: int, act: int, a_shape=(2, 3, 4), b_shape=(3, 1)) -> tuple[Model_1_3, list[np.ndarray]]:
    b = ModelBuilder()
    quant = t in (Q8, Q8S)
    x = b.input(t, a_shape, 0.5 if quant else 0.0, 1 if quant else 0)
    y = b.input(t, b_shape, 0.25 if quant else 0.0, -2 if quant else 0)
    out_shape = np.broadcast_shapes(a_shape, b_shape)
    ins = [x, y] if op == Op.PRELU else [x, y, b.constant(T.INT32, act)]
    b.output(b.op(op, ins, t, out_shape, 1.0 if quant else 0.0, 0))
    return b.build(), [_value(t, a_shape), _value(t, b_shape)]


def _concat(t: int) -> tuple[Model_1_3, list[np.ndarray]]:
    b = ModelBuilder()
    x, y = b.input(t, (2, 3, 4)), b.input(t, (2, 1, 4))
    b.output(b.op(Op.CONCATENATION, [x, y, b.constant(T.INT32, 1)], t, (2, 4, 4)))
    return b.build(), [_value(t, (2, 3, 4)), _value(t, (2, 1, 4))]


def _reshape() -> tuple[Model_1_3, list[np.ndarray]]:
    b = ModelBuilder()
    x = b.input(F32, (2, 3, 4))
    b.output(b.op(Op.RESHAPE, [x, b.constant(I32, [4, -1])], F32, (4, 6)))
    return b.build(), [_value(F32, (2, 3, 4))]


def _movement(op: Op, params: list, out_shapes: list[tuple[int, ...]], t: int = F32):
    """op on a (2, 3, 4) input and the given constant parameters."""
    b = ModelBuilder()
    x = b.input(t, (2, 3, 4))
    ins = [x] + [b.constant(pt, v) for pt, v in params]
    for o in b.operation(op, ins, [(t, s, 0.0, 0) for s in out_shapes]):
        b.output(o)
    return b.build(), [_value(t, (2, 3, 4))]


_MOVEMENT = {
    "TRANSPOSE": (Op.TRANSPOSE, [(I32, [2, 0, 1])], [(4, 2, 3)]),
    "SLICE": (Op.SLICE, [(I32, [1, 0, 1]), (I32, [1, -1, 2])], [(1, 3, 2)]),
    "STRIDED_SLICE": (Op.STRIDED_SLICE, [(I32, [0, 2, -1]), (I32, [2, 0, 0]), (I32, [1, -1, -2]),
                                         (T.INT32, 0), (T.INT32, 0), (T.INT32, 0)], [(2, 2, 2)]),
    "STRIDED_SLICE-shrink": (Op.STRIDED_SLICE, [(I32, [1, 0, 0]), (I32, [2, 3, 4]), (I32, [1, 1, 2]),
                                                (T.INT32, 0), (T.INT32, 0), (T.INT32, 1)], [(3, 2)]),
    "SPLIT": (Op.SPLIT, [(T.INT32, 2), (T.INT32, 2)], [(2, 3, 2), (2, 3, 2)]),
}

_BINARY = [(op, t, act) for op in (Op.ADD, Op.SUB, Op.MUL, Op.DIV) for t in (F32, F16)
           for act in (Act.NONE, Act.RELU, Act.RELU1, Act.RELU6)]
_BINARY += [(op, t, act) for op in (Op.ADD, Op.SUB, Op.MUL) for t in (Q8, Q8S) for act in (Act.NONE, Act.RELU6)]
_BINARY += [(op, I32, Act.NONE) for op in (Op.ADD, Op.SUB, Op.MUL, Op.DIV)]
CASES = ([pytest.param(_binary(*c), id=f"{c[0].name}-{T(c[1]).name}-{Act(c[2]).name}") for c in _BINARY]
         + [pytest.param(_binary(Op.PRELU, F32, 0, (2, 3, 4), (1, 4)), id="PRELU-F32")]
         + [pytest.param(_unary(op, t), id=f"{op.name}-{T(t).name}")
            for op in (Op.RELU, Op.RELU1, Op.RELU6) for t in (F32, F16, Q8, Q8S)]
         + [pytest.param(_unary(op, F32), id=f"{op.name}-F32") for op in (Op.LOGISTIC, Op.TANH, Op.HARD_SWISH)]
         + [pytest.param(_concat(t), id=f"CONCATENATION-{T(t).name}") for t in (F32, I32)]
         + [pytest.param(_reshape(), id="RESHAPE")]
         + [pytest.param(_movement(*c), id=name) for name, c in _MOVEMENT.items()]
         + [pytest.param(_movement(*_MOVEMENT["TRANSPOSE"], t=Q8), id="TRANSPOSE-Q8")])


def _steps(plan: NumpyPlan):
    (bound,) = plan.bounds()
    return bound.steps


@pytest.mark.parametrize("case", CASES)
def test_bound_kernel_gives_the_reference_bits(case):
    model, inputs = case
    plan = numpy_plan(GraphRunner(model))
    assert all(s.kernel is not None for s in _steps(plan)), "the operation should be bound"
    with np.errstate(all="ignore"):
        want = GraphRunner(model).run(inputs)
    for _ in range(2):  # the second execution reuses the first one's buffers
        got = plan.run(inputs)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.shape == w.shape
            assert g.tobytes() == w.tobytes()


def test_in_place_kernels_may_write_over_their_inputs():
    """Every kernel marked in_place gives the reference's bits with its output array being any
    input of the output's shape and type."""
    marked = set()
    for case in CASES:
        model, inputs = case.values[0]
        (step,) = _steps(numpy_plan(GraphRunner(model)))
        if not step.in_place:
            continue
        with np.errstate(all="ignore"):
            want = GraphRunner(model).run(inputs)[0]
        for j in [j for j, v in enumerate(inputs) if v.shape == want.shape and v.dtype == want.dtype]:
            ins = [v.copy() for v in inputs] + [None]  # the activation scalar: parsed at bind
            with np.errstate(all="ignore"):
                got = step.kernel(ins, [ins[j]])[0]
            assert got.tobytes() == want.tobytes(), f"{case.id}: output over input {j}"
            marked.add(case.id)
    assert {"ADD-TENSOR_FLOAT32-NONE", "DIV-TENSOR_FLOAT32-RELU6", "RELU-TENSOR_QUANT8_ASYMM", "LOGISTIC-F32"} <= marked


def test_unspecified_input_shapes_bind_per_shape_set():
    b = ModelBuilder()
    x = b.input(F32, (0, 4))
    b.output(b.op(Op.RELU6, [b.op(Op.ADD, [x, x, b.constant(T.INT32, 0)], F32, (0, 4))], F32, (0, 4)))
    model = b.build()
    plan = numpy_plan(GraphRunner(model))
    assert not plan.bounds()  # nothing to bind before the first execution gives the shapes
    for n in (2, 5, 2):
        v = _floats((n, 4))
        np.testing.assert_array_equal(plan.run([v])[0], np.clip(v + v, 0, 6))
    assert len(plan.bounds()) == 2
    assert all(s.kernel is not None for bound in plan.bounds() for s in bound.steps)


def test_value_dependent_shapes_stay_on_the_reference():
    """RESHAPE to a shape given at run time: it and what consumes it run the checked reference."""
    b = ModelBuilder()
    x, shape = b.input(F32, (2, 6)), b.input(I32, (2,))
    r = b.op(Op.RESHAPE, [x, shape], F32, (0, 0))
    b.output(b.op(Op.ADD, [r, r, b.constant(T.INT32, 0)], F32, (0, 0)))
    plan = numpy_plan(GraphRunner(b.build()))
    assert [(s.kernel, s.shapes) for s in _steps(plan)] == [(None, (None,)), (None, (None,))]
    v = _floats((2, 6))
    for dims in ([3, 4], [12, 1]):
        np.testing.assert_array_equal(plan.run([v, np.array(dims, np.int32)])[0], (v + v).reshape(dims))
    with pytest.raises(ExecutionError):  # 12 elements do not fill 5 x 5
        plan.run([v, np.array([5, 5], np.int32)])


def test_constant_operations_are_folded():
    b = ModelBuilder()
    c = b.op(Op.ADD, [b.constant(F32, [1.0, 2.0]), b.constant(F32, [3.0, 4.0]), b.constant(T.INT32, 0)], F32, (2,))
    x = b.input(F32, (2,))
    b.output(b.op(Op.MUL, [x, c, b.constant(T.INT32, 0)], F32, (2,)))
    plan = numpy_plan(GraphRunner(b.build()))
    assert [s.k for s in _steps(plan)] == [1]
    np.testing.assert_array_equal(plan.run([np.array([1, -1], np.float32)])[0], [4, -6])


def test_results_survive_later_executions():
    """The outputs are copies: the next execution reuses the buffers they were computed in."""
    model, _ = _binary(Op.ADD, F32, Act.NONE, (3, 4), (3, 4))
    plan = numpy_plan(GraphRunner(model))
    first = plan.run([np.ones((3, 4), np.float32)] * 2)[0]
    plan.run([np.zeros((3, 4), np.float32)] * 2)
    np.testing.assert_array_equal(first, np.full((3, 4), 2, np.float32))


def test_concurrent_executions_do_not_share_buffers():
    b = ModelBuilder()
    x = b.input(F32, (64, 64))
    y = x
    for _ in range(20):
        y = b.op(Op.ADD, [y, x, b.constant(T.INT32, 0)], F32, (64, 64))
    b.output(y)
    plan = numpy_plan(GraphRunner(b.build()))
    errors: list[str] = []

    def worker(k: int) -> None:
        v = np.full((64, 64), k, np.float32)
        for _ in range(30):
            if not np.array_equal(plan.run([v])[0], v * 21):
                errors.append(f"thread {k}")

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def test_profiling_times_every_operation():
    model, inputs = _binary(Op.MUL, F32, Act.RELU, (4, 4), (4, 4))
    plan = numpy_plan(GraphRunner(model))
    with profiling.recording() as prof:
        plan.execute(inputs)
        plan.execute(inputs)
    rows = {r.name: r for r in prof.op_table()}
    assert rows["MUL"].kind == "op" and rows["MUL"].count == 1


# ---- shared buffers ------------------------------------------------------------------------
def _checking(plan: NumpyPlan, trace: dict) -> None:
    """Make every step of the plan check, before it runs, that each input it reads still holds
    the reference's bits: an intermediate whose bytes a later output took fails here."""
    def check(step, ins) -> None:
        for i, v in zip(step.inputs, ins):
            if isinstance(trace.get(i), np.ndarray):
                assert np.asarray(v).tobytes() == trace[i].tobytes(), f"operation {step.k}: operand {i} overwritten"

    def wrap(step):
        def kernel(ins, outs):
            check(step, ins)
            return step.kernel(ins, outs)
        return kernel

    for bound in plan.bounds():
        bound.steps[:] = [dataclasses.replace(s, kernel=wrap(s)) if s.kernel else s for s in bound.steps]
    reference = plan._reference
    plan._reference = lambda step, ins, deadline: (check(step, ins), reference(step, ins, deadline))[1]


def _check_against_trace(model: Model_1_3, inputs: list[np.ndarray]) -> NumpyPlan:
    runner = GraphRunner(model)
    with np.errstate(all="ignore"):
        trace = runner.trace(inputs)
    plan = numpy_plan(GraphRunner(model))
    _checking(plan, trace)
    for _ in range(2):  # the second execution in the first one's buffer set
        for i, got in zip(model.main.outputIndexes, plan.run(inputs)):
            assert got.tobytes() == trace[i].tobytes(), f"output operand {i}"
    return plan


def _lifetimes_model() -> tuple[Model_1_3, list[np.ndarray]]:
    """A value live across a chain (t), a view of it read at the end (RESHAPE, bound: it lives in
    t's bytes), a reference step returning a view of an intermediate (EXPAND_DIMS, no bind),
    elementwise operations over dying inputs, and an intermediate that is also a graph output."""
    b = ModelBuilder()
    x = b.input(F32, (4, 6))
    add = lambda p, q, shape=(4, 6): b.op(Op.ADD, [p, q, b.constant(T.INT32, 0)], F32, shape)
    t = b.op(Op.TANH, [x], F32, (4, 6))
    view = b.op(Op.RESHAPE, [t, b.constant(I32, [6, 4])], F32, (6, 4))
    y = add(x, x)
    y = b.op(Op.MUL, [y, y, b.constant(T.INT32, 0)], F32, (4, 6))
    kept = b.op(Op.LOGISTIC, [y], F32, (4, 6))     # a graph output, read again below
    e = b.op(Op.EXPAND_DIMS, [add(y, kept), b.constant(T.INT32, 0)], F32, (1, 4, 6))
    z = b.op(Op.RELU6, [add(kept, x)], F32, (4, 6))
    z = add(z, b.op(Op.RESHAPE, [view, b.constant(I32, [4, 6])], F32, (4, 6)))
    b.output(add(z, b.op(Op.RESHAPE, [e, b.constant(I32, [4, 6])], F32, (4, 6))))
    b.output(kept)
    b.output(view)
    return b.build(), [_floats((4, 6))]


def test_live_intermediates_never_share_bytes():
    plan = _check_against_trace(*_lifetimes_model())
    (bound,) = plan.bounds()
    assert bound.nbytes < bound.unshared_nbytes()  # and yet outputs do share


@pytest.mark.parametrize("name", sorted(MODELS))
def test_mediapipe_models_never_read_overwritten_bytes(name):
    path = find_model(name)
    if path is None:
        pytest.skip(f"model {name} not cached: run ci/fetch-models.sh")
    imported = load_tflite(path)
    _check_against_trace(as_model_1_3(imported.model), random_inputs(imported.inputs, seed=0))


def test_a_chain_lives_in_one_buffer():
    """Each operation's first input dies where its output is written: the ADD and RELU6 kernels
    (in place) write over it, from the first intermediate to the graph output."""
    b = ModelBuilder()
    x = b.input(F32, (64, 64))
    y = x
    for _ in range(10):
        y = b.op(Op.RELU6, [b.op(Op.ADD, [y, x, b.constant(T.INT32, 0)], F32, (64, 64))], F32, (64, 64))
    b.output(y)
    plan = numpy_plan(GraphRunner(b.build()))
    (bound,) = plan.bounds()
    assert bound.nbytes == 64 * 64 * 4
    v = _floats((64, 64))
    want = GraphRunner(plan.model).run([v])[0]
    assert plan.run([v])[0].tobytes() == want.tobytes()


def test_buffers_are_aligned_for_every_dtype():
    b = ModelBuilder()
    x, f = b.input(Q8, (3, 5), 0.5, 1), b.input(F32, (3, 5))
    b.output(b.op(Op.RELU, [x], Q8, (3, 5), 0.5, 1))   # 15 bytes: the next offset must not be 15
    b.output(b.op(Op.TANH, [f], F32, (3, 5)))
    b.output(b.op(Op.RELU6, [f], F32, (3, 5)))
    plan = numpy_plan(GraphRunner(b.build()))
    (bound,) = plan.bounds()
    offsets = [at for step in bound.layout for at in step if at is not None]
    assert len(set(offsets)) == 3 and all(at % ALIGN == 0 for at in offsets)
    buffers = plan._get(next(iter(plan._bound))).take()
    assert all(o.ctypes.data % ALIGN == 0 for outs in buffers.outs for o in outs if o is not None)
