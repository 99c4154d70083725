"""Prepare an imported TFLite model on a Device and execute it on numpy inputs.

The request's pools are allocated once and reused, so repeated runs measure the driver, not
pool allocation. Outputs come back shaped as the TFLite tensors (rank-0 included)."""
from __future__ import annotations

import time

import numpy as np

from ..driver.callbacks import PreparedModelCallback
from ..driver.device import Device
from ..hal.types import (
    DataLocation,
    ErrorStatus,
    ExecutionPreference,
    MeasureTiming,
    Model_1_3,
    OptionalTimeoutDuration,
    OptionalTimePoint,
    Priority,
    Request,
    RequestArgument,
)
from ..memory import Memory, allocate_shared
from .importer import ImportedModel, IOTensor
from .tensors import nn_dims


class ExecutionError(RuntimeError):
    def __init__(self, what: str, status: int):
        super().__init__(f"{what} failed: {ErrorStatus(status).name}")
        self.status = ErrorStatus(status)


def _pool(tensors: list[IOTensor]) -> tuple[list[tuple[int, int]], Memory]:
    """One shared pool for `tensors`, each at a 64-byte aligned offset: ([(offset, bytes)], pool)."""
    layout, off = [], 0
    for t in tensors:
        n = int(np.prod(t.shape, dtype=np.int64)) * t.dtype.itemsize
        layout.append((off, n))
        off += (n + 63) // 64 * 64
    return layout, allocate_shared(max(off, 64))


def _prepare(device: Device, model, timeout: float):
    cb = PreparedModelCallback()
    if isinstance(model, Model_1_3):
        status = device.prepareModel_1_3(model, ExecutionPreference.SUSTAINED_SPEED, Priority.MEDIUM,
                                         OptionalTimePoint(), [], [], bytes(32), cb)
    else:
        status = device.prepareModel_1_2(model, ExecutionPreference.SUSTAINED_SPEED, [], [], bytes(32), cb)
    if status != ErrorStatus.NONE:
        raise ExecutionError("prepareModel", status)
    if not cb.wait(timeout):
        raise ExecutionError("prepareModel (timed out)", ErrorStatus.GENERAL_FAILURE)
    if cb.status != ErrorStatus.NONE or cb.prepared_model is None:
        raise ExecutionError("prepareModel", cb.status)
    return cb.prepared_model


class Session:
    """One prepared model plus reusable request pools. `burst=True` executes through an
    ExecutionBurstController (nngpu.burst) kept open for the session's life."""

    def __init__(self, imported: ImportedModel, backend: str | Device = "numpy", burst: bool = False,
                 prepare_timeout: float = 600.0):
        self.imported = imported
        self.device = backend if isinstance(backend, Device) else Device(backend)
        t0 = time.perf_counter()
        self.prepared = _prepare(self.device, imported.model, prepare_timeout)
        self.prepare_s = time.perf_counter() - t0
        self.is_1_3 = isinstance(imported.model, Model_1_3)
        self._in_layout, self._in_pool = _pool(imported.inputs)
        self._out_layout, self._out_pool = _pool(imported.outputs)
        self.request = Request(
            [RequestArgument(False, DataLocation(0, o, n), nn_dims(t.shape))
             for (o, n), t in zip(self._in_layout, imported.inputs)],
            [RequestArgument(False, DataLocation(1, o, n), []) for o, n in self._out_layout],
            [self._in_pool, self._out_pool])
        self._burst_cm = None
        self.burst = None
        if burst:
            from ..burst import ExecutionBurstController  # ImportError: the caller reports it

            self._burst_cm = ExecutionBurstController.create(self.prepared)
            self.burst = self._burst_cm.__enter__()

    def close(self) -> None:
        if self._burst_cm is not None:
            self._burst_cm.__exit__(None, None, None)
            self._burst_cm = self.burst = None

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def set_inputs(self, inputs: list[np.ndarray]) -> None:
        if len(inputs) != len(self.imported.inputs):
            raise ValueError(f"the model has {len(self.imported.inputs)} inputs, got {len(inputs)}")
        view = self._in_pool.map()
        for arr, t, (off, n) in zip(inputs, self.imported.inputs, self._in_layout):
            a = np.ascontiguousarray(arr, dtype=t.dtype)
            if a.size * a.itemsize != n:
                raise ValueError(f"input {t.name}: shape {list(a.shape)}, the model wants {t.shape}")
            view[off: off + n] = a.reshape(-1).view(np.uint8)

    def execute(self, measure: MeasureTiming = MeasureTiming.NO):
        if self.burst is not None:
            status, shapes, timing = self.burst.compute(self.request, measure)
        elif self.is_1_3:
            status, shapes, timing = self.prepared.executeSynchronously_1_3(
                self.request, measure, OptionalTimePoint(), OptionalTimeoutDuration())
        else:
            status, shapes, timing = self.prepared.executeSynchronously(self.request, measure)
        if status != ErrorStatus.NONE:
            raise ExecutionError("execution", status)
        return shapes, timing

    def outputs(self) -> list[np.ndarray]:
        view = self._out_pool.map()
        res = []
        for t, (off, n) in zip(self.imported.outputs, self._out_layout):
            res.append(np.frombuffer(bytes(view[off: off + n]), dtype=t.dtype).reshape(t.shape))
        return res

    def run(self, inputs: list[np.ndarray]) -> list[np.ndarray]:
        self.set_inputs(inputs)
        self.execute()
        return self.outputs()


def random_inputs(imported: ImportedModel, seed: int = 0) -> list[np.ndarray]:
    """One random value per model input with a fixed seed: floats in [-1, 1), quantized /
    integer inputs uniform over their type's range clipped to [-1000, 1000], booleans fair coins."""
    rng = np.random.default_rng(seed)
    out = []
    for t in imported.inputs:
        if t.dtype.kind == "f":
            out.append(rng.uniform(-1.0, 1.0, t.shape).astype(t.dtype))
        elif t.dtype.kind == "b":
            out.append(rng.integers(0, 2, t.shape).astype(np.bool_))
        else:
            info = np.iinfo(t.dtype)
            lo, hi = max(info.min, -1000), min(info.max, 1000)
            out.append(rng.integers(lo, hi, t.shape, endpoint=True).astype(t.dtype))
    return out

