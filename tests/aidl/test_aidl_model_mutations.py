"""The VTS model mutations (tests/validation/vts_mutations.py, after AIDL ValidateModel.cpp)
through the AIDL face: each mutated model, converted to the AIDL parcelable, makes
getSupportedOperations and prepareModel raise INVALID_ARGUMENT, and prepareModel's callback
hears INVALID_ARGUMENT with no prepared model. numberOfConsumers is not an AIDL field (the
driver counts the readers), so that kind does not apply."""
from __future__ import annotations

import pytest

from nngpu.aidl import AidlDevice, PreparedModelCallback, from_core
from nngpu.hal.aidl import types as A
from nngpu.hal.types import ErrorStatus, ExecutionPreference, Priority
from nngpu.modelutil import as_model_1_3

from tests.aidl.aidl_util import raised
from tests.validation.vts_mutations import MUTATIONS, SAMPLE, sample_model

KINDS = [k for k in MUTATIONS if k != "number_of_consumers"]
VALID_PREFERENCES = {int(p) for p in ExecutionPreference}


@pytest.fixture(scope="module")
def device() -> AidlDevice:
    return AidlDevice(backend="numpy")



def rejection_problems(device: AidlDevice, model: A.Model, preference: int) -> list[str]:
    problems = []
    if preference in VALID_PREFERENCES:
        status = raised(lambda: device.getSupportedOperations(model))
        if status != ErrorStatus.INVALID_ARGUMENT:
            problems.append(f"getSupportedOperations raised {status}")
    cb = PreparedModelCallback()
    status = raised(lambda: device.prepareModel(model, preference, Priority.MEDIUM, A.NO_TIME, [], [], bytes(32), cb))
    if status != ErrorStatus.INVALID_ARGUMENT:
        problems.append(f"prepareModel raised {status}")
    got = cb.get(30)
    if got != (ErrorStatus.INVALID_ARGUMENT, None) or cb.notify_count != 1:
        problems.append(f"callback notified {got} ({cb.notify_count} times)")
    return problems


def _aidl(model) -> A.Model:
    return from_core.model(as_model_1_3(model))


@pytest.mark.parametrize("version,name", SAMPLE, ids=[f"{v}/{n}" for v, n in SAMPLE])
def test_sample_model_is_valid(device, version, name):
    assert all(device.getSupportedOperations(_aidl(sample_model(version, name))))


@pytest.mark.parametrize("kind", KINDS)
def test_mutation_is_rejected(device, kind):
    applied, failures = 0, []
    for version, name in SAMPLE:
        for label, model, preference in MUTATIONS[kind](sample_model(version, name)):
            applied += 1
            try:
                converted = _aidl(model)
            except Exception as e:      # a mutation the AIDL parcelable cannot express
                failures.append(f"{version}/{name}: {label}: not convertible: {type(e).__name__}: {e}")
                continue
            problems = rejection_problems(device, converted, preference)
            if problems:
                failures.append(f"{version}/{name}: {label}: {'; '.join(problems)}")
    assert applied > 0, f"mutation {kind} applied to no sample model"
    assert not failures, f"{len(failures)} of {applied} not rejected:\n" + "\n".join(failures[:40])
