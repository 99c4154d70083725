"""How the conformance runner reaches a device through the AIDL HAL: the case's model and
requests converted to AIDL (nngpu.aidl.from_core), and these paths:
  sync      IPreparedModel::executeSynchronously
  config    executeSynchronouslyWithConfig
  reusable  createReusableExecution, then executeSynchronously twice on it (the second judged)
  burst     configureExecutionBurst, the request twice with memory identifier tokens, released
  fenced    executeFenced, waited on through its sync fence"""
from __future__ import annotations

import os

from ..aidl import PreparedModelCallback, from_core
from ..hal.aidl import types as A
from ..hal.types import (UINT64_MAX, ErrorStatus, ExecutionPreference, MeasureTiming, NativeHandle, OutputShape,
                         Priority, Timing)
from ..json_models import Execution, TestCase, build_model
from .runner import TIMEOUT_S, _wait_fence

PATHS = ("sync", "config", "reusable", "burst", "fenced")


def _core_timing(t: A.Timing) -> Timing:
    """For the judge, which compares the two times: -1 is 'not measured' (UINT64_MAX)."""
    def value(ns: int) -> int:
        return UINT64_MAX if ns == A.NO_TIME else ns
    return Timing(value(t.timeOnDeviceNs), value(t.timeInDriverNs))


def _outcome(result: A.ExecutionResult):
    shapes = [OutputShape(list(s.dimensions), s.isSufficient) for s in result.outputShapes]
    if not result.outputSufficientSize:
        return ErrorStatus.OUTPUT_INSUFFICIENT_SIZE, shapes, None
    return ErrorStatus.NONE, shapes, _core_timing(result.timing)


class AidlFace:
    paths = PATHS

    @staticmethod
    def build(case: TestCase):
        return from_core.model(build_model(case, False)), False

    @staticmethod
    def supported(device, model, flat: bool) -> tuple[ErrorStatus, list[bool]]:
        try:
            return ErrorStatus.NONE, device.getSupportedOperations(model)
        except A.ServiceSpecificError as e:
            return e.status, []

    @staticmethod
    def prepare(device, model, flat: bool):
        cb = PreparedModelCallback()
        try:
            device.prepareModel(model, ExecutionPreference.FAST_SINGLE_ANSWER, Priority.MEDIUM, A.NO_TIME, [], [],
                                bytes(A.BYTE_SIZE_OF_CACHE_TOKEN), cb)
        except A.ServiceSpecificError as e:
            return e.status, None
        cb.get(TIMEOUT_S)
        return cb.status, cb.prepared_model

    @staticmethod
    def execute(prepared, path: str, ex: Execution, flat: bool, measure: MeasureTiming):
        request = from_core.request(ex.request)
        timed = measure == MeasureTiming.YES
        config = A.ExecutionConfig(measureTiming=timed)
        try:
            if path == "sync":
                return _outcome(prepared.executeSynchronously(request, timed, A.NO_TIME, A.NO_TIME))
            if path == "config":
                return _outcome(prepared.executeSynchronouslyWithConfig(request, config, A.NO_TIME))
            if path == "reusable":
                execution = prepared.createReusableExecution(request, config)
                execution.executeSynchronously(A.NO_TIME)
                return _outcome(execution.executeSynchronously(A.NO_TIME))
            if path == "burst":
                burst = prepared.configureExecutionBurst()
                tokens = list(range(len(request.pools)))
                burst.executeSynchronously(request, tokens, timed, A.NO_TIME, A.NO_TIME)
                try:
                    return _outcome(burst.executeSynchronously(request, tokens, timed, A.NO_TIME, A.NO_TIME))
                finally:
                    for token in tokens:
                        burst.releaseMemoryResource(token)
            if path == "fenced":
                return _fenced(prepared, request, ex, timed)
        except A.ServiceSpecificError as e:
            return e.status, [], None
        raise ValueError(f"unknown path {path}")


def _fenced(prepared, request: A.Request, ex: Execution, timed: bool):
    """executeFenced reports no output shapes: the judge takes the model's, fully specified."""
    result = prepared.executeFenced(request, [], timed, A.NO_TIME, A.NO_TIME, A.NO_TIME)
    try:
        if result.syncFence is not None and not _wait_fence(NativeHandle([result.syncFence])):
            return ErrorStatus.GENERAL_FAILURE, [], None
    finally:
        if result.syncFence is not None:
            os.close(result.syncFence)
    status, _launched, fenced = result.callback.getExecutionInfo()
    if status != ErrorStatus.NONE:
        return status, [], None
    return status, [OutputShape(list(operand["dimensions"])) for operand, _ in ex.outputs], _core_timing(fenced)
