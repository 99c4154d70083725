"""The corpus through the compilation cache: a device whose prepareModel_1_2 / _1_3 saves the
prepared model into two fresh cache files and answers with the model prepareModelFromCache
restores from them, so every case runs on a restored plan."""
from __future__ import annotations

import tempfile

from ..driver.callbacks import PreparedModelCallback
from ..hal.types import ErrorStatus, NativeHandle

TOKEN = bytes(range(32))
TIMEOUT_S = 300.0


class ThroughCache:
    """Wraps a Device; everything but preparing goes straight to it."""

    def __init__(self, device) -> None:
        self.device = device

    def __getattr__(self, name: str):
        return getattr(self.device, name)

    def prepareModel_1_2(self, model, preference, modelCache, dataCache, token, callback):
        return self._round_trip(callback, lambda handles, cb: self.device.prepareModel_1_2(
            model, preference, *handles, TOKEN, cb))

    def prepareModel_1_3(self, model, preference, priority, deadline, modelCache, dataCache, token, callback):
        return self._round_trip(callback, lambda handles, cb: self.device.prepareModel_1_3(
            model, preference, priority, deadline, *handles, TOKEN, cb))

    def _round_trip(self, callback, prepare) -> ErrorStatus:
        files = [tempfile.TemporaryFile() for _ in range(2)]  # unlinked: nothing left behind
        try:
            handles = [[NativeHandle([f.fileno()])] for f in files]
            saved = PreparedModelCallback()
            status = prepare(handles, saved)
            if not saved.wait(TIMEOUT_S):
                status = ErrorStatus.GENERAL_FAILURE
            if status != ErrorStatus.NONE or saved.status != ErrorStatus.NONE:
                callback.notify(saved.status if status == ErrorStatus.NONE else status, None)
                return status
            restored = PreparedModelCallback()
            status = self.device.prepareModelFromCache(*handles, TOKEN, restored)
            if not restored.wait(TIMEOUT_S):
                status = ErrorStatus.GENERAL_FAILURE
            callback.notify(restored.status if status == ErrorStatus.NONE else status, restored.prepared_model)
            return status
        finally:
            for f in files:
                f.close()
