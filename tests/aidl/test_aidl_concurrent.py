"""Executions at once through the AIDL face are right: 8 threads run 3 prepared models through
every AIDL path (sync, with config, reusable, burst, fenced), on inputs drawn from a few sets,
and every output is compared with the numpy reference's for that set (the models and checks of
tests/runtime/test_concurrent_executions.py). 800 executions by default, 4,000 with --full-cts."""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from nngpu.aidl import AidlDevice, from_core
from nngpu.backends import device_backends
from nngpu.cts.aidl_face import PATHS, AidlFace
from nngpu.driver.device import Device
from nngpu.hal.types import ErrorStatus, MeasureTiming

from tests.runtime.test_concurrent_executions import SETS, THREADS, _close, _draw, _execution, _models, _prepare


@pytest.mark.parametrize("backend", ["numpy", *device_backends()])
def test_concurrent_aidl_executions_match_numpy(backend, request):
    total = 4_000 if request.config.getoption("--full-cts") else 800
    device, reference = AidlDevice(Device(backend)), Device("numpy")
    rng = np.random.default_rng(43)
    cases = {}
    for name, named in _models().items():
        prepared_ref = _prepare(reference, named)
        sets = []
        for _ in range(SETS):
            inputs = _draw(named, rng)
            ex = _execution(named, inputs)
            assert prepared_ref.executeSynchronously(ex.request, MeasureTiming.NO)[0] == ErrorStatus.NONE
            sets.append((inputs, [ex.output_pool.array(t.dtype, loc.offset, int(np.prod(t.shape))).reshape(t.shape).copy()
                                  for t, (_, loc) in zip(named.outputs, ex.outputs)]))
        status, prepared = AidlFace.prepare(device, from_core.model(named.model), False)
        assert status == ErrorStatus.NONE
        cases[name] = (named, prepared, sets)
    wrong: list[str] = []
    lock = threading.Lock()

    def worker(k: int) -> int:
        r = np.random.default_rng([44, k])
        for i in range(total // THREADS):
            name = list(cases)[r.integers(len(cases))]
            named, prepared, sets = cases[name]
            path = PATHS[(k + i) % len(PATHS)]
            inputs, expected = sets[r.integers(SETS)]
            ex = _execution(named, inputs)
            status, _shapes, _timing = AidlFace.execute(prepared, path, ex, False, MeasureTiming.NO)
            got = [ex.output_pool.array(t.dtype, loc.offset, int(np.prod(t.shape))).reshape(t.shape)
                   for t, (_, loc) in zip(named.outputs, ex.outputs)]
            if status != ErrorStatus.NONE or not all(_close(g, e) for g, e in zip(got, expected)):
                with lock:
                    wrong.append(f"{name} via {path}: {ErrorStatus(status).name}")
        return total // THREADS

    with ThreadPoolExecutor(THREADS) as pool:
        executions = sum(pool.map(worker, range(THREADS)))
    assert not wrong, f"{len(wrong)} of {executions} wrong: {wrong[:5]}"
