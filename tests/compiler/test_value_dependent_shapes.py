"""Shapes that depend on input values: the bug two dummy runs (all zeros, all ones) could not see.

Each model computes a shape input of TILE, SLICE, STRIDED_SLICE, RESHAPE, PAD, SQUEEZE /
EXPAND_DIMS or GATHER from an int32 model input k as q = k·(k−1)+1 (ADD / SUB / MUL), which is 1
for k = 0 and k = 1 and 3, 7 for k = 2, 3, and feeds the result to float operations, so device
kernels run over the value-dependent shape. One prepared model runs k = 0, 1, 2, 3 and then
2, 0, 3, 1, 2 (re-specialising and reusing its plan), each on the sync, async and burst paths,
on numpy and every device backend, with and without specialisation; the expected values are
computed here with numpy."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest

from nngpu.backends import device_backends
from nngpu.runtime.plan import CACHE_SIZE, Plan
from nngpu.driver.device import Device
from nngpu.hal.types import ErrorStatus, Model_1_3, OperationType as Op
from nngpu.validation import validate_model

from .model_builder import PATHS, T, ModelBuilder, execute, prepare

F32, I32 = T.TENSOR_FLOAT32, T.TENSOR_INT32
K_FIRST, K_INTERLEAVED = (0, 1, 2, 3), (2, 0, 3, 1, 2)
Q_MAX = 7                      # q for the largest k
rng = np.random.default_rng(5)


def q_of(k: int) -> int:
    return k * (k - 1) + 1


def quadratic(b: ModelBuilder, k: int) -> int:
    """q = k·(k−1)+1 of the int32 [1] operand k, by SUB, MUL and ADD."""
    none, one = b.constant(T.INT32, 0), b.constant(I32, [1])
    km1 = b.op(Op.SUB, [k, one, none], I32, [1])
    return b.op(Op.ADD, [b.op(Op.MUL, [k, km1, none], I32, [1]), one, none], I32, [1])


def affine(b: ModelBuilder, q: int, weights, offsets) -> int:
    """The int32 tensor q·weights + offsets (q broadcast from [1])."""
    w = np.asarray(weights, np.int32)
    none = b.constant(T.INT32, 0)
    scaled = b.op(Op.MUL, [q, b.constant(I32, w), none], I32, list(w.shape))
    return b.op(Op.ADD, [scaled, b.constant(I32, offsets), none], I32, list(w.shape))


def add_const(b: ModelBuilder, x: int, c: np.ndarray, rank: int) -> int:
    """x + c, c a constant broadcast along x's leading axes; the result of unknown extents."""
    return b.op(Op.ADD, [x, b.constant(F32, c), b.constant(T.INT32, 0)], F32, [0] * rank)


@dataclass(frozen=True)
class Case:
    name: str
    x: np.ndarray                                   # the float input
    build: Callable[[ModelBuilder, int, int], None]   # (builder, x, k) → outputs marked
    expected: Callable[[np.ndarray, int], list[np.ndarray]]
    capacities: tuple[int, ...]                     # output bytes, enough for k = 3
    k_scalar: bool = False                          # k an INT32 scalar input, not int32 [1]

    def model(self) -> Model_1_3:
        b = ModelBuilder()
        x = b.input(F32, self.x.shape)
        k = b.input(T.INT32, []) if self.k_scalar else b.input(I32, [1])
        self.build(b, x, k)
        model = b.build()
        validate_model(model)
        return model

    def inputs(self, k: int) -> list[np.ndarray]:
        return [self.x, np.array(k if self.k_scalar else [k], np.int32)]


C3 = np.array([0.5, -1.0, 2.0], np.float32)


def _tile(b: ModelBuilder, x: int, k: int) -> None:
    t = b.op(Op.TILE, [x, affine(b, quadratic(b, k), [1, 0], [0, 1])], F32, [0, 0])
    b.output(add_const(b, t, C3, 2))


def _tile_both(b: ModelBuilder, x: int, k: int) -> None:
    t = b.op(Op.TILE, [x, affine(b, quadratic(b, k), [1, 1], [0, 0])], F32, [0, 0])
    s = add_const(b, t, np.float32([0.25]), 2)
    b.output(b.op(Op.MUL, [s, t, b.constant(T.INT32, 0)], F32, [0, 0]))


def _slice(b: ModelBuilder, x: int, k: int) -> None:
    q = quadratic(b, k)
    begin, size = affine(b, q, [0, 1], [1, -1]), affine(b, q, [0, 1], [2, 0])   # [1, q-1], [2, q]
    b.output(add_const(b, b.op(Op.SLICE, [x, begin, size], F32, [0, 0]), np.float32([1.5]), 2))


def _strided_slice(b: ModelBuilder, x: int, k: int) -> None:
    q = quadratic(b, k)
    begin, strides = affine(b, q, [1, 0], [-1, 0]), affine(b, q, [1, 0], [0, 1])  # [q-1, 0], [q, 1]
    masks = [b.constant(T.INT32, 0)] * 3
    s = b.op(Op.STRIDED_SLICE, [x, begin, b.constant(I32, [16, 3]), strides, *masks], F32, [0, 0])
    b.output(add_const(b, s, C3, 2))


def _reshape(b: ModelBuilder, x: int, k: int) -> None:
    r = b.op(Op.RESHAPE, [x, affine(b, quadratic(b, k), [1, 0], [0, -1])], F32, [0, 0])   # [q, -1]
    y = b.output(add_const(b, r, np.float32([-0.5]), 2))
    b.output(b.op(Op.REDUCE_SUM, [y, b.constant(I32, [1]), b.constant(T.BOOL, False)], F32, [0]))


def _pad(b: ModelBuilder, x: int, k: int) -> None:
    paddings = affine(b, quadratic(b, k), [[1, 0], [0, 1]], [[-1, 0], [1, 0]])   # [[q-1, 0], [1, q]]
    b.output(add_const(b, b.op(Op.PAD, [x, paddings], F32, [0, 0]), C3[:1], 2))


def _squeeze_expand(b: ModelBuilder, x: int, k: int) -> None:
    t = b.op(Op.TILE, [x, affine(b, quadratic(b, k), [0, 0, 1], [1, 1, 0])], F32, [1, 2, 0])   # [1, 2, q]
    s = b.op(Op.SQUEEZE, [t, b.constant(I32, [0])], F32, [2, 0])
    e = b.op(Op.EXPAND_DIMS, [s, b.constant(T.INT32, 1)], F32, [2, 1, 0])
    b.output(add_const(b, e, np.float32([3.0]), 3))


def _expand_axis(b: ModelBuilder, x: int, k: int) -> None:
    e = b.op(Op.EXPAND_DIMS, [x, k], F32, [0, 0, 0, 0])     # the axis is k itself
    b.output(add_const(b, e, np.float32([0.75]), 4))


def _gather(b: ModelBuilder, x: int, k: int) -> None:
    indices = affine(b, quadratic(b, k), [1, 0, 1], [-1, 0, 0])   # [q-1, 0, q]: values, not shapes
    g = b.op(Op.GATHER, [x, b.constant(T.INT32, 0), indices], F32, [3, 3])
    b.output(b.op(Op.ADD, [g, b.constant(F32, C3), b.constant(T.INT32, 0)], F32, [3, 3]))


def _chain(b: ModelBuilder, x: int, k: int) -> None:
    """TILE, then SLICE and RESHAPE of its result: a barrier after a barrier."""
    q = quadratic(b, k)
    t = b.op(Op.TILE, [x, affine(b, q, [1, 0], [0, 1])], F32, [0, 3])                     # [2q, 3]
    t = add_const(b, t, C3, 2)
    s = b.op(Op.SLICE, [t, affine(b, q, [1, 0], [-1, 0]), affine(b, q, [1, 0], [1, 3])], F32, [0, 3])
    r = b.op(Op.RESHAPE, [s, b.constant(I32, [-1])], F32, [0])                             # [3q + 3]
    b.output(add_const(b, r, np.float32([2.0]), 1))


def _strided(x: np.ndarray, k: int) -> list[np.ndarray]:
    q = q_of(k)
    return [x[q - 1::q] + C3]


def _reshaped(x: np.ndarray, k: int) -> list[np.ndarray]:
    y = x.reshape(q_of(k), -1) - np.float32(0.5)
    return [y, y.sum(axis=1)]


def _padded(x: np.ndarray, k: int) -> list[np.ndarray]:
    q = q_of(k)
    return [np.pad(x, [(q - 1, 0), (1, q)]) + C3[0]]


def _chained(x: np.ndarray, k: int) -> list[np.ndarray]:
    q = q_of(k)
    return [(np.tile(x, (q, 1)) + C3)[q - 1:2 * q].reshape(-1) + np.float32(2.0)]


def _tiled_both(x: np.ndarray, k: int) -> list[np.ndarray]:
    t = np.tile(x, (q_of(k), q_of(k)))
    return [(t + np.float32(0.25)) * t]


def _data(*shape: int) -> np.ndarray:
    return rng.uniform(-2, 2, shape).astype(np.float32)


CASES = [
    Case("tile", _data(2, 3), _tile, lambda x, k: [np.tile(x, (q_of(k), 1)) + C3], (4 * 2 * 3 * Q_MAX,)),
    Case("tile_both", _data(2, 3), _tile_both, _tiled_both, (4 * 6 * Q_MAX * Q_MAX,)),
    Case("slice", _data(4, 16), _slice,
         lambda x, k: [x[1:3, q_of(k) - 1:2 * q_of(k) - 1] + np.float32(1.5)], (4 * 2 * Q_MAX,)),
    Case("strided_slice", _data(16, 3), _strided_slice, _strided, (4 * 16 * 3,)),
    Case("reshape", _data(42), _reshape, _reshaped, (4 * 42, 4 * Q_MAX)),
    Case("pad", _data(2, 3), _pad, _padded, (4 * (2 + Q_MAX) * (4 + Q_MAX),)),
    Case("squeeze_expand_dims", _data(1, 2, 1), _squeeze_expand,
         lambda x, k: [np.tile(x, (1, 1, q_of(k))).reshape(2, 1, q_of(k)) + np.float32(3.0)], (4 * 2 * Q_MAX,)),
    Case("expand_dims_axis", _data(2, 3, 4), _expand_axis,
         lambda x, k: [np.expand_dims(x, k) + np.float32(0.75)], (4 * 24,), k_scalar=True),
    Case("gather", _data(8, 3), _gather,
         lambda x, k: [x[[q_of(k) - 1, 0, q_of(k)]] + C3], (4 * 9,)),
    Case("tile_slice_reshape", _data(2, 3), _chain, _chained, (4 * 3 * (Q_MAX + 1),)),
]

# (backend, specialise): numpy has no plan to specialise
CONFIGS = [("numpy", True)] + [(b, s) for b in device_backends() for s in (True, False)]
_devices: dict[tuple[str, bool], Device] = {}


def device_of(backend: str, specialise: bool) -> Device:
    if (backend, specialise) not in _devices:
        _devices[backend, specialise] = Device(backend, specialise=specialise)
    return _devices[backend, specialise]


def config_id(config: tuple[str, bool]) -> str:
    return config[0] if config[1] else f"{config[0]}-unspecialised"


def check(got: list[np.ndarray], want: list[np.ndarray], what: str) -> None:
    assert len(got) == len(want), what
    for j, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape, f"{what}, output {j}: shape {g.shape}, expected {w.shape}"
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5, err_msg=f"{what}, output {j}")


def specialisations(plan: Plan) -> int:
    """Segments the plan has compiled and still holds."""
    count, stack = 0, [plan.entry]
    while stack:
        barrier = stack.pop()
        for segment in barrier.children.values():
            count += 1
            if segment.barrier is not None:
                stack.append(segment.barrier)
    return count


@pytest.mark.parametrize("config", CONFIGS, ids=config_id)
@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_value_dependent_shape(case: Case, config: tuple[str, bool]) -> None:
    model = case.model()
    prepared = prepare(device_of(*config), model)
    plan = prepared.executor if isinstance(prepared.executor, Plan) else None
    compiled = 0
    for sequence in (K_FIRST, K_INTERLEAVED):
        for k in sequence:
            for path in PATHS:
                r = execute(prepared, model, case.inputs(k), case.capacities, path)
                assert r.status == 0, f"k={k} {path}: {r.status.name}"
                check(r.outputs, case.expected(case.x, k), f"k={k} {path}")
        if plan is not None:
            if sequence is K_FIRST:
                compiled = specialisations(plan)
            else:  # every value seen before: reuse, compile nothing
                assert specialisations(plan) == compiled, "the plan recompiled for values it had seen"


def test_specialises_per_distinct_shape() -> None:
    """k = 0 and k = 1 give the same multiples, so three specialisations after the entry, not four."""
    for backend in device_backends():
        case = CASES[0]
        model = case.model()
        prepared = prepare(device_of(backend, True), model)
        for k in K_FIRST + K_INTERLEAVED:
            execute(prepared, model, case.inputs(k), case.capacities)
        assert specialisations(prepared.executor) == 1 + len({q_of(k) for k in K_FIRST})


@pytest.mark.parametrize("config", CONFIGS, ids=config_id)
def test_output_room_for_a_value_dependent_shape(config: tuple[str, bool]) -> None:
    """Room for k = 0's output only: k = 2 and 3 report OUTPUT_INSUFFICIENT_SIZE with the shape
    they need; with that room the same prepared model then answers, and k = 0 still fits."""
    case = CASES[0]
    model = case.model()
    prepared = prepare(device_of(*config), model)
    small = (case.x.nbytes,)
    for k in (2, 0, 3, 2, 1):
        want = case.expected(case.x, k)
        for path in PATHS:
            r = execute(prepared, model, case.inputs(k), small, path)
            if want[0].nbytes <= small[0]:
                assert r.status == 0, f"k={k} {path}: {r.status.name}"
                check(r.outputs, want, f"k={k} {path}")
                continue
            assert r.status == ErrorStatus.OUTPUT_INSUFFICIENT_SIZE, f"k={k} {path}: {r.status.name}"
            assert [(s.dimensions, s.isSufficient) for s in r.shapes] == [(list(want[0].shape), False)], f"k={k} {path}"
            r = execute(prepared, model, case.inputs(k), (want[0].nbytes,), path)
            assert r.status == 0, f"k={k} {path}, given the room: {r.status.name}"
            check(r.outputs, want, f"k={k} {path}, given the room")


@pytest.mark.parametrize("config", CONFIGS[:2], ids=config_id)
def test_more_values_than_a_barrier_compiles(config: tuple[str, bool]) -> None:
    """Past CACHE_SIZE specialisations new values run on the host; every answer stays right."""
    case = CASES[0]
    ks = list(range(CACHE_SIZE + 4))
    capacity = (4 * 2 * 3 * q_of(ks[-1]),)
    model = case.model()
    prepared = prepare(device_of(*config), model)
    for k in ks + ks[::-3]:
        r = execute(prepared, model, case.inputs(k), capacity)
        assert r.status == 0, f"k={k}: {r.status.name}"
        check(r.outputs, case.expected(case.x, k), f"k={k}")


def test_unspecialised_plan_runs_what_follows_a_barrier_on_the_host() -> None:
    """specialise=False: nothing after a value barrier is compiled, even a barrier at the first
    operation (EXPAND_DIMS on the axis input k)."""
    case = next(c for c in CASES if c.name == "expand_dims_axis")
    model = case.model()
    for backend in device_backends():
        prepared = prepare(device_of(backend, False), model)
        for k in K_FIRST:
            execute(prepared, model, case.inputs(k), case.capacities)
            assert prepared.executor.placement() == (0, len(model.main.operations)), f"k={k}"


def _unknown_dims_model() -> Model_1_3:
    """x of unknown leading extent: x·x + c, then tiled by [q, 1] and x added back."""
    b = ModelBuilder()
    x = b.input(F32, [0, 3])
    k = b.input(I32, [1])
    none = b.constant(T.INT32, 0)
    y = b.op(Op.MUL, [x, x, none], F32, [0, 3])
    y = b.output(b.op(Op.ADD, [y, b.constant(F32, C3), none], F32, [0, 3]))
    t = b.op(Op.TILE, [y, affine(b, quadratic(b, k), [1, 0], [0, 1])], F32, [0, 3])
    b.output(b.op(Op.SUB, [t, b.constant(F32, [[1.0]]), none], F32, [0, 3]))
    model = b.build()
    validate_model(model)
    return model


@pytest.mark.parametrize("config", CONFIGS, ids=config_id)
def test_unspecified_input_dims(config: tuple[str, bool]) -> None:
    model = _unknown_dims_model()
    prepared = prepare(device_of(*config), model)
    xs = {n: _data(n, 3) for n in (2, 5)}
    for n, k in ((2, 2), (5, 2), (2, 0), (5, 3), (2, 2), (5, 1)):
        x = xs[n]
        y = x * x + C3
        want = [y, np.tile(y, (q_of(k), 1)) - np.float32(1.0)]
        for path in PATHS:
            r = execute(prepared, model, [x, np.array([k], np.int32)], (4 * 5 * 3, 4 * 5 * 3 * Q_MAX), path)
            assert r.status == 0, f"rows={n} k={k} {path}: {r.status.name}"
            check(r.outputs, want, f"rows={n} k={k} {path}")
