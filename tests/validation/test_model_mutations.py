"""VTS-style model validation: every mutation of a valid corpus model gets INVALID_ARGUMENT from
getSupportedOperations_1_2, from prepareModel_1_2's return value and from its callback, which
carries no prepared model."""
from __future__ import annotations

import pytest

from nngpu.driver.callbacks import PreparedModelCallback
from nngpu.driver.device import Device
from nngpu.hal.types import ErrorStatus, ExecutionPreference, Model

from .vts_mutations import MUTATIONS, SAMPLE, sample_model

VALID_PREFERENCES = {int(p) for p in ExecutionPreference}


@pytest.fixture(scope="module")
def dev() -> Device:
    return Device("numpy")


def rejection_problems(dev: Device, model: Model, preference: int) -> list[str]:
    """What the device got wrong for an invalid model (empty when it answered correctly)."""
    problems = []
    if preference in VALID_PREFERENCES:
        status, supported = dev.getSupportedOperations_1_2(model)
        if status != ErrorStatus.INVALID_ARGUMENT:
            problems.append(f"getSupportedOperations_1_2 -> {ErrorStatus(status).name} {supported}")
    cb = PreparedModelCallback()
    status = dev.prepareModel_1_2(model, preference, [], [], bytes(32), cb)
    if status != ErrorStatus.INVALID_ARGUMENT:
        problems.append(f"prepareModel_1_2 returned {ErrorStatus(status).name}")
    if not cb.wait(30):
        problems.append("prepare callback never notified")
    elif cb.status != ErrorStatus.INVALID_ARGUMENT or cb.prepared_model is not None:
        problems.append(f"callback notified {cb.status.name} with {cb.prepared_model!r}")
    return problems


@pytest.mark.parametrize("version,name", SAMPLE, ids=[f"{v}/{n}" for v, n in SAMPLE])
def test_sample_model_is_valid(dev, version, name):
    """The yardstick: unmutated, each sample model validates."""
    status, supported = dev.getSupportedOperations_1_2(sample_model(version, name))
    assert status == ErrorStatus.NONE and all(supported)


@pytest.mark.parametrize("kind", list(MUTATIONS))
def test_mutation_is_rejected(dev, kind):
    applied, failures = 0, []
    for version, name in SAMPLE:
        for label, model, preference in MUTATIONS[kind](sample_model(version, name)):
            applied += 1
            problems = rejection_problems(dev, model, preference)
            if problems:
                failures.append(f"{version}/{name}: {label}: {'; '.join(problems)}")
    assert applied > 0, f"mutation {kind} applied to no sample model"
    assert not failures, f"{len(failures)} of {applied} not rejected:\n" + "\n".join(failures[:40])
