"""The conformance runner's fenced path: a chain of two fenced executions per case, judged on the
second; a case whose outputs are not fully specified is recorded as the INVALID_ARGUMENT that
executeFenced owes it (VTS FencedComputeTest skips it), never as a pass."""
from __future__ import annotations

from pathlib import Path

import pytest

from nngpu.cts import runner
from nngpu.driver.device import Device
from nngpu.driver.prepared_model import PreparedModel
from nngpu.hal import MeasureTiming
from nngpu.json_models import load_file

CORPUS = Path(__file__).resolve().parents[1] / "data" / "nnapi-cts"


@pytest.fixture(scope="module")
def device():
    return Device("numpy")


def _case(name: str):
    return next(c for c in load_file(CORPUS / "V1_2" / "add_v1_2.json.gz") if c.name == name)


def test_fenced_is_one_of_all_paths():
    assert "fenced" in runner.PATHS


@pytest.mark.parametrize("measure", [MeasureTiming.NO, MeasureTiming.YES])
def test_the_second_execution_waits_on_the_first(device, monkeypatch, measure):
    calls = []
    real = PreparedModel.executeFenced

    def spy(self, request, waitFor, *args):
        calls.append(list(waitFor))
        return real(self, request, waitFor, *args)

    monkeypatch.setattr(PreparedModel, "executeFenced", spy)
    [record] = runner.run_case(device, "numpy", _case("add_v1_2"), ["fenced"], measure)
    assert record.result == "passed", record.detail
    assert len(calls) == 2 and calls[0] == [] and len(calls[1]) == 1


def test_outputs_not_fully_specified_are_reported_not_passed(device):
    [record] = runner.run_case(device, "numpy", _case("add_v1_2_zero_sized"), ["fenced"])
    assert record.result == "skipped" and "INVALID_ARGUMENT" in record.detail and "[0]" in record.detail


def test_a_driver_that_accepts_unspecified_outputs_fails_the_case(device, monkeypatch):
    monkeypatch.setattr(runner, "_execute_fenced_chain", lambda *a: (0, [], None))
    [record] = runner.run_case(device, "numpy", _case("add_v1_2_zero_sized"), ["fenced"])
    assert record.result == "failed" and "NONE" in record.detail
