"""VTS-style request validation: every mutation of a valid request gets INVALID_ARGUMENT, empty
outputShapes and UINT64_MAX timing, on the sync path (executeSynchronously) and the async path
(execute_1_2's return value and its notify_1_2 callback)."""
from __future__ import annotations

import copy
from typing import Callable, Iterator

import pytest

from nngpu.json_models import build_request
from nngpu.driver.callbacks import ExecutionCallback, PreparedModelCallback
from nngpu.driver.device import Device
from nngpu.hal.types import (
    UINT64_MAX,
    DataLocation,
    ErrorStatus,
    ExecutionPreference,
    MeasureTiming,
    Request,
    RequestArgument,
)

from .vts_mutations import sample_cases, sample_model

SAMPLE = [
    ("V1_0", "add"),
    ("V1_0", "conv_quant8"),
    ("V1_0", "fully_connected_float_all_inputs_as_internal"),
    ("V1_1", "mean_quant8_1"),
    ("V1_2", "conv2d_per_channel"),
    ("V1_2", "equal_simple_float16"),
]


def clone(r: Request) -> Request:
    """A copy to mutate, of the request's own type (the AIDL mutations use these too)."""
    return type(r)(copy.deepcopy(r.inputs), copy.deepcopy(r.outputs), list(r.pools))


def variant(r: Request, edit: Callable[[Request], None]) -> Request:
    out = clone(r)
    edit(out)
    return out


def _args(r: Request) -> Iterator[tuple[str, int]]:
    for kind in ("inputs", "outputs"):
        for k in range(len(getattr(r, kind))):
            yield kind, k


def remove_argument(r: Request, model) -> Iterator[tuple[str, Request]]:
    for kind, k in _args(r):
        yield f"{kind}[{k}] removed", variant(r, lambda x: getattr(x, kind).pop(k))


def add_argument(r: Request, model) -> Iterator[tuple[str, Request]]:
    for kind in ("inputs", "outputs"):
        yield f"extra {kind[:-1]}", variant(r, lambda x: getattr(x, kind).append(copy.deepcopy(getattr(x, kind)[0])))


def bad_pool_index(r: Request, model) -> Iterator[tuple[str, Request]]:
    for kind, k in _args(r):
        yield f"{kind}[{k}] pool index {len(r.pools)}", \
            variant(r, lambda x: setattr(getattr(x, kind)[k].location, "poolIndex", len(x.pools)))


def location_out_of_range(r: Request, model) -> Iterator[tuple[str, Request]]:
    for kind, k in _args(r):
        loc = getattr(r, kind)[k].location
        size = r.pools[loc.poolIndex].size
        yield f"{kind}[{k}] offset at the pool end", \
            variant(r, lambda x: setattr(getattr(x, kind)[k].location, "offset", size - loc.length + 1))
        yield f"{kind}[{k}] length past the pool end", \
            variant(r, lambda x: setattr(getattr(x, kind)[k].location, "length", size + 1))


def wrong_dims(r: Request, model) -> Iterator[tuple[str, Request]]:
    for kind, k in _args(r):
        idx = (model.inputIndexes if kind == "inputs" else model.outputIndexes)[k]
        dims = model.operands[idx].dimensions
        if not dims:
            continue
        yield f"{kind}[{k}] rank {len(dims) + 1}", \
            variant(r, lambda x: setattr(getattr(x, kind)[k], "dimensions", list(dims) + [1]))
        if dims[0]:
            yield f"{kind}[{k}] dimension 0 changed", \
                variant(r, lambda x: setattr(getattr(x, kind)[k], "dimensions", [dims[0] + 1, *dims[1:]]))
        if kind == "inputs":
            yield f"{kind}[{k}] dimension 0 unspecified", \
                variant(r, lambda x: setattr(getattr(x, kind)[k], "dimensions", [0, *dims[1:]]))


def no_value_with_location(r: Request, model) -> Iterator[tuple[str, Request]]:
    for kind, k in _args(r):
        yield f"{kind}[{k}] hasNoValue with a location", \
            variant(r, lambda x: setattr(getattr(x, kind)[k], "hasNoValue", True))
        dims = model.operands[(model.inputIndexes if kind == "inputs" else model.outputIndexes)[k]].dimensions
        no_value = RequestArgument(True, DataLocation(), list(dims) or [1])
        yield f"{kind}[{k}] hasNoValue with dimensions", \
            variant(r, lambda x: getattr(x, kind).__setitem__(k, no_value))


def bad_pool(r: Request, model) -> Iterator[tuple[str, Request]]:
    for p in range(len(r.pools)):
        for junk in (None, b"\0" * 64, object()):
            yield f"pool {p} is {type(junk).__name__}", variant(r, lambda x: x.pools.__setitem__(p, junk))


def malformed(r: Request, model) -> Iterator[tuple[str, Request]]:
    yield "inputs is None", variant(r, lambda x: setattr(x, "inputs", None))
    yield "an argument is an int", variant(r, lambda x: x.outputs.__setitem__(0, 7))
    yield "negative offset", variant(r, lambda x: setattr(x.inputs[0].location, "offset", -1))
    yield "dimensions hold a string", variant(r, lambda x: setattr(x.inputs[0], "dimensions", ["2"]))


MUTATIONS = {
    "remove_argument": remove_argument,
    "add_argument": add_argument,
    "bad_pool_index": bad_pool_index,
    "location_out_of_range": location_out_of_range,
    "wrong_dims": wrong_dims,
    "no_value_with_location": no_value_with_location,
    "bad_pool": bad_pool,
    "malformed": malformed,
}


@pytest.fixture(scope="module")
def prepared():
    """(model, prepared model, valid request) per sample case."""
    dev = Device("numpy")
    cases = {(c.version, c.name): c for c in sample_cases()}
    out = []
    for key in SAMPLE:
        model = sample_model(*key)
        cb = PreparedModelCallback()
        status = dev.prepareModel_1_2(model, ExecutionPreference.FAST_SINGLE_ANSWER, [], [], bytes(32), cb)
        assert status == ErrorStatus.NONE and cb.wait(60) and cb.status == ErrorStatus.NONE, key
        out.append((key, model, cb.prepared_model, build_request(cases[key])))
    return out


def _is_rejection(status, shapes, timing) -> bool:
    return (status == ErrorStatus.INVALID_ARGUMENT and list(shapes) == []
            and timing.timeOnDevice == UINT64_MAX and timing.timeInDriver == UINT64_MAX)


def rejection_problems(pm, request: Request) -> list[str]:
    problems = []
    result = pm.executeSynchronously(request, MeasureTiming.YES)
    if not _is_rejection(*result):
        problems.append(f"executeSynchronously -> {result}")
    cb = ExecutionCallback()
    status = pm.execute_1_2(request, MeasureTiming.YES, cb)
    if status != ErrorStatus.INVALID_ARGUMENT:
        problems.append(f"execute_1_2 returned {ErrorStatus(status).name}")
    if not cb.wait(30):
        problems.append("execution callback never notified")
    elif not _is_rejection(*cb.get()):
        problems.append(f"notify_1_2 -> {cb.get()}")
    return problems


def test_sample_requests_execute(prepared):
    for key, _, pm, ex in prepared:
        status, shapes, _ = pm.executeSynchronously(ex.request, MeasureTiming.NO)
        assert status == ErrorStatus.NONE, key


@pytest.mark.parametrize("kind", list(MUTATIONS))
def test_request_mutation_is_rejected(prepared, kind):
    applied, failures = 0, []
    for key, model, pm, ex in prepared:
        for label, request in MUTATIONS[kind](ex.request, model):
            applied += 1
            problems = rejection_problems(pm, request)
            if problems:
                failures.append(f"{key[0]}/{key[1]}: {label}: {'; '.join(problems)}")
    assert applied > 0
    assert not failures, f"{len(failures)} of {applied} not rejected:\n" + "\n".join(failures[:40])
