"""GPU compile path, in one run: an 8-op elementwise chain over 4 M float32 elements fused vs
one kernel per op (OpenCL, and CUDA where present), and a 3×3 CONV_2D 1×112×112×32 → 64 on numpy
vs the device backends. Compare the medians within each group."""
from __future__ import annotations

import numpy as np
import pytest

from nngpu.backends import device_backends
from nngpu.driver.callbacks import PreparedModelCallback
from nngpu.driver.device import Device
from nngpu.hal import (DataLocation, ErrorStatus, ExecutionPreference, MeasureTiming, Model, Model_1_3, Operand,
                       OperandLifeTime as L, OperandType as T, Operation, OperationType as Op, OptionalTimePoint,
                       Priority, Request, RequestArgument)
from nngpu.memory import allocate_shared

from tests.compiler.test_fusion import ARITHMETIC, TRANSCENDENTAL, chain_model

CHAIN_SHAPE = [4, 1024, 1024]  # 4 M elements


def prepared(device: Device, model: Model | Model_1_3):
    cb = PreparedModelCallback()
    if isinstance(model, Model_1_3):
        device.prepareModel_1_3(model, ExecutionPreference.SUSTAINED_SPEED, Priority.MEDIUM, OptionalTimePoint(),
                                [], [], bytes(32), cb)
    else:
        device.prepareModel_1_2(model, ExecutionPreference.SUSTAINED_SPEED, [], [], bytes(32), cb)
    status, pm = cb.get(600)
    assert status == ErrorStatus.NONE
    return pm


def request_for(inputs: list[np.ndarray], out_bytes: int) -> Request:
    pool = allocate_shared(sum(a.nbytes for a in inputs))
    args, off = [], 0
    for a in inputs:
        pool.map()[off : off + a.nbytes] = a.tobytes()
        args.append(RequestArgument(False, DataLocation(0, off, a.nbytes), []))
        off += a.nbytes
    out = allocate_shared(out_bytes)
    return Request(args, [RequestArgument(False, DataLocation(1, 0, out_bytes), [])], [pool, out])


@pytest.mark.parametrize("backend", device_backends())
@pytest.mark.parametrize("fusion", [True, False], ids=["fused", "per-op"])
@pytest.mark.parametrize("kinds", [ARITHMETIC, TRANSCENDENTAL], ids=["arithmetic", "with-tanh-logistic"])
def test_elementwise_chain(benchmark, backend, fusion, kinds):
    benchmark.group = f"8-op chain ({'arithmetic' if kinds is ARITHMETIC else 'with tanh, logistic'}), 4M float32, {backend}"
    pm = prepared(Device(backend, fusion=fusion), chain_model(8, CHAIN_SHAPE, kinds))
    x = np.random.default_rng(0).standard_normal(CHAIN_SHAPE, dtype=np.float32)
    req = request_for([x], x.nbytes)
    status = benchmark(pm.executeSynchronously, req, MeasureTiming.NO)[0]
    assert status == ErrorStatus.NONE


def conv_model() -> Model:
    rng = np.random.default_rng(1)
    w = rng.standard_normal((64, 3, 3, 32), dtype=np.float32) * 0.1
    b = rng.standard_normal(64, dtype=np.float32)
    scalars = np.array([1, 1, 1, 1], np.int32)  # SAME, stride 1, 1, RELU
    values = w.tobytes() + b.tobytes() + scalars.tobytes()
    o = lambda t, d, life, loc=None, c=1: Operand(t, d, c, 0.0, 0, life, loc or DataLocation())  # noqa: E731
    wl, bl = w.nbytes, b.nbytes
    operands = [o(T.TENSOR_FLOAT32, [1, 112, 112, 32], L.SUBGRAPH_INPUT),
                o(T.TENSOR_FLOAT32, [64, 3, 3, 32], L.CONSTANT_COPY, DataLocation(0, 0, wl)),
                o(T.TENSOR_FLOAT32, [64], L.CONSTANT_COPY, DataLocation(0, wl, bl)),
                o(T.INT32, [], L.CONSTANT_COPY, DataLocation(0, wl + bl, 4)),
                o(T.INT32, [], L.CONSTANT_COPY, DataLocation(0, wl + bl + 4, 4), 2),
                o(T.INT32, [], L.CONSTANT_COPY, DataLocation(0, wl + bl + 12, 4)),
                o(T.TENSOR_FLOAT32, [1, 112, 112, 64], L.SUBGRAPH_OUTPUT, c=0)]
    return Model(operands, [Operation(Op.CONV_2D, [0, 1, 2, 3, 4, 4, 5], [6])], [0], [6], values)


@pytest.mark.parametrize("backend", ["numpy", *device_backends()])
def test_conv3x3(benchmark, backend):
    benchmark.group = "CONV_2D 3x3 1x112x112x32 -> 64"
    pm = prepared(Device(backend), conv_model())
    x = np.random.default_rng(2).standard_normal((1, 112, 112, 32), dtype=np.float32)
    req = request_for([x], 112 * 112 * 64 * 4)
    status = benchmark(pm.executeSynchronously, req, MeasureTiming.NO)[0]
    assert status == ErrorStatus.NONE
