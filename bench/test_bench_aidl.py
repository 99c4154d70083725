"""Latency of one execution through the AIDL face, per backend (numpy and each device backend):
IPreparedModel::executeSynchronously (converting and checking the request each call) against a
reusable IExecution (checked once; on a device plan its pools registered with the backend, so
no host copy) and an IBurst with memory identifier tokens. The model adds two float32 tensors
of 1x1000 (small: the per-call overhead shows) and of 1x256x256x4 (1 MiB each: the copies show).
Each in this process and through a real `nngpu serve` (nngpu.connect(path, hal="aidl")), where
the reusable execution and the burst are kept in the service.

    pytest bench/test_bench_aidl.py"""
from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest

import nngpu

from nngpu.aidl import AidlDevice, PreparedModelCallback, from_core
from nngpu.backends import device_backends
from nngpu.hal.aidl import types as A
from nngpu.hal.types import ExecutionPreference, FusedActivationFunc, OperandType as T, OperationType as Op, Priority
from nngpu.memory import allocate_shared

from tests.compiler.model_builder import ModelBuilder
from tests.service.conftest import Served

from .common import show_summary

SHAPES = {"small": (1, 1000), "1MiB": (1, 256, 256, 4)}
WHERE = ("in-process", "served")
RESULTS: dict[tuple[str, str, str, str], float] = {}


@pytest.fixture(scope="module", autouse=True)
def ratio_table(request):
    yield
    lines = ["", "AIDL latency, median us (ratio to executeSynchronously):"]
    for backend in ("numpy", *device_backends()):
        for where in WHERE:
            for size in SHAPES:
                key = (backend, where, size)
                sync = RESULTS.get((*key, "sync"))
                if sync:
                    cells = [f"{path} {RESULTS[(*key, path)] * 1e6:8.1f} ({RESULTS[(*key, path)] / sync:.2f}x)"
                             for path in ("sync", "reusable", "burst") if (*key, path) in RESULTS]
                    lines.append(f"  {backend:7s} {where:10s} {size:6s} " + "  ".join(cells))
    show_summary(request, lines)


@pytest.fixture(scope="module", params=["numpy", *device_backends()])
def backend(request) -> str:
    return request.param


@pytest.fixture(scope="module", params=WHERE)
def device(request, backend):
    """(where, the AIDL device): in this process, or an `nngpu serve --backend B` of its own."""
    if request.param == "in-process":
        yield request.param, AidlDevice(backend=backend)
        return
    with tempfile.TemporaryDirectory(prefix="nngpu-b", dir="/tmp") as d:   # a short socket path
        served = Served(Path(d) / "s.sock", "--backend", backend)
        try:
            with nngpu.connect(served.path, hal="aidl") as aidl:
                yield request.param, aidl
        finally:
            served.stop()


@pytest.fixture(scope="module", params=list(SHAPES))
def case(request, backend, device):
    where, aidl = device
    shape = SHAPES[request.param]
    b = ModelBuilder()
    x, y = b.input(T.TENSOR_FLOAT32, shape), b.input(T.TENSOR_FLOAT32, shape)
    b.output(b.op(Op.ADD, [x, y, b.constant(T.INT32, FusedActivationFunc.NONE)], T.TENSOR_FLOAT32, shape))
    cb = PreparedModelCallback()
    aidl.prepareModel(from_core.model(b.build()), ExecutionPreference.SUSTAINED_SPEED, Priority.MEDIUM, A.NO_TIME,
                      [], [], bytes(32), cb)
    prepared = cb.get(300)[1]
    n = int(np.prod(shape)) * 4
    inp, out = allocate_shared(2 * n), allocate_shared(n)
    inp.map()[:] = np.random.default_rng(0).standard_normal(2 * n // 4).astype(np.float32).tobytes()

    def arg(pool: int, offset: int) -> A.RequestArgument:
        return A.RequestArgument(False, A.DataLocation(pool, offset, n, 0), [])
    request_ = A.Request([arg(0, 0), arg(0, n)], [arg(1, 0)], [A.RequestMemoryPool(pool=from_core.memory(p))
                                                              for p in (inp, out)])
    return (backend, where, request.param), prepared, request_, (inp, out)


def _record(benchmark, key) -> None:
    stats = getattr(benchmark, "stats", None)
    if stats is not None and getattr(stats, "stats", None) is not None:
        RESULTS[key] = stats.stats.median


def test_sync(benchmark, case):
    key, prepared, request, _ = case
    benchmark.group = "aidl " + " ".join(key)
    benchmark(lambda: prepared.executeSynchronously(request, False, A.NO_TIME, A.NO_TIME))
    _record(benchmark, (*key, "sync"))


def test_reusable(benchmark, case):
    key, prepared, request, _ = case
    execution = prepared.createReusableExecution(request, A.ExecutionConfig())
    benchmark.group = "aidl " + " ".join(key)
    benchmark(lambda: execution.executeSynchronously(A.NO_TIME))
    _record(benchmark, (*key, "reusable"))


def test_burst(benchmark, case):
    key, prepared, request, _ = case
    burst = prepared.configureExecutionBurst()
    benchmark.group = "aidl " + " ".join(key)
    benchmark(lambda: burst.executeSynchronously(request, [0, 1], False, A.NO_TIME, A.NO_TIME))
    _record(benchmark, (*key, "burst"))
