"""Deadlines and loop timeouts through the AIDL face, after AIDL QualityOfServiceTests: on a
WHILE loop that never ends, a loop timeout, a CLOCK_BOOTTIME deadline or a fenced duration stops
the execution with MISSED_DEADLINE_*, on every execution call; a deadline already passed
fails a prepare through its callback."""
from __future__ import annotations

import os
import select
import time
from pathlib import Path

import pytest

from nngpu.aidl import AidlDevice, PreparedModelCallback, from_core
from nngpu.hal.aidl import types as A
from nngpu.hal.types import ErrorStatus, ExecutionPreference, Priority
from nngpu.json_models import build_model, build_request, load_file

CORPUS = Path(__file__).resolve().parents[1] / "data" / "nnapi-cts" / "V1_3"
MISSED = (ErrorStatus.MISSED_DEADLINE_TRANSIENT, ErrorStatus.MISSED_DEADLINE_PERSISTENT)
SHORT_NS = 150_000_000


@pytest.fixture(scope="module")
def looping():
    case = load_file(CORPUS / "while_infinite_loop.json.gz")[0]
    cb = PreparedModelCallback()
    AidlDevice(backend="numpy").prepareModel(from_core.model(build_model(case, False)),
                                             ExecutionPreference.FAST_SINGLE_ANSWER, Priority.MEDIUM, A.NO_TIME, [],
                                             [], bytes(32), cb)
    status, prepared = cb.get(60)
    assert status == ErrorStatus.NONE
    return case, prepared


def _soon() -> int:
    return time.clock_gettime_ns(time.CLOCK_BOOTTIME) + SHORT_NS


def _stopped(call) -> ErrorStatus:
    """The status a call raised, checked to come from the short limit, not the 2 s default."""
    t0 = time.monotonic()
    with pytest.raises(A.ServiceSpecificError) as e:
        call()
    assert time.monotonic() - t0 < 1.5
    return e.value.status


def test_loop_timeouts_and_deadlines_stop_every_call(looping):
    case, pm = looping
    ex = build_request(case)                     # holds the pools (and their fds) the request names
    request = from_core.request(ex.request)
    short = A.ExecutionConfig(False, SHORT_NS)
    calls = {
        "sync loop timeout": lambda: pm.executeSynchronously(request, False, A.NO_TIME, SHORT_NS),
        "sync deadline": lambda: pm.executeSynchronously(request, False, _soon(), A.NO_TIME),
        "config loop timeout": lambda: pm.executeSynchronouslyWithConfig(request, short, A.NO_TIME),
        "reusable loop timeout": lambda: pm.createReusableExecution(request, short).executeSynchronously(A.NO_TIME),
        "reusable deadline": lambda: pm.createReusableExecution(request, A.ExecutionConfig()).executeSynchronously(
            _soon()),
        "burst loop timeout": lambda: pm.configureExecutionBurst().executeSynchronously(
            request, [-1] * len(request.pools), False, A.NO_TIME, SHORT_NS),
        "burst deadline": lambda: pm.configureExecutionBurst().executeSynchronouslyWithConfig(
            request, [-1] * len(request.pools), A.ExecutionConfig(), _soon()),
    }
    for name, call in calls.items():
        assert _stopped(call) in MISSED, name


def test_a_fenced_duration_stops_the_loop(looping):
    case, pm = looping
    ex = build_request(case)
    request = from_core.request(ex.request)
    t0 = time.monotonic()
    result = pm.executeFenced(request, [], False, A.NO_TIME, A.NO_TIME, SHORT_NS)
    poll = select.poll()
    poll.register(result.syncFence, select.POLLIN)
    try:
        assert poll.poll(10_000)
    finally:
        os.close(result.syncFence)
    assert time.monotonic() - t0 < 1.5
    assert result.callback.getExecutionInfo()[0] in MISSED


def test_a_passed_deadline_fails_a_prepare_through_its_callback():
    case = load_file(CORPUS / "while_fib.json.gz")[0]
    cb = PreparedModelCallback()
    AidlDevice(backend="numpy").prepareModel(from_core.model(build_model(case, False)),
                                             ExecutionPreference.FAST_SINGLE_ANSWER, Priority.MEDIUM, 0, [], [],
                                             bytes(32), cb)
    assert cb.get(30)[0] in MISSED and cb.prepared_model is None
