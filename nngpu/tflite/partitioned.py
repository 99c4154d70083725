"""Execute a partitioned TFLite model: each driver partition prepared on the device like a whole
model (nngpu.whole_model), each host partition on TFLite's kernels (host.HostPartition), in plan
order. Tensors cross partitions as numpy arrays handed straight on: a driver partition's outputs
are views of its output pool and a host partition's are the interpreter's arrays, copied only
into the next request pool or interpreter input that reads them, and for the caller's outputs."""
from __future__ import annotations

import time
from typing import Sequence

import numpy as np

from .. import profiling
from ..driver.device import Device
from ..hal.types import MeasureTiming, OutputShape, Timing
from ..named_model import NamedModel
from ..whole_model import InputError, WholeModelRun
from .host import HostPartition
from .partition import PartitionPlan


class PartitionedRun:
    """A partition plan prepared: one WholeModelRun per driver partition (`relaxed`: each with
    relaxComputationFloat32toFloat16 set), one HostPartition per host partition; the same calls
    as a WholeModelRun, for nngpu.Session."""

    def __init__(self, plan: PartitionPlan, device: Device, burst: bool = False, prepare_timeout: float = 600.0,
                 relaxed: bool = False):
        self.plan = plan
        t0 = time.perf_counter()
        self.steps: list[WholeModelRun | HostPartition] = []
        try:
            for p in plan.parts:
                if p.on_host:
                    self.steps.append(HostPartition(plan, p))
                else:
                    named = NamedModel(p.imported.model, p.imported.inputs, p.imported.outputs)
                    self.steps.append(WholeModelRun(named, device, burst, prepare_timeout, relaxed))
        except BaseException:
            self.close()
            raise
        self.prepare_s = time.perf_counter() - t0
        self._inputs: list[np.ndarray | None] = []
        self._outputs: list[np.ndarray] = []

    def close(self) -> None:
        for step in self.steps:
            if isinstance(step, WholeModelRun):
                step.close()

    def set_checked(self, arrays: Sequence[np.ndarray | None]) -> None:
        missing = [t.name for t, a in zip(self.plan.inputs, arrays) if a is None]
        if missing:
            raise InputError(f"input {missing[0]!r} has no value; a partitioned model needs every input")
        self._inputs = list(arrays)

    def execute(self, measure: MeasureTiming = MeasureTiming.NO) -> tuple[list[OutputShape], Timing]:
        graph = self.plan.graph
        env: dict[int, np.ndarray | None] = dict(zip(graph.inputs, self._inputs))
        with profiling.execution():  # one execution: the partitions' own are part of it
            for part, step in zip(self.plan.parts, self.steps):
                ins = [env[t] for t in part.inputs]
                if isinstance(step, HostPartition):
                    with profiling.span("host", step.label, ops=part.ops):
                        outs = step.run(ins)
                else:
                    step.set_checked(ins)
                    step.execute(measure)
                    outs = step.output_arrays(copy=False)
                env.update(zip(part.outputs, outs))
        self._outputs = [env[t] for t in graph.outputs]  # rewrite.py gives each output a producer
        return [OutputShape(list(a.shape)) for a in self._outputs], Timing()

    def output_arrays(self) -> list[np.ndarray]:
        return [np.array(a) for a in self._outputs]

    def device_placement(self) -> tuple[int, int]:
        runs = [s.device_placement() for s in self.steps if isinstance(s, WholeModelRun)]
        return sum(r[0] for r in runs), sum(r[1] for r in runs)

    def device_launches(self) -> int:
        return sum(s.device_launches() for s in self.steps if isinstance(s, WholeModelRun))
