"""A valid configureExecutionBurst is never INVALID_ARGUMENT: 64 threads configure bursts at once
beside a CPU hog, in process and through `nngpu serve`, and every one is served; a process out of
fds answers GENERAL_FAILURE with the reason logged, and configures again once it has them back."""
from __future__ import annotations

import logging
import resource
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import nngpu
from nngpu.burst import DATUM_SIZE, BurstCallback, ExecutionBurstController, MessageQueue
from nngpu.driver.burst_executor import configure_burst
from nngpu.hal.types import ErrorStatus, MeasureTiming
from tests.service.conftest import Served

THREADS = 64


@pytest.fixture
def served():
    import tempfile
    from pathlib import Path

    with tempfile.TemporaryDirectory(prefix="nngpu-t", dir="/tmp") as d:  # a short socket path
        s = Served(Path(d) / "s.sock")
        yield s
        s.stop()


@pytest.fixture
def cpu_hog():
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    yield
    hog.kill()
    hog.wait()


def _burst_computes(prepared, kit) -> ErrorStatus:
    """Configure a burst on `prepared` and run one packet: the first status that is not NONE."""
    try:
        with ExecutionBurstController.create(prepared) as burst:
            r = kit.add_request()
            status, _shapes, _timing = burst.compute(r.request, MeasureTiming.NO)
            if status == ErrorStatus.NONE:
                np.testing.assert_array_equal(r.result(), kit.A + kit.B)
            return status
    except Exception as e:  # BurstError carries the configure status
        return getattr(e, "status", ErrorStatus.GENERAL_FAILURE)


def test_64_concurrent_configures_in_process_are_all_served(add_prepared, kit, cpu_hog):
    with ThreadPoolExecutor(THREADS) as pool:
        statuses = list(pool.map(lambda _: _burst_computes(add_prepared, kit), range(THREADS)))
    assert statuses == [ErrorStatus.NONE] * THREADS


def test_64_concurrent_configures_through_the_service_are_all_served(served, kit, cpu_hog):
    with nngpu.connect(served.path) as device:
        prepared = kit.prepare(device, kit.add_model())
        with ThreadPoolExecutor(THREADS) as pool:
            statuses = list(pool.map(lambda _: _burst_computes(prepared, kit), range(THREADS)))
    assert statuses == [ErrorStatus.NONE] * THREADS


def test_out_of_fds_is_general_failure_with_its_reason(add_prepared, caplog):
    requests, results = MessageQueue(DATUM_SIZE, 16), MessageQueue(DATUM_SIZE, 16)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    spare = []
    try:  # take every fd below a lowered limit, so the driver cannot dup the channels' fds
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(_open_fds() + 8, 64), hard))
        while True:
            try:
                spare.append(open("/dev/null"))
            except OSError:
                break
        with caplog.at_level(logging.ERROR, logger="nngpu.burst"):
            assert configure_burst(add_prepared, BurstCallback(), requests, results) == (ErrorStatus.GENERAL_FAILURE, None)
        assert any("configureExecutionBurst: request channel" in r.getMessage() and "Too many open files" in r.getMessage()
                   for r in caplog.records)
    finally:
        for f in spare:
            f.close()
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    status, context = configure_burst(add_prepared, BurstCallback(), requests, results)
    assert status == ErrorStatus.NONE
    context.close()


def _open_fds() -> int:
    import os

    return len(os.listdir("/proc/self/fd"))
