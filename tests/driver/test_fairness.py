"""Fair asynchronous execution: long executions on one prepared model must not delay another
model's; keys (models) take turns; the pool's thread cap is reported when reached, and idle
threads exit."""
from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

from nngpu.driver.callbacks import ExecutionCallback, PreparedModelCallback
from nngpu.driver.device import Device
from nngpu.driver.work_queue import PoolStats, PriorityPool
from nngpu.hal import (ErrorStatus, ExecutionPreference, MeasureTiming, OptionalTimePoint, OptionalTimeoutDuration,
                       Priority)
from nngpu.json_models import build_model, build_request, load_file

CORPUS = Path(__file__).resolve().parents[1] / "data" / "nnapi-cts" / "V1_3"
LONG_S = 3.0  # each WHILE loop runs until this loop timeout: B has ~3 s to finish first, even loaded


class _Stamped(ExecutionCallback):
    """An execution callback that notes when it was notified."""

    def notify_1_3(self, status, outputShapes, timing) -> None:
        self.at = time.monotonic()
        super().notify_1_3(status, outputShapes, timing)


def _prepare(dev: Device, name: str):
    case = load_file(CORPUS / name)[0]
    cb = PreparedModelCallback()
    assert dev.prepareModel_1_3(build_model(case), ExecutionPreference.FAST_SINGLE_ANSWER, Priority.MEDIUM,
                                OptionalTimePoint(), [], [], bytes(32), cb) == ErrorStatus.NONE
    status, prepared = cb.get(120)
    assert status == ErrorStatus.NONE
    return case, prepared


def _launch(prepared, case, loop_timeout: OptionalTimeoutDuration):
    ex, cb = build_request(case), _Stamped()
    assert prepared.execute_1_3(ex.request, MeasureTiming.NO, OptionalTimePoint(), loop_timeout, cb) == \
        ErrorStatus.NONE
    return cb, ex


def test_long_executions_on_one_model_do_not_delay_another_models():
    dev = Device("numpy")
    loop_case, looping = _prepare(dev, "while_infinite_loop.json.gz")
    quick_case, quick = _prepare(dev, "if_simple.json.gz")
    long_runs = [_launch(looping, loop_case, OptionalTimeoutDuration(int(LONG_S * 1e9))) for _ in range(8)]
    started = time.monotonic()
    cb, _ex = _launch(quick, quick_case, OptionalTimeoutDuration())
    assert cb.wait(60) and cb.get()[0] == ErrorStatus.NONE
    for long_cb, _ in long_runs:
        assert long_cb.wait(60)
        assert long_cb.get()[0] == ErrorStatus.MISSED_DEADLINE_TRANSIENT  # the loop ran to its timeout
    first_long = min(long_cb.at for long_cb, _ in long_runs)
    # B did not queue behind A: it finished before any of A's loops timed out (LONG_S after they began)
    assert cb.at < first_long, (cb.at - started, first_long - started)


def _hold(pool: PriorityPool, key, release: threading.Event) -> None:
    """Occupy one of the pool's workers under `key` until `release` is set."""
    busy = threading.Event()
    pool.submit(lambda: (busy.set(), release.wait(30)), Priority.MEDIUM, key)
    assert busy.wait(10)


def test_keys_take_turns_within_a_priority():
    pool, order, done, release = PriorityPool(1, "test"), [], threading.Event(), threading.Event()
    _hold(pool, None, release)
    for name, key in [("a1", "A"), ("a2", "A"), ("a3", "A"), ("b1", "B")]:
        pool.submit(lambda name=name: order.append(name), Priority.MEDIUM, key)
    pool.submit(lambda: order.append("high-c"), Priority.HIGH, "C")
    pool.submit(done.set, Priority.LOW, "A")
    release.set()
    assert done.wait(10)
    assert order == ["high-c", "a1", "b1", "a2", "a3"]  # first come, first served would put b1 last


def test_a_busy_key_does_not_hold_up_another_key():
    pool, release, done = PriorityPool(4, "test", per_key=2), threading.Event(), threading.Event()
    for _ in range(2):
        _hold(pool, "A", release)
    started_a = threading.Event()
    pool.submit(started_a.set, Priority.HIGH, "A")  # A is at its limit: this one waits
    pool.submit(done.set, Priority.LOW, "B")        # a free thread runs B's now
    assert done.wait(10) and not started_a.is_set()
    assert pool.stats().threads == 3 and pool.stats().waiting == 1
    release.set()
    assert started_a.wait(10)


def test_the_cap_is_reported_when_reached_and_threads_retire_when_idle(caplog):
    pool, release = PriorityPool(2, "capped", idle_s=0.2), threading.Event()
    _hold(pool, "A", release)
    _hold(pool, "B", release)
    assert pool.stats().full == 0
    done = [threading.Event() for _ in range(3)]
    with caplog.at_level(logging.WARNING, logger="nngpu.work_queue"):
        for key, event in zip("CDE", done):
            pool.submit(event.set, Priority.MEDIUM, key)
    assert pool.stats() == PoolStats(threads=2, idle=0, waiting=3, running=2, full=3)  # no third thread
    assert [r.getMessage() for r in caplog.records].count(
        "capped: all 2 threads are busy; jobs wait for one (logged once, see stats().full)") == 1
    release.set()
    assert all(event.wait(10) for event in done)
    deadline = time.monotonic() + 10
    while pool.stats().threads and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pool.stats() == PoolStats(threads=0, idle=0, waiting=0, running=0, full=3)
