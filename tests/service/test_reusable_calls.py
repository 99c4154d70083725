"""The AIDL IExecution and IBurst through the service (nngpu.service.reusable_calls): a reusable
execution is checked once and kept in the service, a burst keeps each token's memory there until
it is released; a client reaches only its own, within its caps, and what it leaves goes with the
connection. A real Session over a real socketpair, in this process, so that the service's
tables can be read."""
from __future__ import annotations

import gc
import os
import time

import numpy as np
import pytest

from nngpu.aidl import from_core
from nngpu.driver import execution as execution_module
from nngpu.driver.device import Device
from nngpu.driver.fenced import FenceState, fence_state
from nngpu.hal.aidl import types as A
from nngpu.hal.types import ErrorStatus
from nngpu.memory import allocate_shared
from nngpu.service import reusable_calls, session as session_module

from tests.aidl.aidl_util import doubling_model, prepare as prepared_model, raised
from tests.service.conftest import SessionPair

WAIT_S = 10.0


@pytest.fixture(scope="module")
def device():
    return Device("numpy")


@pytest.fixture
def pair(device):
    p = SessionPair(device)
    yield p
    p.close()


def prepare(aidl):
    return prepared_model(aidl, doubling_model())


def request_over(pool) -> A.Request:
    """x at bytes 0-8 of `pool`, x + x at 8-16."""
    def arg(offset: int) -> A.RequestArgument:
        return A.RequestArgument(False, A.DataLocation(0, offset, 8, 0), [])
    return A.Request([arg(0)], [arg(8)], [A.RequestMemoryPool(pool=from_core.memory(pool))])


def new_pool(x: list[float]):
    pool = allocate_shared(16)
    pool.map()[:8] = np.array(x, np.float32).tobytes()
    return pool


def doubled(pool) -> list[float]:
    return list(pool.array(np.float32, 8, 2))


def eventually(condition, what: str) -> None:
    end = time.monotonic() + WAIT_S
    while not condition():
        assert time.monotonic() < end, what
        gc.collect()
        time.sleep(0.01)


@pytest.fixture
def checks(monkeypatch) -> list:
    """Each validation of a request against a model, in the service (the same process here)."""
    seen: list = []
    real = execution_module.validate_request

    def counted(request, model):
        seen.append(request)
        return real(request, model)
    monkeypatch.setattr(execution_module, "validate_request", counted)
    return seen


def test_a_reusable_execution_is_checked_once_and_kept_in_the_service(pair, checks):
    prepared = prepare(pair.aidl)
    pool = new_pool([1, 2])
    execution = prepared.createReusableExecution(request_over(pool), A.ExecutionConfig(measureTiming=True))
    assert len(pair.session.executions) == 1 and len(checks) == 1
    for k in range(3):
        pool.map()[:8] = np.array([k, 10 * k], np.float32).tobytes()   # the service maps the client's pool
        result = execution.executeSynchronously(A.NO_TIME)
        assert result.outputSufficientSize and result.timing.timeOnDeviceNs >= 0
        assert doubled(pool) == [2 * k, 20 * k]
    fenced = execution.executeFenced([], A.NO_TIME, A.NO_TIME)
    assert fenced.syncFence is not None
    eventually(lambda: fence_state(fenced.syncFence, "eventfd") == FenceState.SIGNALED, "the fence signals")
    assert fenced.callback.getExecutionInfo()[0] == ErrorStatus.NONE
    os.close(fenced.syncFence)
    assert len(checks) == 1                       # five executions, one check
    del execution
    eventually(lambda: not pair.session.executions, "the service forgets a collected execution")


def test_a_bad_request_or_a_bad_deadline_fails_where_the_spec_says(pair):
    prepared = prepare(pair.aidl)
    pool = new_pool([1, 2])
    good = request_over(pool)
    small = A.Request(good.inputs, [A.RequestArgument(False, A.DataLocation(0, 8, 4, 0), [])], good.pools)
    execution = prepared.createReusableExecution(small, A.ExecutionConfig())
    result = execution.executeSynchronously(A.NO_TIME)     # too small an output is a result, not an error
    assert not result.outputSufficientSize and result.outputShapes[0].dimensions == [2]
    bad = A.Request(good.inputs, [A.RequestArgument(False, A.DataLocation(0, 12, 8, 0), [])], good.pools)
    assert raised(lambda: prepared.createReusableExecution(bad, A.ExecutionConfig())) == ErrorStatus.INVALID_ARGUMENT
    assert len(pair.session.executions) == 1
    late = time.clock_gettime_ns(time.CLOCK_BOOTTIME) - 1_000_000
    assert raised(lambda: execution.executeSynchronously(late)) in (
        ErrorStatus.MISSED_DEADLINE_PERSISTENT, ErrorStatus.MISSED_DEADLINE_TRANSIENT)


def test_a_burst_keeps_a_tokens_memory_in_the_service_until_it_is_released(pair, checks):
    prepared = prepare(pair.aidl)
    burst = prepared.configureExecutionBurst()
    (kept,) = pair.session.token_bursts.values()
    pool = new_pool([1, 2])
    for k in range(2):
        pool.map()[:4] = np.array([k], np.float32).tobytes()
        assert burst.executeSynchronously(request_over(pool), [5], False, A.NO_TIME, A.NO_TIME).outputSufficientSize
        assert doubled(pool) == [2 * k, 4]
    assert len(kept) == 1
    other = new_pool([3, 4])                       # another memory under the same token replaces it
    assert burst.executeSynchronously(request_over(other), [5], False, A.NO_TIME, A.NO_TIME).outputSufficientSize
    assert doubled(other) == [6, 8] and len(kept) == 1
    assert burst.executeSynchronously(request_over(pool), [-1], False, A.NO_TIME, A.NO_TIME).outputSufficientSize
    assert len(kept) == 1                          # -1: that call only
    burst.releaseMemoryResource(5)
    assert len(kept) == 0
    assert raised(lambda: burst.executeSynchronously(request_over(pool), [], False, A.NO_TIME, A.NO_TIME)) == \
        ErrorStatus.INVALID_ARGUMENT
    burst = None
    eventually(lambda: not pair.session.token_bursts, "the service forgets a collected burst")


def test_a_client_reaches_only_its_own_executions_and_bursts(device):
    first, second = SessionPair(device), SessionPair(device)
    try:
        pool = new_pool([1, 2])
        execution = prepare(first.aidl).createReusableExecution(request_over(pool), A.ExecutionConfig())
        burst = prepare(first.aidl).configureExecutionBurst()
        (execution_id,), (burst_id,) = first.session.executions, first.session.token_bursts
        call = second.link._conn.call
        assert call("runExecution", {"execution": execution_id})["status"] == ErrorStatus.INVALID_ARGUMENT
        assert call("fencedExecution", {"execution": execution_id, "wait_for": []})["status"] == \
            ErrorStatus.INVALID_ARGUMENT
        assert call("releaseToken", {"burst": burst_id, "token": 1})["status"] == ErrorStatus.INVALID_ARGUMENT
        assert call("releaseExecution", {"execution": execution_id})["status"] == ErrorStatus.NONE   # a no-op
        assert call("closeTokenBurst", {"burst": burst_id})["status"] == ErrorStatus.NONE
        assert first.session.executions and first.session.token_bursts
        assert execution.executeSynchronously(A.NO_TIME).outputSufficientSize
        assert burst.executeSynchronously(request_over(pool), [1], False, A.NO_TIME, A.NO_TIME).outputSufficientSize
    finally:
        first.close()
        second.close()


def test_the_caps_hold_and_the_connection_end_releases_everything(device, monkeypatch):
    monkeypatch.setattr(reusable_calls, "MAX_KEPT_MEMORIES", 2)
    monkeypatch.setattr(session_module, "MAX_OBJECTS", 2)
    pair = SessionPair(device)
    prepared = prepare(pair.aidl)
    pools = [new_pool([1, 2]) for _ in range(3)]
    executions = [prepared.createReusableExecution(request_over(p), A.ExecutionConfig()) for p in pools[:2]]
    assert raised(lambda: prepared.createReusableExecution(request_over(pools[2]), A.ExecutionConfig())) == \
        ErrorStatus.GENERAL_FAILURE                # a third memory kept
    del executions[1]
    eventually(lambda: len(pair.session.executions) == 1, "the service forgets a collected execution")
    burst = prepared.configureExecutionBurst()
    assert burst.executeSynchronously(request_over(pools[1]), [1], False, A.NO_TIME, A.NO_TIME).outputSufficientSize
    assert raised(lambda: burst.executeSynchronously(request_over(pools[2]), [2], False, A.NO_TIME,
                                                     A.NO_TIME)) == ErrorStatus.GENERAL_FAILURE
    assert burst.executeSynchronously(request_over(pools[2]), [-1], False, A.NO_TIME, A.NO_TIME).outputSufficientSize
    spare = prepared.configureExecutionBurst()
    assert raised(prepared.configureExecutionBurst) == ErrorStatus.GENERAL_FAILURE    # a third burst
    kept = [*pair.session.executions.values(), *pair.session.token_bursts.values()]
    assert sum(len(k) for k in kept) == 2
    pair.close()
    eventually(lambda: not pair.session.executions and not pair.session.token_bursts
               and sum(len(k) for k in kept) == 0, "the connection's end releases its executions and bursts")
    del spare
