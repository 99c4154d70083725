"""Executions at once through the AIDL face are right: 8 threads run 3 prepared models through
every AIDL path (sync, with config, reusable, burst, fenced), on inputs drawn from a few sets,
and every output is compared with the numpy reference's for that set (the models and checks of
tests/runtime/test_concurrent_executions.py). 800 executions by default, 4,000 with --full-cts."""
from __future__ import annotations

import numpy as np
import pytest

from nngpu.aidl import AidlDevice, from_core
from nngpu.backends import device_backends
from nngpu.cts.aidl_face import PATHS, AidlFace
from nngpu.driver.device import Device
from nngpu.hal.types import ErrorStatus, MeasureTiming

from tests.runtime.test_concurrent_executions import THREADS, _models, _prepare, reference_sets, run_concurrently


@pytest.mark.parametrize("backend", ["numpy", *device_backends()])
def test_concurrent_aidl_executions_match_numpy(backend, request):
    total = 4_000 if request.config.getoption("--full-cts") else 800
    device, reference = AidlDevice(Device(backend)), Device("numpy")
    rng = np.random.default_rng(43)
    cases = {}
    for name, named in _models().items():
        status, prepared = AidlFace.prepare(device, from_core.model(named.model), False)
        assert status == ErrorStatus.NONE
        cases[name] = (named, prepared, reference_sets(named, _prepare(reference, named), rng))

    def execute(prepared, path, ex):
        return AidlFace.execute(prepared, path, ex, False, MeasureTiming.NO), 1

    executions, wrong = run_concurrently(cases, PATHS, execute, total // THREADS, 44)
    assert not wrong, f"{len(wrong)} of {executions} wrong: {wrong[:5]}"
