"""What the shrink-safe pools of nngpu.memory cost: an ADD of two float32 tensors (1000 and
262144 elements) on the numpy backend, executeSynchronously and an in-process burst, its inputs
and output in one pool that is either sealed against shrinking (mapped, the mapping cached; a
burst registers it with the backend) or an unsealed memfd as a client may send (read and written
with pread/pwrite, never mapped). The summary gives unsealed / sealed per path and size.

Run explicitly: `pytest bench/test_bench_pools.py`."""
import os

import numpy as np
import pytest

from nngpu.burst import ExecutionBurstController
from nngpu.driver.callbacks import PreparedModelCallback
from nngpu.driver.device import Device
from nngpu.hal.types import (
    DataLocation,
    ErrorStatus,
    ExecutionPreference,
    MeasureTiming,
    OperandType as T,
    OperationType as Op,
    Request,
    RequestArgument,
)
from nngpu.memory import Memory, allocate_shared, memory_from_fd
from nngpu.testing import output, scalar, single_op_model, tensor

from .common import show_summary

pytestmark = pytest.mark.benchmark(group="pools", min_rounds=100, warmup=True)

SIZES = [1000, 262144]
MEDIANS: dict[tuple[str, int, str], float] = {}  # (path, n, pool kind) -> median s


@pytest.fixture(scope="module", autouse=True)
def ratio_table(request):
    yield
    lines = ["", "pools (median µs; machine shared, compare within one run):"]
    for path in ("sync", "burst"):
        for n in SIZES:
            sealed, unsealed = MEDIANS.get((path, n, "sealed")), MEDIANS.get((path, n, "unsealed"))
            if sealed and unsealed:
                lines.append(f"  {path:5s} n={n:7d}  sealed (mapped) {sealed * 1e6:8.1f}  unsealed (pread) "
                             f"{unsealed * 1e6:8.1f}  = {unsealed / sealed:5.2f}x")
    show_summary(request, lines)


@pytest.fixture(scope="module", params=SIZES)
def n(request):
    return request.param


@pytest.fixture(scope="module")
def prepared(n):
    z = np.zeros((1, n), np.float32)
    model = single_op_model(Op.ADD, [tensor(T.TENSOR_FLOAT32, z), tensor(T.TENSOR_FLOAT32, z), scalar(T.INT32, 0)],
                            [output(T.TENSOR_FLOAT32, [1, n])])
    cb = PreparedModelCallback()
    Device("numpy").prepareModel_1_2(model, ExecutionPreference.FAST_SINGLE_ANSWER, [], [], bytes(32), cb)
    status, pm = cb.get(60)
    assert status == ErrorStatus.NONE
    return pm


def pool(kind: str, n: int) -> Memory:
    size = 3 * 4 * n
    if kind == "sealed":
        mem = allocate_shared(size)
    else:
        fd = os.memfd_create("client-pool", os.MFD_CLOEXEC)
        os.ftruncate(fd, size)
        mem = memory_from_fd("ashmem", size, fd)
    assert mem.mapped == (kind == "sealed")
    mem.write(0, np.ones(2 * n, np.float32))
    return mem


def request(mem: Memory, n: int) -> Request:
    b = 4 * n
    return Request([RequestArgument(False, DataLocation(0, 0, b), []), RequestArgument(False, DataLocation(0, b, b), [])],
                   [RequestArgument(False, DataLocation(0, 2 * b, b), [])], [mem])


@pytest.mark.parametrize("kind", ["sealed", "unsealed"])
def test_sync(benchmark, prepared, n, kind):
    req = request(pool(kind, n), n)
    status = benchmark(lambda: prepared.executeSynchronously(req, MeasureTiming.NO)[0])
    assert status == ErrorStatus.NONE
    MEDIANS[("sync", n, kind)] = benchmark.stats.stats.median


@pytest.mark.parametrize("kind", ["sealed", "unsealed"])
def test_burst(benchmark, prepared, n, kind):
    mem = pool(kind, n)
    req = request(mem, n)
    with ExecutionBurstController.create(prepared) as burst:
        status = benchmark(lambda: burst.compute(req, MeasureTiming.NO)[0])
    assert status == ErrorStatus.NONE
    assert np.array_equal(mem.read(8 * n, 4 * n).view(np.float32), np.full(n, 2, np.float32))
    MEDIANS[("burst", n, kind)] = benchmark.stats.stats.median
