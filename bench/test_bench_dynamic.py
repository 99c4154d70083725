"""Value-dependent shapes, the two strategies measured in one run: the device plan specialised
(and cached) per shape value, against running what follows the value on the host reference.

The model: m = k·(k−1)+1 from an int32 input k (MUL, SUB, ADD), then y = TILE(x, [1, m, 1, 1])
followed by three elementwise ops, x being [1, 8, 16, 8] float32. With k fixed the plan reuses
one specialisation; with k cycling through more values than a barrier caches, every execution
compiles (from the disk cache after the first round)."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from nngpu.backends import device_backends
from nngpu.driver.device import Device
from nngpu.hal import (DataLocation, ErrorStatus, MeasureTiming, Model, Model_1_3, Operand, OperandLifeTime as L,
                       OperandType as T, Operation, OperationType as Op, Request, RequestArgument)
from nngpu.memory import allocate_shared
from nngpu.modelutil import as_model_1_3

from .test_bench_compiler import prepared

X_SHAPE = (1, 8, 16, 8)
CYCLE = 24  # distinct k values, more than a barrier keeps (plan.CACHE_SIZE)


def tile_model() -> Model_1_3:
    """(int32 arithmetic needs HAL 1.3.)"""
    values = np.array([1, 0], np.int32).tobytes() + np.array([1, 0, 1, 1], np.int32).tobytes() \
        + np.array([0, 1, 0, 0], np.int32).tobytes() + np.float32(0.5).tobytes()
    o = lambda t, d, life, loc=None, c=1: Operand(t, d, c, 0.0, 0, life, loc or DataLocation())  # noqa: E731
    operands = [
        o(T.TENSOR_INT32, [1], L.SUBGRAPH_INPUT, c=2),                      # 0 k
        o(T.TENSOR_FLOAT32, list(X_SHAPE), L.SUBGRAPH_INPUT),               # 1 x
        o(T.TENSOR_INT32, [1], L.CONSTANT_COPY, DataLocation(0, 0, 4), 2),  # 2 one
        o(T.INT32, [], L.CONSTANT_COPY, DataLocation(0, 4, 4), 7),          # 3 activation NONE
        o(T.TENSOR_INT32, [1], L.TEMPORARY_VARIABLE),                       # 4 k - 1
        o(T.TENSOR_INT32, [1], L.TEMPORARY_VARIABLE),                       # 5 k (k - 1)
        o(T.TENSOR_INT32, [1], L.TEMPORARY_VARIABLE),                       # 6 m
        o(T.TENSOR_INT32, [4], L.CONSTANT_COPY, DataLocation(0, 8, 16)),    # 7 [1, 0, 1, 1]
        o(T.TENSOR_INT32, [4], L.CONSTANT_COPY, DataLocation(0, 24, 16)),   # 8 [0, 1, 0, 0]
        o(T.TENSOR_INT32, [4], L.TEMPORARY_VARIABLE),                       # 9 m·[0,1,0,0]
        o(T.TENSOR_INT32, [4], L.TEMPORARY_VARIABLE),                       # 10 multiples
        o(T.TENSOR_FLOAT32, [0, 0, 0, 0], L.TEMPORARY_VARIABLE),            # 11 tiled
        o(T.TENSOR_FLOAT32, [1], L.CONSTANT_COPY, DataLocation(0, 40, 4), 2),  # 12 half
        o(T.TENSOR_FLOAT32, [0, 0, 0, 0], L.TEMPORARY_VARIABLE),            # 13
        o(T.TENSOR_FLOAT32, [0, 0, 0, 0], L.TEMPORARY_VARIABLE),            # 14
        o(T.TENSOR_FLOAT32, [0, 0, 0, 0], L.SUBGRAPH_OUTPUT, c=0),          # 15 y
    ]
    ops = [Operation(Op.SUB, [0, 2, 3], [4]), Operation(Op.MUL, [0, 4, 3], [5]), Operation(Op.ADD, [5, 2, 3], [6]),
           Operation(Op.MUL, [8, 6, 3], [9]), Operation(Op.ADD, [7, 9, 3], [10]), Operation(Op.TILE, [1, 10], [11]),
           Operation(Op.MUL, [11, 12, 3], [13]), Operation(Op.ADD, [13, 12, 3], [14]), Operation(Op.RELU, [14], [15])]
    return as_model_1_3(Model(operands, ops, [0, 1], [15], values))


def _request(k: int, x: np.ndarray, out) -> Request:
    pool = allocate_shared(4 + x.nbytes)
    pool.map()[:4] = np.int32(k).tobytes()
    pool.map()[4:] = x.tobytes()
    args = [RequestArgument(False, DataLocation(0, 0, 4), []), RequestArgument(False, DataLocation(0, 4, x.nbytes), [])]
    return Request(args, [RequestArgument(False, DataLocation(1, 0, out.size), [])], [pool, out])


def _m(k: int) -> int:
    return k * (k - 1) + 1


@pytest.mark.parametrize("backend", device_backends())
@pytest.mark.parametrize("specialise", [True, False], ids=["specialised", "host-after-barrier"])
@pytest.mark.parametrize("values", ["fixed", "cycling"])
def test_value_dependent_tile(benchmark, backend, specialise, values):
    benchmark.group = f"TILE by k(k-1)+1, k {values}, {backend}"
    pm = prepared(Device(backend, specialise=specialise), tile_model())
    x = np.random.default_rng(0).standard_normal(X_SHAPE, dtype=np.float32)
    ks = [3] if values == "fixed" else list(range(1, CYCLE + 1))
    out = allocate_shared(max(_m(k) for k in ks) * x.nbytes)
    requests = itertools.cycle([(_request(k, x, out), k) for k in ks])

    def run():
        request, k = next(requests)
        status, shapes, _ = pm.executeSynchronously(request, MeasureTiming.NO)
        assert status == ErrorStatus.NONE and shapes[0].dimensions == [1, X_SHAPE[1] * _m(k), *X_SHAPE[2:]]

    benchmark(run)
