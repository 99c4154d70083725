"""The driver core's device, the entry point: the HIDL IDevice methods (nngpu.hidl.device) and
the AIDL face (nngpu.aidl) are its calls. Validation is synchronous; preparation runs on a
worker and answers through the callback exactly once, with the same status the call returned."""
from __future__ import annotations

import copy
import logging
import os
import time

from .. import __version__, backends, profiling
from ..compiler.lower import device_plan
from ..compiler.pad_fold import fold_pads
from ..hal.interfaces import IPreparedModelCallback
from ..hidl.device import NOTIFY, HidlDevice
from ..hal.types import (
    DeviceStatus,
    DeviceType,
    ErrorStatus,
    ExecutionPreference,
    Model,
    Model_1_3,
    OperationType,
    OptionalTimePoint,
    PerformanceInfo,
    Priority,
)
from ..modelutil import as_model_1_3
from ..ops import load_all
from ..ops.registry import HalVersion
from ..validation import ValidationError, validate_execution_preference, validate_model, validate_priority
from ..backends.base import ProgramSet
from .allocate import AllocateError, plan_buffer
from .cache_files import FORMAT as CACHE_FORMAT, CacheFileError, identity_digest
from .compilation_cache import NUM_DATA_CACHE, NUM_MODEL_CACHE, CacheArgumentError, load as load_cache, save_target
from .buffer import BufferTable, DeviceBuffer
from .callbacks import PreparedModelCallback
from .capabilities import capabilities
from .deadline import deadline_ns, passed
from ..runtime.interpreter import GraphRunner
from ..compiler.numpy_bind import numpy_plan
from .pool_registry import PoolRegistry
from .prepared_model import PreparedModel
from .support import unsupported_reason
from .work_queue import PriorityPool

log = logging.getLogger("nngpu.device")

_PREPARE_POOL = PriorityPool(4, "nngpu-prepare")

def _notify(callback, version: int, status: ErrorStatus, prepared, reason: str = "") -> None:
    if isinstance(callback, PreparedModelCallback):  # in process, the reason goes with the status
        callback.reason = reason
    try:
        getattr(callback, NOTIFY[version])(status, prepared)
    except Exception:
        log.exception("prepare callback raised")


class Device(HidlDevice):
    """An nngpu device on one backend ("numpy" is the reference; "auto" picks the best): the
    driver core's device calls, with the HIDL IDevice methods over them (nngpu.hidl)."""

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
        # a device plan's request memories, registered with the backend once each
        self._pools = PoolRegistry(self.backend) if self.backend.target is not None else None
        # What a compilation cache saved here must match to be restored here.
        self._identity = identity_digest(
            f"nngpu {__version__}; cache format {CACHE_FORMAT}; backend {self.backend_name}: {self.backend.description};"
            f" {self.backend.cache_identity()}; fusion {self.fusion}; specialise {self.specialise}")

    # ---- capabilities and queries ---------------------------------------------------------
    def capabilities_of(self, version: int):
        return ErrorStatus.NONE, capabilities(self._perf, version)

    def getStatus(self) -> DeviceStatus:
        return DeviceStatus.OFFLINE if self.backend.health.lost is not None else DeviceStatus.AVAILABLE

    def getVersionString(self):
        return ErrorStatus.NONE, f"nngpu {__version__} ({self.backend_name}: {self.backend.description})"

    def getType(self):
        return ErrorStatus.NONE, self.backend.device_type

    def getSupportedExtensions(self):
        return ErrorStatus.NONE, []

    def getNumberOfCacheFilesNeeded(self):
        return ErrorStatus.NONE, NUM_MODEL_CACHE, NUM_DATA_CACHE

    def supported_operations(self, model, version: int) -> tuple[ErrorStatus, list[bool]]:
        try:
            m = self._validated(model, HalVersion(version))
        except ValidationError as e:
            log.info("getSupportedOperations: invalid model: %s", e)
            return ErrorStatus.INVALID_ARGUMENT, []
        return ErrorStatus.NONE, [self.supports(m, op) for op in m.main.operations]

    def supports(self, model: Model_1_3, op) -> bool:
        """True exactly when this device executes `op` of the main graph (support.py)."""
        return unsupported_reason(model, op) is None

    # ---- preparation ----------------------------------------------------------------------
    @staticmethod
    def _validated(model, version: HalVersion) -> Model_1_3:
        """The model, validated for an entry point of HAL `version`; this decides which versions
        an entry point takes. A 1.0-1.2 entry point takes a model only when its version's rules
        allow the model. The 1.3 entry points also take models that need the AIDL HAL versions 2
        and 3 (NNAPI feature levels 6 and 7: BATCH_MATMUL, PACK, MIRROR_PAD, REVERSE, RESHAPE
        of TENSOR_INT32, RSQRT of quantized tensors), which no HIDL version can name: an nngpu
        extension, so that every HIDL-shaped path (getSupportedOperations_1_3, prepareModel_1_3,
        its executions, bursts, the compilation cache, the service) runs them."""
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
        if needed > (max(HalVersion) if version == HalVersion.V1_3 else version):
            raise ValidationError(f"model needs HAL {needed.name}, called through {version.name}")
        return as_model_1_3(model)

    def prepare(self, version: int, model, callback, preference=ExecutionPreference.FAST_SINGLE_ANSWER,
                priority=Priority.MEDIUM, deadline: OptionalTimePoint | None = None, model_cache=(), data_cache=(),
                token=b"") -> ErrorStatus:
        v, version = int(version), HalVersion(version)
        if not _is_callback(callback):
            return ErrorStatus.INVALID_ARGUMENT
        if self.backend.health.lost is not None:
            _notify(callback, v, ErrorStatus.DEVICE_UNAVAILABLE, None,
                    f"the device is lost ({self.backend.health.lost})")
            return ErrorStatus.DEVICE_UNAVAILABLE
        try:
            with profiling.span("prepare", "validate"):
                validate_execution_preference(preference)
                validate_priority(priority)
                limit = deadline_ns(deadline)
                m = self._validated(model, version)
            m = copy.deepcopy(m) if not m.pools else _copy_graphs(m)
        except ValidationError as e:
            log.info("prepareModel: invalid: %s", e)
            _notify(callback, v, ErrorStatus.INVALID_ARGUMENT, None, f"invalid model: {e}")
            return ErrorStatus.INVALID_ARGUMENT
        unsupported = _unsupported(m)
        if unsupported:
            log.info("prepareModel: %s", unsupported)
        try:  # caching is optional: a bad cache argument never fails the prepare
            target = save_target(model_cache, data_cache, token)
        except CacheFileError as e:
            log.info("prepareModel: not saving to the compilation cache: %s", e)
            target = None

        def build() -> PreparedModel:
            if unsupported:
                raise _Unsupported(unsupported)
            prepared = self._build(m, version, priority, ProgramSet())
            if target is not None:
                try:
                    target.save(self._identity, m, v, _binaries(prepared))
                except (CacheFileError, OSError) as e:
                    log.warning("prepareModel: the compilation cache was not saved: %s", e)
            return prepared

        return self._start(v, callback, limit, priority, build, target.close if target else None)

    def _start(self, v: int, callback, limit: int | None, priority, build, cleanup=None) -> ErrorStatus:
        """Run `build` on the prepare pool, within the deadline, and notify the callback once."""
        def work() -> None:
            try:
                if passed(limit):  # queued past its deadline (or given one already passed)
                    _notify(callback, v, ErrorStatus.MISSED_DEADLINE_PERSISTENT, None,
                            "the deadline passed before preparation began")
                    return
                prepared = build()
                if passed(limit):  # prepared too late to be of use
                    _notify(callback, v, ErrorStatus.MISSED_DEADLINE_TRANSIENT, None,
                            "preparation finished after its deadline")
                    return
            except _Unsupported as e:
                _notify(callback, v, ErrorStatus.GENERAL_FAILURE, None, str(e))
                return
            except Exception as e:
                log.exception("prepareModel failed")
                _notify(callback, v, ErrorStatus.GENERAL_FAILURE, None, f"{type(e).__name__}: {e}")
                return
            finally:
                if cleanup is not None:
                    cleanup()
            _notify(callback, v, ErrorStatus.NONE, prepared)

        _PREPARE_POOL.submit(work, priority)
        return ErrorStatus.NONE

    def _build(self, m: Model_1_3, version: HalVersion, priority, programs: ProgramSet) -> PreparedModel:
        t0 = time.perf_counter()
        with profiling.span("prepare", "build executor", backend=self.backend_name):
            runner = GraphRunner(fold_pads(m), version)
            prepared = PreparedModel(self._compile(runner, programs), self._resolve_token, priority, self._pools)
        log.info("prepared %d operations on %s in %.1f ms", len(m.main.operations), self.backend_name,
                 (time.perf_counter() - t0) * 1e3)
        if m.relaxComputationFloat32toFloat16:
            log.info("relaxComputationFloat32toFloat16 on %s: %s", self.backend_name, self.backend.relaxed_precision())
        return prepared

    def _compile(self, runner: GraphRunner, programs: ProgramSet):
        """The device plan of a model on a kernel backend, or the reference's numpy plan."""
        if self.backend.target is None:
            return numpy_plan(runner)
        return device_plan(runner, self.backend, self.fusion, self.specialise, programs)

    def prepare_from_cache(self, version: int, deadline, model_cache, data_cache, token, callback) -> ErrorStatus:
        """Check the files now (a modified security-sensitive cache fails the call itself), then
        rebuild the plan on the prepare pool from the saved kernel binaries."""
        v = int(version)
        if not _is_callback(callback):
            return ErrorStatus.INVALID_ARGUMENT

        def refuse(status: ErrorStatus, why: Exception | str) -> ErrorStatus:
            log.info("prepareModelFromCache: %s: %s", status.name, why)
            _notify(callback, v, status, None, str(why))
            return status

        try:
            limit = deadline_ns(deadline)
            saved, version, binaries = load_cache(model_cache, data_cache, token, self._identity)
        except (ValidationError, CacheArgumentError) as e:
            return refuse(ErrorStatus.INVALID_ARGUMENT, e)
        except CacheFileError as e:
            return refuse(ErrorStatus.GENERAL_FAILURE, e)
        try:  # saved by this driver, so valid unless its rules changed since
            m = self._validated(saved, HalVersion.V1_3)
            version = HalVersion(version)
        except (ValidationError, ValueError) as e:
            return refuse(ErrorStatus.GENERAL_FAILURE, e)
        unsupported = _unsupported(m)
        if unsupported:
            return refuse(ErrorStatus.GENERAL_FAILURE, f"the cached model: {unsupported}")

        def build() -> PreparedModel:
            programs = ProgramSet(given=binaries)
            prepared = self._build(m, version, Priority.MEDIUM, programs)
            if programs.built:
                log.warning("prepareModelFromCache: %d programs were not in the cache and were compiled", programs.built)
            return prepared

        return self._start(v, callback, limit, Priority.MEDIUM, build)

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


class _Unsupported(Exception):
    """The model has operations this device does not run (already logged)."""


def _unsupported(m: Model_1_3) -> str:
    """What this device does not run of `m`, operation by operation with the reason ("" for none)."""
    reasons = []
    for k, op in enumerate(m.main.operations):
        why = unsupported_reason(m, op)
        if why is not None:
            reasons.append(f"operation {k} ({OperationType(op.type).name}): {why}")
    if not reasons:
        return ""
    return f"{len(reasons)} operation{'s' if len(reasons) > 1 else ''} not supported: " + "; ".join(reasons[:3]) + (
        f"; and {len(reasons) - 3} more" if len(reasons) > 3 else "")


def _is_callback(callback) -> bool:
    return callback is not None and (isinstance(callback, IPreparedModelCallback) or hasattr(callback, "notify"))


def _binaries(prepared: PreparedModel) -> dict[str, bytes]:
    """The kernel binaries of a prepared model's plan (none on the reference)."""
    programs = getattr(prepared.executor, "programs", None)
    return programs.binaries() if programs is not None else {}


def _performance(backend) -> PerformanceInfo:
    """Relative figures (the numpy reference = 1.0, lower is better) the runtime uses to choose
    between devices: a GPU backend runs whole kernels on the device, a CPU OpenCL device
    (PoCL) is about on par with numpy."""
    if backend.target is None:
        return PerformanceInfo(1.0, 1.0)
    if backend.device_type == DeviceType.GPU:
        return PerformanceInfo(0.1, 0.5)
    return PerformanceInfo(0.9, 1.0)


def _copy_graphs(m: Model_1_3) -> Model_1_3:
    """Deep-copy the graph structure but share the (immutable or caller-owned) pools."""
    return Model_1_3(copy.deepcopy(m.main), copy.deepcopy(m.referenced), m.operandValues, list(m.pools),
                     m.relaxComputationFloat32toFloat16, copy.deepcopy(m.extensionNameToPrefix))
