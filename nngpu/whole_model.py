"""One NNAPI model prepared on one device, run on numpy arrays through reusable request pools:
what `nngpu.Session` runs a whole model with, and each driver partition of a partitioned one.

The request's pools are allocated once and reused, so repeated runs measure the driver, not
allocation."""
from __future__ import annotations

import time
from typing import Any, Mapping, Sequence

import numpy as np

from .driver.callbacks import PreparedModelCallback
from .driver.device import Device
from .driver.prepared_model import PreparedModel
from .hal.types import (DataLocation, ErrorStatus, ExecutionPreference, MeasureTiming, Model_1_3,
                        OptionalTimeoutDuration, OptionalTimePoint, Priority, Request, RequestArgument)
from .memory import Memory, allocate_shared
from .modelutil import relaxed_model
from .named_io import IOTensor
from .named_model import NamedModel


class ExecutionError(RuntimeError):
    """prepareModel or an execution returned an error status; `reason` is the driver's why, where
    it gave one (in process: always)."""

    def __init__(self, what: str, status: int, reason: str = ""):
        reason = " ".join(reason.split())  # one line, as the CLI prints it
        super().__init__(f"{what} failed: {ErrorStatus(status).name}" + (f": {reason}" if reason else ""))
        self.status = ErrorStatus(status)
        self.reason = reason


class InputError(ValueError):
    """The arrays given do not match the model's inputs."""


def prepare(device: Device, model, timeout: float):
    """The IPreparedModel of `model` on `device` (ExecutionError when it cannot be had)."""
    cb = PreparedModelCallback()
    if isinstance(model, Model_1_3):
        status = device.prepareModel_1_3(model, ExecutionPreference.SUSTAINED_SPEED, Priority.MEDIUM,
                                         OptionalTimePoint(), [], [], bytes(32), cb)
    else:
        status = device.prepareModel_1_2(model, ExecutionPreference.SUSTAINED_SPEED, [], [], bytes(32), cb)
    if status != ErrorStatus.NONE:  # an in-process device has notified the callback, with its reason
        raise ExecutionError("prepareModel", status, cb.reason)
    if not cb.wait(timeout):
        raise ExecutionError("prepareModel", ErrorStatus.GENERAL_FAILURE, f"no answer in {timeout:g} s")
    if cb.status != ErrorStatus.NONE or cb.prepared_model is None:
        raise ExecutionError("prepareModel", cb.status, cb.reason)
    return cb.prepared_model


def _nbytes(shape: Sequence[int], dtype: np.dtype) -> int:
    return int(np.prod([max(int(d), 1) for d in shape], dtype=np.int64)) * dtype.itemsize


class _Pool:
    """One shared pool holding a list of tensors, each at a 64-byte aligned offset."""

    def __init__(self, sizes: Sequence[int]) -> None:
        self.layout: list[tuple[int, int]] = []
        off = 0
        for n in sizes:
            self.layout.append((off, n))
            off += (n + 63) // 64 * 64
        self.memory: Memory = allocate_shared(max(off, 64))

    def fits(self, sizes: Sequence[int]) -> bool:
        return all(n <= room for n, (_, room) in zip(sizes, self.layout))


def check_inputs(inputs: Sequence[IOTensor], feeds: Mapping[str, Any] | Sequence[Any],
                 cast: bool = False, cast_hint: str = "cast=True") -> list[np.ndarray | None]:
    """The arrays of `feeds` in model input order, checked against `inputs` (InputError);
    `cast_hint` is how the caller's user asks for a cast."""
    names = [t.name for t in inputs]
    if isinstance(feeds, Mapping):
        unknown = [k for k in feeds if k not in names]
        if unknown:
            raise InputError(f"unknown input {unknown[0]!r}; the model's inputs are {', '.join(names)}")
        missing = [n for n in names if n not in feeds]
        if missing:
            raise InputError(f"input {missing[0]!r} is missing; the model's inputs are {', '.join(names)}")
        values = [feeds[n] for n in names]
    else:
        values = list(feeds)
        if len(values) != len(inputs):
            raise InputError(f"the model has {len(inputs)} inputs ({', '.join(names)}), got {len(values)}")
    res: list[np.ndarray | None] = []
    for t, v in zip(inputs, values):
        if v is None:
            res.append(None)  # an optional input left without a value
            continue
        a = np.asarray(v)
        if a.dtype != t.dtype:
            if not cast:
                raise InputError(f"input {t.name!r}: dtype {a.dtype}, the model wants {t.dtype} "
                                 f"(cast it first, or give {cast_hint})")
            a = a.astype(t.dtype)
        if t.shape and (a.ndim != len(t.shape) or any(d and d != e for d, e in zip(t.shape, a.shape))):
            raise InputError(f"input {t.name!r}: shape {list(a.shape)}, the model wants {t.shape}"
                             + (" (0: any extent)" if 0 in t.shape else ""))
        res.append(np.ascontiguousarray(a))
    return res


class WholeModelRun:
    """One prepared model plus reusable request pools. `burst=True` executes through an
    ExecutionBurstController (nngpu.burst) kept open for the run's life; `relaxed=True` prepares
    the model with relaxComputationFloat32toFloat16 set."""

    def __init__(self, named: NamedModel, device: Device, burst: bool = False, prepare_timeout: float = 600.0,
                 relaxed: bool = False):
        self.inputs, self.outputs = named.inputs, named.outputs
        t0 = time.perf_counter()
        self.prepared = prepare(device, relaxed_model(named.model) if relaxed else named.model, prepare_timeout)
        self.prepare_s = time.perf_counter() - t0
        self.is_1_3 = isinstance(named.model, Model_1_3)
        self._in: _Pool | None = None
        self._in_given: list[bool] = []
        self._in_sizes: list[int] = []
        self._in_dims: list[list[int]] = []
        self._out = _Pool([_nbytes(t.shape, t.dtype) for t in self.outputs])
        self._out_shapes: list[list[int]] = [list(t.shape) for t in self.outputs]
        self._burst_cm = None
        self.burst = None
        if burst:
            from .burst import ExecutionBurstController

            self._burst_cm = ExecutionBurstController.create(self.prepared)
            self.burst = self._burst_cm.__enter__()

    def close(self) -> None:
        if self._burst_cm is not None:
            self._burst_cm.__exit__(None, None, None)
            self._burst_cm = self.burst = None

    def set_inputs(self, feeds: Mapping[str, Any] | Sequence[Any], cast: bool = False) -> None:
        self.set_checked(check_inputs(self.inputs, feeds, cast))

    def set_checked(self, arrays: Sequence[np.ndarray | None]) -> None:
        """Copy already checked, contiguous arrays (model input order) into the input pool, in
        the dtype the model computes (a partition's int64 indices: int32)."""
        arrays = [a if a is None or t.computed is None else a.astype(t.computed) for a, t in zip(arrays, self.inputs)]
        sizes = [0 if a is None else a.nbytes for a in arrays]
        if self._in is None or not self._in.fits(sizes):
            self._in = _Pool(sizes)
        view = self._in.memory.map()
        for a, (off, _) in zip(arrays, self._in.layout):
            if a is not None:
                view[off: off + a.nbytes] = a.reshape(-1).view(np.uint8)
        self._in_sizes = sizes
        self._in_given = [a is not None for a in arrays]
        self._in_dims = [[] if a is None else list(a.shape) for a in arrays]

    def _request(self) -> Request:
        assert self._in is not None, "set_inputs first"
        ins = [RequestArgument(False, DataLocation(0, off, n), dims) if given else RequestArgument(True)
               for given, dims, n, (off, _) in zip(self._in_given, self._in_dims, self._in_sizes, self._in.layout)]
        outs = [RequestArgument(False, DataLocation(1, off, n), []) for off, n in self._out.layout]
        return Request(ins, outs, [self._in.memory, self._out.memory])

    def _compute(self, request: Request, measure: MeasureTiming) -> tuple[ErrorStatus, list, Any, str]:
        """(status, output shapes, timing, the driver's reason for a failure where it gives one)."""
        if self.burst is not None:
            return (*self.burst.compute(request, measure), "")
        if isinstance(self.prepared, PreparedModel):  # in process: the core's Result, with its reason
            r = self.prepared.run(request, measure)
            return r.status, r.output_shapes, r.timing, r.reason
        if self.is_1_3:
            return (*self.prepared.executeSynchronously_1_3(request, measure, OptionalTimePoint(),
                                                            OptionalTimeoutDuration()), "")
        return (*self.prepared.executeSynchronously(request, measure), "")

    def execute(self, measure: MeasureTiming = MeasureTiming.NO):
        """Run on the inputs last set: (output shapes, timing). An output larger than its pool
        (a shape the model leaves open) grows the pool and runs again."""
        status, shapes, timing, reason = self._compute(self._request(), measure)
        if status == ErrorStatus.OUTPUT_INSUFFICIENT_SIZE and shapes:
            self._out = _Pool([max(_nbytes(s.dimensions, t.dtype), room)
                               for s, t, (_, room) in zip(shapes, self.outputs, self._out.layout)])
            status, shapes, timing, reason = self._compute(self._request(), measure)
        if status != ErrorStatus.NONE:
            raise ExecutionError("execution", status, reason)
        self._out_shapes = [list(s.dimensions) for s in shapes]
        return shapes, timing

    def output_arrays(self, copy: bool = True) -> list[np.ndarray]:
        """The outputs of the last execution, in model order: copies, or (copy=False) views of
        the output pool, valid until the next execution."""
        res = []
        for t, shape, (off, _) in zip(self.outputs, self._out_shapes, self._out.layout):
            count = int(np.prod(shape, dtype=np.int64)) if shape else 1
            a = self._out.memory.array(t.computed or t.dtype, off, count).reshape(shape)
            res.append(a.astype(t.dtype) if t.computed is not None else a.copy() if copy else a)
        return res

    def device_placement(self) -> tuple[int, int]:
        """(operations the last execution ran in device kernels, operations it ran on the host)."""
        return self.prepared.executor.placement()

    def device_launches(self) -> int:
        """Kernels and GEMM calls the last execution launched on the device."""
        return self.prepared.executor.launches()
