"""IDevice 1.0-1.3 over the driver core's calls. The core calls take the HAL version (10 for
1.0 ... 13 for 1.3) that decides which models an entry point accepts and which notify method
its callback hears; the driver's Device (nngpu.driver.device) and the service's proxy
(nngpu.service.proxy) provide them, and the HIDL methods below are each one of them."""
from __future__ import annotations

from abc import abstractmethod
from typing import Any

from ..hal.interfaces import IDevice
from ..hal.types import ErrorStatus, ExecutionPreference, OptionalTimePoint, Priority

# the callback method that hears a prepare or an execution launched through each HAL version
NOTIFY = {10: "notify", 11: "notify", 12: "notify_1_2", 13: "notify_1_3"}


class HidlDevice(IDevice):
    # ---- the core's calls ---------------------------------------------------------------------
    @abstractmethod
    def capabilities_of(self, version: int) -> tuple[ErrorStatus, Any]:
        """getCapabilities of HAL `version`: the Capabilities struct of that version."""

    @abstractmethod
    def supported_operations(self, model: Any, version: int) -> tuple[ErrorStatus, list[bool]]:
        """Which operations of the main graph run here, for a model given through `version`."""

    @abstractmethod
    def prepare(self, version: int, model: Any, callback: Any,
                preference: ExecutionPreference = ExecutionPreference.FAST_SINGLE_ANSWER,
                priority: Priority = Priority.MEDIUM, deadline: OptionalTimePoint | None = None,
                model_cache=(), data_cache=(), token: bytes = b"") -> ErrorStatus:
        """Prepare `model`; the launch status now, the callback's notify of `version` later."""

    @abstractmethod
    def prepare_from_cache(self, version: int, deadline: OptionalTimePoint | None, model_cache, data_cache,
                           token: bytes, callback: Any) -> ErrorStatus:
        """Prepare the model a compilation cache holds; as prepare."""

    # ---- the HIDL methods ---------------------------------------------------------------------
    def getCapabilities(self):
        return self.capabilities_of(10)

    def getCapabilities_1_1(self):
        return self.capabilities_of(11)

    def getCapabilities_1_2(self):
        return self.capabilities_of(12)

    def getCapabilities_1_3(self):
        return self.capabilities_of(13)

    def getSupportedOperations(self, model):
        return self.supported_operations(model, 10)

    def getSupportedOperations_1_1(self, model):
        return self.supported_operations(model, 11)

    def getSupportedOperations_1_2(self, model):
        return self.supported_operations(model, 12)

    def getSupportedOperations_1_3(self, model):
        return self.supported_operations(model, 13)

    def prepareModel(self, model, callback):
        return self.prepare(10, model, callback)

    def prepareModel_1_1(self, model, preference, callback):
        return self.prepare(11, model, callback, preference)

    def prepareModel_1_2(self, model, preference, modelCache, dataCache, token, callback):
        return self.prepare(12, model, callback, preference, model_cache=modelCache, data_cache=dataCache, token=token)

    def prepareModel_1_3(self, model, preference, priority, deadline, modelCache, dataCache, token, callback):
        return self.prepare(13, model, callback, preference, priority, deadline, modelCache, dataCache, token)

    def prepareModelFromCache(self, modelCache, dataCache, token, callback):
        return self.prepare_from_cache(12, None, modelCache, dataCache, token, callback)

    def prepareModelFromCache_1_3(self, deadline, modelCache, dataCache, token, callback):
        return self.prepare_from_cache(13, deadline, modelCache, dataCache, token, callback)
