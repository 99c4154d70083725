"""`nngpu.Session`: prepare a model once and run it on numpy arrays by tensor name.

    with nngpu.Session("model.tflite", backend="auto") as s:
        print(s.inputs)                      # [IOTensor(name, shape, dtype, scale, zero_point)]
        outputs = s.run({"input": x})        # {output name: array}

Inputs are checked as strictly as the TFLite interpreter checks them: every input by name, no
unknown names, the exact dtype and shape (a 0 in the model's shape takes any extent). `cast=True`
casts instead of refusing a dtype. The request's pools are allocated once and reused, so
repeated runs measure the driver, not allocation."""
from __future__ import annotations

import time
from typing import Any, Mapping, Sequence

import numpy as np

from .driver.callbacks import PreparedModelCallback
from .driver.device import Device
from .hal.types import (DataLocation, ErrorStatus, ExecutionPreference, MeasureTiming, Model_1_3,
                        OptionalTimeoutDuration, OptionalTimePoint, Priority, Request, RequestArgument)
from .memory import Memory, allocate_shared
from .named_model import IOTensor, NamedIO, NamedModel, load_model


class ExecutionError(RuntimeError):
    """prepareModel or an execution returned an error status."""

    def __init__(self, what: str, status: int):
        super().__init__(f"{what} failed: {ErrorStatus(status).name}")
        self.status = ErrorStatus(status)


class InputError(ValueError):
    """The arrays given do not match the model's inputs."""


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


class Session(NamedIO):
    """One prepared model plus reusable request pools. `burst=True` executes through an
    ExecutionBurstController (nngpu.burst) kept open for the session's life."""

    def __init__(self, model: Any, backend: str | Device = "auto", *, burst: bool = False,
                 prepare_timeout: float = 600.0) -> None:
        self.named: NamedModel = load_model(model)
        self.inputs: list[IOTensor] = self.named.inputs
        self.outputs: list[IOTensor] = self.named.outputs
        self.device = backend if isinstance(backend, Device) else Device(backend)
        t0 = time.perf_counter()
        self.prepared = _prepare(self.device, self.named.model, prepare_timeout)
        self.prepare_s = time.perf_counter() - t0
        self.is_1_3 = isinstance(self.named.model, Model_1_3)
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

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- the three steps of a run, for callers that time them apart --------------------------
    def set_inputs(self, feeds: Mapping[str, Any] | Sequence[Any], cast: bool = False) -> None:
        arrays = check_inputs(self.inputs, feeds, cast)
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

    def _compute(self, request: Request, measure: MeasureTiming):
        if self.burst is not None:
            return self.burst.compute(request, measure)
        if self.is_1_3:
            return self.prepared.executeSynchronously_1_3(request, measure, OptionalTimePoint(),
                                                          OptionalTimeoutDuration())
        return self.prepared.executeSynchronously(request, measure)

    def execute(self, measure: MeasureTiming = MeasureTiming.NO):
        """Run on the inputs last set: (output shapes, timing). An output larger than its pool
        (a shape the model leaves open) grows the pool and runs again."""
        status, shapes, timing = self._compute(self._request(), measure)
        if status == ErrorStatus.OUTPUT_INSUFFICIENT_SIZE and shapes:
            self._out = _Pool([max(_nbytes(s.dimensions, t.dtype), room)
                               for s, t, (_, room) in zip(shapes, self.outputs, self._out.layout)])
            status, shapes, timing = self._compute(self._request(), measure)
        if status != ErrorStatus.NONE:
            raise ExecutionError("execution", status)
        self._out_shapes = [list(s.dimensions) for s in shapes]
        return shapes, timing

    def output_arrays(self) -> list[np.ndarray]:
        """The outputs of the last execution, in model order (copies)."""
        res = []
        for t, shape, (off, _) in zip(self.outputs, self._out_shapes, self._out.layout):
            count = int(np.prod(shape, dtype=np.int64)) if shape else 1
            res.append(self._out.memory.array(t.dtype, off, count).reshape(shape).copy())
        return res

    def run(self, feeds: Mapping[str, Any] | Sequence[Any], cast: bool = False) -> dict[str, np.ndarray]:
        """{output name: array} for inputs given by name (or as a list in model order)."""
        self.set_inputs(feeds, cast)
        self.execute()
        return dict(zip(self.output_names, self.output_arrays()))


def random_inputs(inputs: Sequence[IOTensor], seed: int = 0) -> list[np.ndarray]:
    """One random value per input with a fixed seed: floats in [-1, 1), quantized / integer inputs
    uniform over their type's range clipped to [-1000, 1000], booleans fair coins. A 0 extent is 1."""
    rng = np.random.default_rng(seed)
    out = []
    for t in inputs:
        shape = [d or 1 for d in t.shape]
        if t.dtype.kind == "f":
            out.append(rng.uniform(-1.0, 1.0, shape).astype(t.dtype))
        elif t.dtype.kind == "b":
            out.append(rng.integers(0, 2, shape).astype(np.bool_))
        else:
            info = np.iinfo(t.dtype)
            lo, hi = max(info.min, -1000), min(info.max, 1000)
            out.append(rng.integers(lo, hi, shape, endpoint=True).astype(t.dtype))
    return out
