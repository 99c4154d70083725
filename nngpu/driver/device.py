"""IDevice: the driver entry point. Validation is synchronous; preparation runs on a worker and
answers through the callback exactly once, with the same status the call returned."""
from __future__ import annotations

import copy
import logging
import os
import time

from .. import __version__, backends, profiling
from ..compiler.plan import Plan
from ..hal.interfaces import IDevice, IPreparedModelCallback
from ..hal.types import (
    DeviceStatus,
    DeviceType,
    ErrorStatus,
    ExecutionPreference,
    Model,
    Model_1_3,
    OperandLifeTime,
    OptionalTimePoint,
    PerformanceInfo,
    Subgraph,
    Priority,
)
from ..modelutil import as_model_1_3
from ..ops import load_all
from ..ops.registry import HalVersion, lookup
from ..validation import ValidationError, validate_execution_preference, validate_model, validate_priority
from .allocate import AllocateError, plan_buffer
from .buffer import BufferTable, DeviceBuffer
from .capabilities import capabilities
from .deadline import deadline_ns, passed
from ..compiler.interpreter import GraphRunner
from .prepared_model import PreparedModel
from .work_queue import PriorityPool

log = logging.getLogger("nngpu.device")

_PREPARE_POOL = PriorityPool(4, "nngpu-prepare")

_NOTIFY = {10: "notify", 11: "notify", 12: "notify_1_2", 13: "notify_1_3"}


def _notify(callback, version: int, status: ErrorStatus, prepared) -> None:
    try:
        getattr(callback, _NOTIFY[version])(status, prepared)
    except Exception:
        log.exception("prepare callback raised")


class Device(IDevice):
    """An nngpu device on one backend ("numpy" is the reference; "auto" picks the best)."""

    def __init__(self, backend: str = "numpy", name: str | None = None, fusion: bool | None = None,
                 specialise: bool | None = None):
        load_all()
        # Fusion of elementwise chains and epilogues; NNGPU_FUSION=0 turns it off (for comparison).
        self.fusion = fusion if fusion is not None else os.environ.get("NNGPU_FUSION", "1") != "0"
        # Device plans specialised on the values shapes depend on; NNGPU_SPECIALISE=0 runs what
        # follows such a value on the host instead.
        self.specialise = specialise if specialise is not None else os.environ.get("NNGPU_SPECIALISE", "1") != "0"
        self.backend_name = backends.resolve(backend)
        self.backend = backends.create(self.backend_name)
        self.name = name or f"nngpu-{backend}"
        self._perf = _performance(self.backend)
        self._buffers = BufferTable()

    # ---- capabilities and queries ---------------------------------------------------------
    def getCapabilities(self):
        return ErrorStatus.NONE, capabilities(self._perf, 10)

    def getCapabilities_1_1(self):
        return ErrorStatus.NONE, capabilities(self._perf, 11)

    def getCapabilities_1_2(self):
        return ErrorStatus.NONE, capabilities(self._perf, 12)

    def getCapabilities_1_3(self):
        return ErrorStatus.NONE, capabilities(self._perf, 13)

    def getStatus(self) -> DeviceStatus:
        return DeviceStatus.AVAILABLE

    def getVersionString(self):
        return ErrorStatus.NONE, f"nngpu {__version__} ({self.backend_name}: {self.backend.description})"

    def getType(self):
        return ErrorStatus.NONE, self.backend.device_type

    def getSupportedExtensions(self):
        return ErrorStatus.NONE, []

    def getNumberOfCacheFilesNeeded(self):
        return ErrorStatus.NONE, 0, 0

    def _supported(self, model, version: HalVersion) -> tuple[ErrorStatus, list[bool]]:
        try:
            m = self._validated(model, version)
        except ValidationError as e:
            log.info("getSupportedOperations: invalid model: %s", e)
            return ErrorStatus.INVALID_ARGUMENT, []
        return ErrorStatus.NONE, [self.supports(m, op) for op in m.main.operations]

    def supports(self, model: Model_1_3, op, graph: Subgraph | None = None, seen: frozenset = frozenset()) -> bool:
        """True exactly when this device executes `op` with its operand types, and, for IF /
        WHILE, every operation of the subgraphs it references."""
        graph = graph or model.main
        spec = lookup(op.type)
        if spec is None:
            return False
        operands = graph.operands
        if spec.match([operands[i].type for i in op.inputs], [operands[i].type for i in op.outputs]) is None:
            return False
        for i in op.inputs:
            if operands[i].lifetime == OperandLifeTime.SUBGRAPH:
                ref = operands[i].location.offset
                if ref in seen or not 0 <= ref < len(model.referenced):
                    return False
                sub = model.referenced[ref]
                if not all(self.supports(model, o, sub, seen | {ref}) for o in sub.operations):
                    return False
        return True

    def getSupportedOperations(self, model):
        return self._supported(model, HalVersion.V1_0)

    def getSupportedOperations_1_1(self, model):
        return self._supported(model, HalVersion.V1_1)

    def getSupportedOperations_1_2(self, model):
        return self._supported(model, HalVersion.V1_2)

    def getSupportedOperations_1_3(self, model):
        return self._supported(model, HalVersion.V1_3)

    # ---- preparation ----------------------------------------------------------------------
    @staticmethod
    def _validated(model, version: HalVersion) -> Model_1_3:
        if version < HalVersion.V1_3 and not isinstance(model, Model):
            raise ValidationError("a 1.0-1.2 entry point needs a flat Model")
        if version == HalVersion.V1_3 and not isinstance(model, Model_1_3):
            raise ValidationError("prepareModel_1_3 needs a 1.3 Model")
        try:
            needed = validate_model(model)
        except ValidationError:
            raise
        except Exception as e:  # malformed structures are invalid arguments, not crashes
            raise ValidationError(f"malformed model: {type(e).__name__}: {e}") from e
        if needed > version:
            raise ValidationError(f"model needs HAL {needed.name}, called through {version.name}")
        return as_model_1_3(model)

    def _prepare(self, model, version: HalVersion, callback, preference=ExecutionPreference.FAST_SINGLE_ANSWER,
                 priority=Priority.MEDIUM, deadline: OptionalTimePoint | None = None) -> ErrorStatus:
        v = int(version)
        if callback is None or not isinstance(callback, IPreparedModelCallback) and not hasattr(callback, "notify"):
            return ErrorStatus.INVALID_ARGUMENT
        try:
            with profiling.span("prepare", "validate"):
                validate_execution_preference(preference)
                validate_priority(priority)
                limit = deadline_ns(deadline)
                m = self._validated(model, version)
            m = copy.deepcopy(m) if not m.pools else _copy_graphs(m)
        except ValidationError as e:
            log.info("prepareModel: invalid: %s", e)
            _notify(callback, v, ErrorStatus.INVALID_ARGUMENT, None)
            return ErrorStatus.INVALID_ARGUMENT
        unsupported = [k for k, op in enumerate(m.main.operations) if not self.supports(m, op)]

        def work() -> None:
            if passed(limit):  # queued past its deadline (or given one already passed)
                _notify(callback, v, ErrorStatus.MISSED_DEADLINE_PERSISTENT, None)
                return
            if unsupported:
                log.info("prepareModel: operations %s are not supported", unsupported)
                _notify(callback, v, ErrorStatus.GENERAL_FAILURE, None)
                return
            try:
                t0 = time.perf_counter()
                with profiling.span("prepare", "build executor", backend=self.backend_name):
                    prepared = PreparedModel(self._compile(GraphRunner(m, version)), self._resolve_token, priority)
                log.info("prepared %d operations on %s in %.1f ms", len(m.main.operations), self.backend_name,
                         (time.perf_counter() - t0) * 1e3)
                if passed(limit):  # compiled too late to be of use
                    _notify(callback, v, ErrorStatus.MISSED_DEADLINE_TRANSIENT, None)
                    return
            except Exception:
                log.exception("prepareModel failed")
                _notify(callback, v, ErrorStatus.GENERAL_FAILURE, None)
                return
            _notify(callback, v, ErrorStatus.NONE, prepared)

        _PREPARE_POOL.submit(work, priority)
        return ErrorStatus.NONE

    def _compile(self, runner: GraphRunner):
        """The device plan of a model on a kernel backend, or the reference runner itself."""
        if self.backend.dialect is None:
            return runner
        return Plan(runner, self.backend, self.fusion, self.specialise)

    def prepareModel(self, model, callback):
        return self._prepare(model, HalVersion.V1_0, callback)

    def prepareModel_1_1(self, model, preference, callback):
        return self._prepare(model, HalVersion.V1_1, callback, preference)

    def prepareModel_1_2(self, model, preference, modelCache, dataCache, token, callback):
        return self._prepare(model, HalVersion.V1_2, callback, preference)

    def prepareModel_1_3(self, model, preference, priority, deadline, modelCache, dataCache, token, callback):
        return self._prepare(model, HalVersion.V1_3, callback, preference, priority, deadline)

    def prepareModelFromCache(self, modelCache, dataCache, token, callback):
        _notify(callback, 12, ErrorStatus.GENERAL_FAILURE, None)  # no compilation cache yet
        return ErrorStatus.GENERAL_FAILURE

    def prepareModelFromCache_1_3(self, deadline, modelCache, dataCache, token, callback):
        _notify(callback, 13, ErrorStatus.GENERAL_FAILURE, None)
        return ErrorStatus.GENERAL_FAILURE

    # ---- 1.3 device memory ----------------------------------------------------------------
    def _resolve_token(self, token: int):
        return self._buffers.get(token)

    def allocate(self, desc, preparedModels, inputRoles, outputRoles):
        try:
            plan = plan_buffer(desc, list(preparedModels), list(inputRoles), list(outputRoles),
                               lambda pm: isinstance(pm, PreparedModel) and pm.resolve_token == self._resolve_token)
        except (AllocateError, TypeError, AttributeError) as e:
            log.info("allocate: invalid: %s", e)
            return ErrorStatus.INVALID_ARGUMENT, None, 0
        buffer = self._buffers.add(lambda token: DeviceBuffer(token, plan.operand, plan.dims, plan.roles, self.backend))
        return ErrorStatus.NONE, buffer, buffer.token


def _performance(backend) -> PerformanceInfo:
    """Relative figures (the numpy reference = 1.0, lower is better) the runtime uses to choose
    between devices: a GPU backend runs whole kernels on the device, a CPU OpenCL device
    (PoCL) is about on par with numpy."""
    if backend.dialect is None:
        return PerformanceInfo(1.0, 1.0)
    if backend.device_type == DeviceType.GPU:
        return PerformanceInfo(0.1, 0.5)
    return PerformanceInfo(0.9, 1.0)


def _copy_graphs(m: Model_1_3) -> Model_1_3:
    """Deep-copy the graph structure but share the (immutable or caller-owned) pools."""
    return Model_1_3(copy.deepcopy(m.main), copy.deepcopy(m.referenced), m.operandValues, list(m.pools),
                     m.relaxComputationFloat32toFloat16, copy.deepcopy(m.extensionNameToPrefix))
