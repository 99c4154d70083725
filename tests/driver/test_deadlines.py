"""HAL 1.3 deadlines (VTS QualityOfServiceTests): a deadline already passed gives
MISSED_DEADLINE_* through the callback of prepareModel_1_3 and execute_1_3 (whose launch
returns NONE) and from executeSynchronously_1_3; an unlimited one runs normally; one that passes
during an execution stops it; a malformed one is INVALID_ARGUMENT."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from nngpu.backends import device_backends
from nngpu.driver.callbacks import ExecutionCallback, PreparedModelCallback
from nngpu.driver.deadline import UNLIMITED
from nngpu.driver.device import Device
from nngpu.hal import (ErrorStatus, ExecutionPreference, MeasureTiming, OptionalTimePoint, OptionalTimeoutDuration,
                       Priority)
from nngpu.hal.types import UINT64_MAX
from nngpu.json_models import build_model, build_request, load_file
from nngpu.modelutil import as_model_1_3

CORPUS = Path(__file__).resolve().parents[1] / "data" / "nnapi-cts" / "V1_3"
MISSED = (ErrorStatus.MISSED_DEADLINE_TRANSIENT, ErrorStatus.MISSED_DEADLINE_PERSISTENT)
NOW = "now"


def _point(when) -> OptionalTimePoint:
    if when is NOW:
        return OptionalTimePoint(time.monotonic_ns())
    return OptionalTimePoint(when)


def _prepare(dev, model, deadline=OptionalTimePoint()):
    cb = PreparedModelCallback()
    launch = dev.prepareModel_1_3(model, ExecutionPreference.FAST_SINGLE_ANSWER, Priority.MEDIUM, deadline,
                                  [], [], bytes(32), cb)
    status, prepared = cb.get(120)
    return launch, status, prepared


@pytest.fixture(scope="module")
def case():
    return load_file(CORPUS / "if_simple.json.gz")[0]


@pytest.fixture(scope="module", params=["numpy", *device_backends()])
def prepared(request, case):
    launch, status, prepared = _prepare(Device(request.param), build_model(case))
    assert launch == status == ErrorStatus.NONE
    return prepared


def test_prepare_with_a_passed_or_unlimited_deadline(case):
    dev = Device("numpy")
    launch, status, prepared = _prepare(dev, build_model(case), _point(NOW))
    assert launch == ErrorStatus.NONE and status in MISSED and prepared is None
    launch, status, prepared = _prepare(dev, build_model(case), _point(UNLIMITED))
    assert launch == status == ErrorStatus.NONE and prepared is not None


@pytest.mark.skipif("opencl" not in device_backends(), reason="needs the OpenCL backend for a slow compile")
def test_a_deadline_that_passes_while_compiling(case, tmp_path, monkeypatch):
    monkeypatch.setenv("NNGPU_CACHE_DIR", str(tmp_path))  # nothing cached: the compile takes a while
    model = as_model_1_3(build_model(load_file(Path(__file__).resolve().parents[2] / "nngpu" / "data" /
                                               "demo_cnn.json")[0]))
    launch, status, prepared = _prepare(Device("opencl"), model, OptionalTimePoint(time.monotonic_ns() + 20_000_000))
    assert launch == ErrorStatus.NONE and status in MISSED and prepared is None


@pytest.mark.parametrize("when", [NOW, UNLIMITED])
def test_execute_1_3(prepared, case, when):
    ex = build_request(case)
    cb = ExecutionCallback()
    assert prepared.execute_1_3(ex.request, MeasureTiming.NO, _point(when), OptionalTimeoutDuration(), cb) == \
        ErrorStatus.NONE
    assert cb.wait(60)
    status, shapes, timing = cb.get()
    if when is NOW:
        assert status in MISSED and timing.timeOnDevice == timing.timeInDriver == UINT64_MAX
    else:
        assert status == ErrorStatus.NONE and shapes


@pytest.mark.parametrize("when", [NOW, UNLIMITED])
def test_execute_synchronously_1_3(prepared, case, when):
    ex = build_request(case)
    status, shapes, timing = prepared.executeSynchronously_1_3(ex.request, MeasureTiming.YES, _point(when),
                                                              OptionalTimeoutDuration())
    if when is NOW:
        assert status in MISSED and timing.timeOnDevice == UINT64_MAX
    else:
        assert status == ErrorStatus.NONE and timing.timeOnDevice != UINT64_MAX


def test_a_deadline_that_passes_during_the_execution_stops_it():
    case = load_file(CORPUS / "while_infinite_loop.json.gz")[0]
    launch, status, prepared = _prepare(Device("numpy"), build_model(case))
    assert status == ErrorStatus.NONE
    ex = build_request(case)
    t0 = time.monotonic()
    status, _, _ = prepared.executeSynchronously_1_3(ex.request, MeasureTiming.NO,
                                                    OptionalTimePoint(time.monotonic_ns() + 200_000_000),
                                                    OptionalTimeoutDuration())
    elapsed = time.monotonic() - t0
    assert status in MISSED
    assert elapsed < 1.5  # the 200 ms deadline, not the 2 s loop timeout, stopped the loop


@pytest.mark.parametrize("bad", [-1, 2**64, 1.5, "soon"])
def test_a_malformed_deadline_is_invalid(prepared, case, bad):
    ex = build_request(case)
    status, _, _ = prepared.executeSynchronously_1_3(ex.request, MeasureTiming.NO, OptionalTimePoint(bad),
                                                    OptionalTimeoutDuration())
    assert status == ErrorStatus.INVALID_ARGUMENT
    launch, status, _ = _prepare(Device("numpy"), build_model(case), OptionalTimePoint(bad))
    assert launch == status == ErrorStatus.INVALID_ARGUMENT
