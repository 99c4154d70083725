"""Executes a PlanSpec on a backend: constants uploaded once, kernels compiled and warmed up at
prepare, intermediates kept on the device. Operations without a device kernel run on the host
reference with an explicit, logged device↔host transfer, counted in `transfers`."""
from __future__ import annotations

import logging
import threading
from typing import Sequence

import numpy as np

from ..backends.base import DeviceValue
from .interpreter import GraphRunner
from ..ops.dtypes import dtype_of
from .lower import HostStep, KernelStep, LibraryStep, PlanSpec

log = logging.getLogger("nngpu.plan")


class PlanRunner:
    """Same interface as GraphRunner (model, run), backed by device kernels. Device-resident
    values (IBuffer storage) are read and written in place: `device_resident`."""

    device_resident = True

    def __init__(self, reference: GraphRunner, spec: PlanSpec, backend):
        self.reference = reference
        self.model = reference.model
        self.version = reference.version
        self.relaxed = reference.relaxed
        self.spec = spec
        self.backend = backend
        self.graph = reference.model.main
        self._lock = threading.Lock()  # executions share the planned buffers
        self.transfers = 0
        self.device_ops, self.host_ops = spec.counts()
        self._slots = [backend.alloc(n) for n in spec.slot_sizes]
        self._kernels = {id(s): backend.compile(s.source, s.name) for s in spec.kernels}
        for idx in spec.constants:
            value = spec.derived[idx] if idx in spec.derived else reference.constant(idx)
            backend.upload(self._buf(idx), np.ascontiguousarray(value))
        self._input_shapes = [spec.shapes.get(i) for i in self.graph.inputIndexes]
        self._warm_up()

    def _buf(self, idx: int):
        return self._slots[self.spec.buffer_of[idx]]

    def _warm_up(self) -> None:
        inputs = [np.zeros(s, dtype=dtype_of(self.graph.operands[i].type))
                  for i, s in zip(self.graph.inputIndexes, self._input_shapes)]
        with np.errstate(all="ignore"):
            self.run(inputs)
        self.transfers = 0

    def _matches_plan(self, inputs: Sequence[np.ndarray | None]) -> bool:
        return all(v is not None and tuple(v.shape) == s for v, s in zip(inputs, self._input_shapes))

    def trace(self, inputs, graph_index: int = 0, deadline_ns: int | None = None):
        return self.reference.trace(inputs, graph_index, deadline_ns)

    def run(self, inputs: Sequence, graph_index: int = 0, deadline_ns: int | None = None,
            out_buffers: dict | None = None) -> list:
        """Outputs as host arrays, except those with an IBuffer in `out_buffers` (by output
        position): written into its device storage and returned as DeviceValues."""
        if graph_index != 0 or not self._matches_plan(inputs):
            # Shapes the plan was not built for: the reference, on host copies.
            host_inputs = [v.to_host() if isinstance(v, DeviceValue) else v for v in inputs]
            return self.reference.run(host_inputs, graph_index, deadline_ns)
        with self._lock:
            return self._run(inputs, out_buffers or {})

    def _run(self, inputs: Sequence, out_buffers: dict) -> list:
        spec, backend = self.spec, self.backend
        host: dict[int, np.ndarray] = dict(spec.derived)  # folded values and kernel-layout constants
        device_inputs: dict[int, DeviceValue] = {}
        for idx, value in zip(self.graph.inputIndexes, inputs):
            if isinstance(value, DeviceValue):
                device_inputs[idx] = value
                if idx in spec.device_tensors:
                    backend.copy(self._buf(idx), value.buf, value.nbytes)
                continue
            host[idx] = value
            if idx in spec.device_tensors:
                backend.upload(self._buf(idx), value)
        for step in spec.steps:
            if isinstance(step, KernelStep):
                backend.launch(self._kernels[id(step)], step.global_size, [self._buf(i) for i in step.args])
            elif isinstance(step, LibraryStep):
                backend.gemm(*[self._buf(i) for i in step.args], step.m, step.n, step.k)
            else:
                self._host_step(step, host, device_inputs)
        outputs = []
        for k, idx in enumerate(self.graph.outputIndexes):
            if k in out_buffers:
                outputs.append(self._to_buffer(idx, host, out_buffers[k]))
                continue
            if idx not in host:
                arr = np.empty(spec.shapes[idx], dtype=dtype_of(self.graph.operands[idx].type))
                backend.download(self._buf(idx), arr)
                host[idx] = arr
            outputs.append(host[idx])
        backend.synchronize()
        return outputs

    def _to_buffer(self, idx: int, host: dict, buffer) -> DeviceValue:
        shape = self.spec.shapes[idx]
        dtype = dtype_of(self.graph.operands[idx].type)
        value = DeviceValue(None, shape, dtype, self.backend)
        value.buf = buffer.storage(value.nbytes)
        if idx in host:
            self.backend.upload(value.buf, np.ascontiguousarray(host[idx]))
        else:
            self.backend.copy(value.buf, self._buf(idx), value.nbytes)
        return value

    def _host_value(self, idx: int, host: dict, device_inputs: dict[int, DeviceValue], op: int):
        """Operand idx on the host: computed there, a constant, or brought back from the device
        (a counted, logged transfer). None for an omitted operand."""
        if idx in host:
            return host[idx]
        if idx in self.spec.aliases:  # a reshape that got no step: view its source
            source = self._host_value(self.spec.aliases[idx], host, device_inputs, op)
            value = None if source is None else source.reshape(self.spec.shapes[idx])
        elif idx in device_inputs:
            value = device_inputs[idx].to_host()
            self.transfers += 1
        elif idx in self.spec.device_tensors and self.reference.constant(idx) is None:
            value = np.empty(self.spec.shapes[idx], dtype=dtype_of(self.graph.operands[idx].type))
            self.backend.download(self._buf(idx), value)
            self.transfers += 1
            log.debug("operation %d: device→host transfer of operand %d", op, idx)
        else:
            return self.reference.constant(idx)
        host[idx] = value
        return value

    def _host_step(self, step: HostStep, host: dict[int, np.ndarray], device_inputs: dict[int, DeviceValue]) -> None:
        values = [self._host_value(idx, host, device_inputs, step.op) for idx in step.inputs]
        outs = self.reference.run_operation(step.op, values)
        for idx, value in zip(step.outputs, outs):
            host[idx] = value
            if idx in self.spec.device_tensors:
                self.backend.upload(self._buf(idx), np.ascontiguousarray(value))
                self.transfers += 1
                log.debug("operation %d: host→device transfer of operand %d", step.op, idx)
