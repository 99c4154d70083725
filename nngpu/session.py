"""`nngpu.Session`: prepare a model once and run it on numpy arrays by tensor name.

    with nngpu.Session("model.tflite", backend="auto") as s:
        print(s.inputs)                      # [IOTensor(name, shape, dtype, scale, zero_point)]
        outputs = s.run({"input": x})        # {output name: array}
        print(s.placement)                   # "5 operators: 2 partitions on opencl (4), 1 on the host (1: CUMSUM)"

Inputs are checked as strictly as the TFLite interpreter checks them: every input by name, no
unknown names, the exact dtype and shape (a 0 in the model's shape takes any extent). `cast=True`
casts instead of refusing a dtype.

A TFLite model whose operators the driver cannot all run is split the way the TFLite NNAPI
delegate splits it (nngpu.tflite.partition): driver partitions on the backend, the rest on
TFLite's own kernels; `fallback=False` refuses such a model instead (HostOperatorsRefused)."""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from .driver.device import Device
from .hal.types import MeasureTiming, Model_1_3
from .named_io import IOTensor, NamedIO
from .named_model import NamedModel, load_model
from .whole_model import ExecutionError, InputError, WholeModelRun, check_inputs

__all__ = ["Session", "ExecutionError", "InputError", "check_inputs", "random_inputs"]


class Session(NamedIO):
    """One prepared model (or one per driver partition) plus reusable request pools.
    `burst=True` executes through an ExecutionBurstController (nngpu.burst) kept open for the
    session's life. `relaxed=True` prepares the model (each driver partition) with
    relaxComputationFloat32toFloat16 set: float32 may be computed at float16 range and precision
    (`device.backend.relaxed_precision()` says what the backend then does).

    A TFLite input whose shape signature leaves extents open (a dynamic batch) is prepared at
    `input_shapes[name]`, else at the file's stored shape; an input of another shape the
    signature allows prepares the model again at that shape, as TFLite's resize_tensor_input
    does (the last MAX_SHAPES shape sets stay prepared)."""

    MAX_SHAPES = 4

    def __init__(self, model: Any, backend: str | Device = "auto", *, burst: bool = False,
                 prepare_timeout: float = 600.0, fallback: bool = True,
                 input_shapes: Mapping[str, Sequence[int]] | None = None, relaxed: bool = False) -> None:
        self.device = backend if isinstance(backend, Device) else Device(backend)
        self._source, self._options = model, (burst, prepare_timeout, fallback)
        self.relaxed = relaxed
        self._prepared: dict[tuple, tuple[NamedModel, Any]] = {}  # by input shapes, oldest first
        self._open({k: list(v) for k, v in input_shapes.items()} if input_shapes else None)

    def _open(self, input_shapes: dict[str, list[int]] | None) -> None:
        """Load and prepare the model at these input shapes (or take it from the prepared ones)."""
        burst, prepare_timeout, fallback = self._options
        key = tuple(sorted((k, tuple(v)) for k, v in (input_shapes or {}).items()))
        if key in self._prepared:
            self.named, self._run = self._prepared.pop(key)
        else:
            self.named = load_model(self._source, fallback=fallback, device=self.device, input_shapes=input_shapes)
            self._run = self._prepare(self.named, burst, prepare_timeout, fallback)
            key = tuple(sorted((t.name, tuple(t.shape)) for t in self.named.inputs if t.signature is not None))
        self._prepared[key] = (self.named, self._run)
        while len(self._prepared) > self.MAX_SHAPES:
            self._prepared.pop(next(iter(self._prepared)))[1].close()
        self.inputs: list[IOTensor] = self.named.inputs
        self.outputs: list[IOTensor] = self.named.outputs
        self.prepare_s: float = self._run.prepare_s

    def _prepare(self, named: NamedModel, burst: bool, prepare_timeout: float, fallback: bool) -> Any:
        plan = named.plan
        if plan is not None and plan.host_ops and not fallback:
            from .tflite.partition import HostOperatorsRefused

            raise HostOperatorsRefused(plan.graph, set(plan.host_ops))
        if plan is None or plan.whole is not None:
            return WholeModelRun(named, self.device, burst, prepare_timeout, self.relaxed)
        from .tflite.partitioned import PartitionedRun

        return PartitionedRun(plan, self.device, burst, prepare_timeout, self.relaxed)

    def _resized(self, feeds: Mapping[str, Any] | Sequence[Any]) -> dict[str, list[int]] | None:
        """The input shapes to prepare again at, when every input whose feed has another shape
        than the prepared one is a dynamic input whose signature allows that shape; else None."""
        values = [feeds.get(t.name) for t in self.inputs] if isinstance(feeds, Mapping) else list(feeds)
        if len(values) != len(self.inputs):
            return None
        shapes, changed = {}, False
        for t, v in zip(self.inputs, values):
            shape = tuple(np.shape(v)) if v is not None else tuple(t.shape)
            if t.signature is not None:
                shapes[t.name] = list(shape)
            if v is not None and shape != tuple(t.shape):
                if not t.fits_signature(shape):
                    return None
                changed = True
        return shapes if changed else None
    @property
    def prepared(self):
        """The IPreparedModel of a model the driver runs whole (None when partitioned)."""
        return getattr(self._run, "prepared", None)

    @property
    def burst(self):
        return getattr(self._run, "burst", None)

    @property
    def is_1_3(self) -> bool:
        return isinstance(self.named.model, Model_1_3)

    @property
    def placement(self) -> str:
        """Where the operators run, e.g. "212 operators: 2 partitions on opencl (208), 1 on the
        host (4: BATCH_MATMUL ×4)"."""
        backend = self.device.backend_name
        if self.named.plan is not None:
            return self.named.plan.describe(backend)
        graph = self.named.model.main if isinstance(self.named.model, Model_1_3) else self.named.model
        n = len(graph.operations)
        return f"{n} operation{'s' if n != 1 else ''}: 1 partition on {backend} ({n})"

    def device_placement(self) -> tuple[int, int]:
        """(operations the last execution ran in device kernels, operations it ran on the host
        inside the driver's plans); host partitions are not counted."""
        return self._run.device_placement()

    def device_launches(self) -> int:
        """Kernels and GEMM calls the last execution launched on the driver's device."""
        return self._run.device_launches()

    def close(self) -> None:
        for _, run in self._prepared.values():
            run.close()
        self._prepared.clear()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- the three steps of a run, for callers that time them apart --------------------------
    def set_inputs(self, feeds: Mapping[str, Any] | Sequence[Any], cast: bool = False) -> None:
        try:
            checked = check_inputs(self.inputs, feeds, cast)
        except InputError:
            shapes = self._resized(feeds)
            if shapes is None:
                raise
            self._open(shapes)
            checked = check_inputs(self.inputs, feeds, cast)
        self._run.set_checked(checked)

    def execute(self, measure: MeasureTiming = MeasureTiming.NO):
        """Run on the inputs last set: (output shapes, timing). An output larger than its pool
        (a shape the model leaves open) grows the pool and runs again."""
        return self._run.execute(measure)

    def output_arrays(self) -> list[np.ndarray]:
        """The outputs of the last execution, in model order (copies)."""
        return self._run.output_arrays()

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
