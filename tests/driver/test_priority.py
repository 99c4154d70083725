"""HAL 1.3 Priority orders the work that waits: prepares by their own priority, asynchronous
executions by their prepared model's; first come, first served within a priority."""
from __future__ import annotations

import threading
from pathlib import Path

import pytest

import nngpu.driver.device as device_module
import nngpu.driver.prepared_model as prepared_module
from nngpu.driver.callbacks import ExecutionCallback
from nngpu.driver.device import Device
from nngpu.driver.work_queue import PriorityPool
from nngpu.hal import (ErrorStatus, ExecutionPreference, MeasureTiming, OptionalTimePoint, OptionalTimeoutDuration,
                       Priority)
from nngpu.json_models import build_model, build_request, load_file

CASE = Path(__file__).resolve().parents[1] / "data" / "nnapi-cts" / "V1_3" / "if_simple.json.gz"


def _blocked(pool: PriorityPool) -> threading.Event:
    """Occupy the pool's one worker until the returned event is set."""
    release, busy = threading.Event(), threading.Event()
    pool.submit(lambda: (busy.set(), release.wait(30)), Priority.HIGH)
    assert busy.wait(10)
    return release


def test_the_pool_takes_the_highest_priority_first():
    pool, order, done = PriorityPool(1, "test"), [], threading.Event()
    release = _blocked(pool)
    for name, p in [("low", Priority.LOW), ("medium-1", Priority.MEDIUM), ("high", Priority.HIGH),
                    ("medium-2", Priority.MEDIUM)]:
        pool.submit(lambda name=name: order.append(name), p)
    pool.submit(done.set, Priority.LOW)
    assert pool.waiting() == 5
    release.set()
    assert done.wait(10)
    assert order == ["high", "medium-1", "medium-2", "low"]


def test_a_failing_job_does_not_stop_the_worker():
    pool, done = PriorityPool(1, "test"), threading.Event()
    pool.submit(lambda: 1 / 0)
    pool.submit(done.set)
    assert done.wait(10)


class _Recorder:
    """A 1.3 prepare callback that notes the order of notifications."""

    def __init__(self, name: str, order: list, done: threading.Event, expected: int) -> None:
        self.name, self.order, self.done, self.expected = name, order, done, expected
        self.prepared = None

    def notify_1_3(self, status, prepared) -> None:
        assert status == ErrorStatus.NONE
        self.prepared = prepared
        self.order.append(self.name)
        if len(self.order) == self.expected:
            self.done.set()

    notify = notify_1_2 = notify_1_3


@pytest.fixture
def one_worker(monkeypatch):
    prepare, execute = PriorityPool(1, "prepare"), PriorityPool(1, "exec")
    monkeypatch.setattr(device_module, "_PREPARE_POOL", prepare)
    monkeypatch.setattr(prepared_module, "_EXEC_POOL", execute)
    return prepare, execute


def test_prepares_and_executions_wait_by_priority(one_worker):
    prepare_pool, exec_pool = one_worker
    case = load_file(CASE)[0]
    dev, order, done = Device("numpy"), [], threading.Event()
    release = _blocked(prepare_pool)
    callbacks = {}
    for name, p in [("low", Priority.LOW), ("high", Priority.HIGH), ("medium", Priority.MEDIUM)]:
        callbacks[name] = cb = _Recorder(name, order, done, 3)
        assert dev.prepareModel_1_3(build_model(case), ExecutionPreference.FAST_SINGLE_ANSWER, p,
                                    OptionalTimePoint(), [], [], bytes(32), cb) == ErrorStatus.NONE
    release.set()
    assert done.wait(30)
    assert order == ["high", "medium", "low"]

    finished: list[str] = []
    release = _blocked(exec_pool)
    waits = []
    for name in ("low", "medium", "high"):
        ex = build_request(case)
        cb = ExecutionCallback()
        original = cb.notify_1_3
        cb.notify_1_3 = lambda *a, name=name, original=original: (finished.append(name), original(*a))
        assert callbacks[name].prepared.execute_1_3(ex.request, MeasureTiming.NO, OptionalTimePoint(),
                                                   OptionalTimeoutDuration(), cb) == ErrorStatus.NONE
        waits.append((cb, ex))
    release.set()
    for cb, _ in waits:
        assert cb.wait(30) and cb.get()[0] == ErrorStatus.NONE
    assert finished == ["high", "medium", "low"]
