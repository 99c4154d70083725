"""The AIDL IDevice over the driver core's device (driver/device.py): arguments converted in
(to_core), the core's call, the outcome converted out (from_core). Validation, preparation and
caching are the core's; a refused call raises ServiceSpecificError with the core's status."""
from __future__ import annotations

import logging
from typing import Callable

from ..driver.device import Device
from ..hal.aidl import types as A
from ..hal.aidl.interfaces import IDevice, IPreparedModelCallback
from ..hal.types import DeviceType, ErrorStatus, ExecutionPreference, Priority
from ..hidl.device import HidlDevice
from . import from_core, to_core
from .callbacks import Forward
from .prepared_model import AidlPreparedModel

log = logging.getLogger("nngpu.aidl")


class AidlDevice(IDevice):
    """An nngpu device through the AIDL HAL; `core` is the driver core's device it serves, whose
    core calls (nngpu.hidl.device) it makes: this process's Device (shared with the HIDL face,
    if any: one set of prepared models and buffers), or `nngpu serve`'s through
    `nngpu.connect(path, hal="aidl")`."""

    def __init__(self, core: HidlDevice | None = None, **device_args):
        self.core = core if core is not None else Device(**device_args)

    def close(self) -> None:
        """Closes a connection to a service (nothing for a device in this process)."""
        close = getattr(self.core, "close", None)
        if close is not None and not isinstance(self.core, Device):
            close()

    def __enter__(self) -> "AidlDevice":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def getCapabilities(self) -> A.Capabilities:
        status, caps = self.core.capabilities_of(13)
        from_core.raise_for(status)
        return from_core.capabilities(caps)

    def getNumberOfCacheFilesNeeded(self) -> A.NumberOfCacheFiles:
        status, model_files, data_files = self.core.getNumberOfCacheFilesNeeded()
        from_core.raise_for(status)
        return A.NumberOfCacheFiles(model_files, data_files)

    def getSupportedExtensions(self) -> list[A.Extension]:
        status, extensions = self.core.getSupportedExtensions()
        from_core.raise_for(status)
        return from_core.extensions(extensions)

    def getSupportedOperations(self, model) -> list[bool]:
        status, supported = self.core.supported_operations(to_core.model(model), 13)
        from_core.raise_for(status, "the model is not valid")
        return list(supported)

    def getType(self) -> DeviceType:
        status, kind = self.core.getType()
        from_core.raise_for(status)
        return DeviceType(kind)

    def getVersionString(self) -> str:
        status, version = self.core.getVersionString()
        from_core.raise_for(status)
        return version

    def prepareModel(self, model, preference, priority, deadlineNs, modelCache, dataCache, token, callback) -> None:
        self._prepare(model, preference, priority, deadlineNs, modelCache, dataCache, token, callback)

    def prepareModelWithConfig(self, model, config, callback) -> None:
        _check_callback(callback)
        if not isinstance(config, A.PrepareModelConfig):
            _refuse(callback, to_core.invalid(f"config is not a PrepareModelConfig: {type(config).__name__}"))
        try:
            to_core.hints(config.compilationHints, config.extensionNameToPrefix, "config.compilationHints")
        except A.ServiceSpecificError as e:
            _refuse(callback, e)
        self._prepare(model, config.preference, config.priority, config.deadlineNs, config.modelCache,
                      config.dataCache, config.cacheToken, callback)

    def prepareModelFromCache(self, deadlineNs, modelCache, dataCache, token, callback) -> None:
        _check_callback(callback)
        try:
            args = (to_core.deadline(deadlineNs), to_core.handles(modelCache, "modelCache"),
                    to_core.handles(dataCache, "dataCache"), to_core.token(token))
        except A.ServiceSpecificError as e:
            _refuse(callback, e)
        self._start(lambda forward: self.core.prepare_from_cache(13, *args, forward), callback)

    def allocate(self, desc, preparedModels, inputRoles, outputRoles) -> A.DeviceBuffer:
        args = to_core.allocation(desc, preparedModels, inputRoles, outputRoles,
                                  lambda pm: pm.core if isinstance(pm, AidlPreparedModel) else pm)
        status, buffer, token = self.core.allocate(*args)
        from_core.raise_for(status, "the buffer roles are not valid")
        from .buffer import AidlBuffer
        return A.DeviceBuffer(AidlBuffer(buffer), token)

    # ---- helpers ----------------------------------------------------------------------------
    def _start(self, prepare: Callable[[Forward], ErrorStatus], callback) -> None:
        """Run the core's prepare call; its callback hears the outcome through a Forward, and a
        refused launch raises with the core's reason."""
        forward = Forward(callback, AidlPreparedModel)
        status = prepare(forward)
        if status != ErrorStatus.NONE:
            raise A.ServiceSpecificError(status, forward.reason or "the model was refused")

    def _prepare(self, model, preference, priority, deadlineNs, modelCache, dataCache, token, callback) -> None:
        _check_callback(callback)                # a bad callback is refused before anything else
        try:
            args = (to_core.model(model), ExecutionPreference(preference), Priority(priority),
                    to_core.deadline(deadlineNs), to_core.handles(modelCache, "modelCache"),
                    to_core.handles(dataCache, "dataCache"), to_core.token(token))
        except ValueError as e:
            _refuse(callback, to_core.invalid(str(e)))
        except A.ServiceSpecificError as e:
            _refuse(callback, e)
        self._start(lambda forward: self.core.prepare(13, args[0], forward, *args[1:]), callback)


def _check_callback(callback) -> None:
    if not isinstance(callback, IPreparedModelCallback) and not hasattr(callback, "notify"):
        raise to_core.invalid("callback is not an IPreparedModelCallback")


def _refuse(callback, error: A.ServiceSpecificError) -> None:
    """A bad argument: the callback hears it, then the call raises it (IDevice::prepareModel)."""
    try:
        callback.notify(error.status, None)
    except Exception:  # a failing client callback must not turn the refusal into another error
        log.exception("prepare callback raised")
    raise error
