"""VTS-style request validation through the AIDL face (after AIDL ValidateRequest.cpp and the
burst and reusable-execution checks of ValidateBurst): every mutation of a valid request raises
INVALID_ARGUMENT from executeSynchronously, executeSynchronouslyWithConfig, a burst's
executeSynchronously and createReusableExecution. The mutations are those of HIDL's
(tests/validation/test_request_mutations.py) on the AIDL parcelables, plus the AIDL ones:
padding, the Memory and RequestMemoryPool unions, fds and tokens."""
from __future__ import annotations

from typing import Iterator

import pytest

from nngpu.aidl import AidlDevice, PreparedModelCallback, from_core
from nngpu.hal.aidl import types as A
from nngpu.hal.types import ErrorStatus, ExecutionPreference, Priority
from nngpu.json_models import build_request
from nngpu.modelutil import as_model_1_3

from tests.aidl.aidl_util import raised
from tests.validation.test_request_mutations import (SAMPLE, _args, add_argument, bad_pool_index, remove_argument,
                                                     variant, wrong_dims)
from tests.validation.test_request_mutations import malformed as hidl_malformed
from tests.validation.vts_mutations import sample_cases, sample_model


def _pool_size(r: A.Request, index: int) -> int:
    return r.pools[index].pool.ashmem.size


def structure(r: A.Request, model) -> Iterator[tuple[str, A.Request]]:
    for mutations in (remove_argument, bad_pool_index, add_argument):
        yield from mutations(r, model)


def regions(r: A.Request, model) -> Iterator[tuple[str, A.Request]]:
    for kind, k in _args(r):
        loc = getattr(r, kind)[k].location
        size = _pool_size(r, loc.poolIndex)
        yield f"{kind}[{k}] offset at the pool end", \
            variant(r, lambda x: setattr(getattr(x, kind)[k].location, "offset", size - loc.length + 1))
        yield f"{kind}[{k}] length past the pool end", \
            variant(r, lambda x: setattr(getattr(x, kind)[k].location, "length", size + 1))
        yield f"{kind}[{k}] padding past the pool end", \
            variant(r, lambda x: setattr(getattr(x, kind)[k].location, "padding", size - loc.offset - loc.length + 1))
        yield f"{kind}[{k}] negative padding", variant(r, lambda x: setattr(getattr(x, kind)[k].location, "padding", -1))


def dimensions(r: A.Request, model) -> Iterator[tuple[str, A.Request]]:
    yield from wrong_dims(r, model.main)


def no_value(r: A.Request, model) -> Iterator[tuple[str, A.Request]]:
    for kind, k in _args(r):
        yield f"{kind}[{k}] hasNoValue with a location", \
            variant(r, lambda x: setattr(getattr(x, kind)[k], "hasNoValue", True))
        yield f"{kind}[{k}] hasNoValue with padding", \
            variant(r, lambda x: getattr(x, kind).__setitem__(k, A.RequestArgument(True, A.DataLocation(0, 0, 0, 64), [])))


def pools(r: A.Request, model) -> Iterator[tuple[str, A.Request]]:
    for p in range(len(r.pools)):
        memory = r.pools[p].pool
        for label, junk in [
            ("None", None), ("bytes", b"\0" * 64), ("a bare Memory", memory),
            ("an empty union", A.RequestMemoryPool()),
            ("both members", A.RequestMemoryPool(pool=memory, token=1)),
            ("an unknown token", A.RequestMemoryPool(token=4242)),
            ("a negative token", A.RequestMemoryPool(token=-3)),
            ("a hardware buffer", A.RequestMemoryPool(pool=A.Memory(hardwareBuffer=A.HardwareBuffer()))),
            ("an empty Memory", A.RequestMemoryPool(pool=A.Memory())),
            ("a closed fd", A.RequestMemoryPool(pool=A.Memory(ashmem=A.Ashmem(1 << 30, memory.ashmem.size)))),
            ("a negative size", A.RequestMemoryPool(pool=A.Memory(ashmem=A.Ashmem(memory.ashmem.fd, -1)))),
            ("a write-only file", A.RequestMemoryPool(pool=A.Memory(
                mappableFile=A.MappableFile(memory.ashmem.size, 2, memory.ashmem.fd, 0)))),
        ]:
            yield f"pool {p} is {label}", variant(r, lambda x: x.pools.__setitem__(p, junk))


def malformed(r: A.Request, model) -> Iterator[tuple[str, A.Request]]:
    yield from hidl_malformed(r, model)
    yield "a location is a tuple", variant(r, lambda x: setattr(x.inputs[0], "location", (0, 0, 4, 0)))


MUTATIONS = {f.__name__: f for f in (structure, regions, dimensions, no_value, pools, malformed)}


@pytest.fixture(scope="module")
def prepared():
    """(AIDL model, prepared model, valid AIDL request, its core Execution) per sample case."""
    device = AidlDevice(backend="numpy")
    cases = {(c.version, c.name): c for c in sample_cases()}
    out = []
    for key in SAMPLE:
        model = from_core.model(as_model_1_3(sample_model(*key)))
        cb = PreparedModelCallback()
        device.prepareModel(model, ExecutionPreference.FAST_SINGLE_ANSWER, Priority.MEDIUM, A.NO_TIME, [], [],
                            bytes(32), cb)
        status, pm = cb.get(60)
        assert status == ErrorStatus.NONE, key
        ex = build_request(cases[key])
        out.append((key, model, pm, from_core.request(ex.request), ex))
    return out



def rejection_problems(pm, request: A.Request) -> list[str]:
    calls = {
        "executeSynchronously": lambda: pm.executeSynchronously(request, True, A.NO_TIME, A.NO_TIME),
        "executeSynchronouslyWithConfig": lambda: pm.executeSynchronouslyWithConfig(
            request, A.ExecutionConfig(True), A.NO_TIME),
        "createReusableExecution": lambda: pm.createReusableExecution(request, A.ExecutionConfig()),
        "burst": lambda: pm.configureExecutionBurst().executeSynchronously(
            request, [-1] * len(request.pools if isinstance(request.pools, list) else []), True, A.NO_TIME, A.NO_TIME),
    }
    return [f"{name} raised {status}" for name, call in calls.items()
            if (status := raised(call)) != ErrorStatus.INVALID_ARGUMENT]


def test_sample_requests_execute(prepared):
    for key, _, pm, request, _ in prepared:
        assert pm.executeSynchronously(request, False, A.NO_TIME, A.NO_TIME).outputSufficientSize, key


@pytest.mark.parametrize("kind", list(MUTATIONS))
def test_request_mutation_is_rejected(prepared, kind):
    applied, failures = 0, []
    for key, model, pm, request, _ in prepared:
        for label, mutated in MUTATIONS[kind](request, model):
            applied += 1
            problems = rejection_problems(pm, mutated)
            if problems:
                failures.append(f"{key[0]}/{key[1]}: {label}: {'; '.join(problems)}")
    assert applied > 0
    assert not failures, f"{len(failures)} of {applied} not rejected:\n" + "\n".join(failures[:40])
