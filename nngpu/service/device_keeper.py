"""The device a service serves, renewed after a sticky fault: once the device's context is lost
(an illegal address, a device lost), the next call a client makes reaches a new Device, so a
service recovers without a restart. Prepared models, buffers and bursts of the lost device stay
lost (DEVICE_UNAVAILABLE); a client prepares again."""
from __future__ import annotations

import logging
import threading
from typing import Any, Callable

from .codec import MAX_SERVED

log = logging.getLogger("nngpu.service")


class DeviceKeeper:
    """Stands for the current Device: every attribute is the current device's."""

    def __init__(self, make: Callable[[], Any], first: Any | None = None) -> None:
        self._make = make
        self._device = first if first is not None else make()
        self._lock = threading.Lock()

    def current(self) -> Any:
        """The device, a new one in place of a lost one (the lost one if no new one can be made)."""
        with self._lock:
            lost = self._device.backend.health.lost
            if lost is not None:
                try:
                    fresh = self._make()
                except Exception as e:  # the GPU is gone for good: calls answer DEVICE_UNAVAILABLE
                    log.error("the device was lost (%s) and no new one can be made: %s", lost, e)
                else:
                    log.warning("the device was lost (%s): serving on a new one", lost)
                    self._device = fresh
            return self._device

    def __getattr__(self, name: str) -> Any:
        return getattr(self.current(), name)


class ServedDevices:
    """The devices one service serves, by name (`nngpu serve --device A --device B`, as Android
    registers one IDevice per name): a client names one as it connects, or gets the first."""

    def __init__(self, devices: dict[str, Any]) -> None:
        if not 0 < len(devices) <= MAX_SERVED:
            raise ValueError(f"a service serves 1 to {MAX_SERVED} devices, not {len(devices)}")
        self._devices = dict(devices)

    @classmethod
    def one(cls, device: Any) -> "ServedDevices":
        return cls({getattr(device, "name", "nngpu"): device})

    @property
    def default(self) -> Any:
        return next(iter(self._devices.values()))

    def names(self) -> list[str]:
        return list(self._devices)

    def get(self, name: str) -> Any | None:
        return self._devices.get(name)
