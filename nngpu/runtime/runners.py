"""A segment's steps bound to its buffers: each is called with the execution's state, and says
what a CUDA graph records in its place (replay.py). Built once at prepare from the compiler's
step types, so an execution only calls them."""
from __future__ import annotations

import functools
from typing import Any, Callable

import numpy as np

from ..backends.base import Backend
from ..compiler.steps import NO_DATA, HostStep, Known
from ..hal.types import ErrorStatus, Subgraph
from ..ops.lib.dtypes import nbytes
from .interpreter import ExecutionError, GraphRunner
from .state import ExecutionState


class StepRunner:
    def __call__(self, state: ExecutionState) -> None:
        raise NotImplementedError

    def timed(self, state: ExecutionState) -> int | None:
        """Run alone (profiling): its device time in ns where the backend has events."""
        self(state)
        return None

    def moved_bytes(self, state: ExecutionState) -> int | None:
        """The bytes a transfer moved (after it ran); None for other steps."""
        return None


class DeviceCall(StepRunner):
    """A kernel launch or a GEMM, its arguments bound."""

    def __init__(self, backend: Backend, call: Callable[[], Any]) -> None:
        self.backend, self.call = backend, call

    def __call__(self, state: ExecutionState) -> None:
        self.call()

    def timed(self, state: ExecutionState) -> int | None:
        return self.backend.timed(self.call)

    def captured(self) -> Callable[[], Any]:
        return self.call


class Upload(StepRunner):
    """Tensor t onto the device: a device-side copy from an input given as a device value, else
    from its host value. With `readers` (the bound kernel calls, and argument indexes, that read
    the tensor's buffer: segment.py gives them where nothing else reads it and the backend
    rebinds), a device value the backend can make an argument of is read in place instead: those
    arguments are rebound to it, and back to the tensor's own buffer for a value copied there."""

    def __init__(self, backend: Backend, tensor: int, buf: Any, known: Known, dtype: np.dtype) -> None:
        self.backend, self.tensor, self.buf, self.known, self.dtype = backend, tensor, buf, known, dtype
        self.readers: list[tuple[Callable[[], Any], int]] = []
        self.bound = buf            # what the readers' arguments are now
        self.in_place = False       # the last execution's value was read where it is

    def __call__(self, state: ExecutionState) -> None:
        value = state.device_inputs.get(self.tensor)
        self.in_place = False
        if value is not None and self.readers and value.nbytes == self.planned_nbytes():
            region = self.backend.region(value.buf, value.offset, value.nbytes)
            if region is not None:
                self._bind(region)
                self.in_place = True
                return
        self._bind(self.buf)
        if value is not None:
            self.backend.copy(self.buf, value.buf, value.nbytes, 0, value.offset)
            return
        self.backend.upload(self.buf, self.host_value(state))

    def _bind(self, buf: Any) -> None:
        if buf is not self.bound:
            for call, index in self.readers:
                self.backend.rebind(call, index, buf)
            self.bound = buf

    def host_value(self, state: ExecutionState) -> np.ndarray:
        """In the tensor's storage dtype (a relaxed temporary's float32 value rounded to float16)."""
        return np.ascontiguousarray(state.lookup(self.tensor, self.known), dtype=self.dtype)

    def planned_nbytes(self) -> int | None:
        """Its size from the shape the plan knows (None: known once a host step has run)."""
        shape = self.known.shapes.get(self.tensor)
        return None if shape is None else nbytes(tuple(shape), self.dtype)

    def source(self, state: ExecutionState) -> tuple:
        """Where this execution's value comes from, as a graph is keyed by it."""
        value = state.device_inputs.get(self.tensor)
        if value is not None:
            return "device", self.backend.address(value.buf), value.offset, value.nbytes
        return "host", self.host_value(state).nbytes

    def captured(self, state: ExecutionState | None, source: tuple, staging: np.ndarray | None) -> Callable[[], Any]:
        """The copy a graph records: from the device value's address, or from pinned staging."""
        if source[0] == "device":
            value = state.device_inputs[self.tensor]
            return functools.partial(self.backend.copy, self.buf, value.buf, value.nbytes, 0, value.offset)
        return functools.partial(self.backend.stage_in, self.buf, staging, source[1])

    def moved_bytes(self, state: ExecutionState) -> int | None:
        if self.in_place:
            return 0
        value = state.device_inputs.get(self.tensor)
        return value.nbytes if value is not None else _host_nbytes(state, self.known, self.tensor)


class Download(StepRunner):
    """Tensor t to the host, read after the backend's next synchronize()."""

    def __init__(self, backend: Backend, tensor: int, buf: Any, known: Known, dtype: np.dtype) -> None:
        self.backend, self.tensor, self.buf = backend, tensor, buf
        self.shape, self.dtype = tuple(known.shapes[tensor]), dtype
        self.nbytes = nbytes(self.shape, dtype)

    def __call__(self, state: ExecutionState) -> None:
        state.host[self.tensor] = self.backend.download_async(self.buf, self.shape, self.dtype)

    def captured(self, staging: np.ndarray) -> Callable[[], Any]:
        return functools.partial(self.backend.stage_out, staging, self.buf, self.nbytes)

    def read(self, state: ExecutionState, staging: np.ndarray) -> None:
        """Take the value out of the staging a graph copied it to (after the wait)."""
        state.host[self.tensor] = staging[: self.nbytes].view(self.dtype).reshape(self.shape).copy()

    def moved_bytes(self, state: ExecutionState) -> int | None:
        return self.nbytes


class HostOperation(StepRunner):
    """An operation on the host reference, its outputs checked against the shapes the plan
    assumed for them."""

    def __init__(self, reference: GraphRunner, graph: Subgraph, step: HostStep, known: Known) -> None:
        self.reference, self.step, self.known = reference, step, known
        self.no_data = [graph.operands[t].lifetime in NO_DATA for t in step.inputs]

    def __call__(self, state: ExecutionState) -> None:
        step = self.step
        values = [None if skip else state.lookup(t, self.known) for t, skip in zip(step.inputs, self.no_data)]
        outs = self.reference.run_operation(step.op, values, deadline_ns=state.deadline_ns)
        for t, value, shape in zip(step.outputs, outs, step.shapes):
            if shape is not None and tuple(value.shape) != shape:
                raise ExecutionError(ErrorStatus.GENERAL_FAILURE,
                                     f"operation {step.op}: the plan assumed shape {list(shape)} for operand {t}, "
                                     f"the reference gave {list(value.shape)}")
            state.host[t] = value


def _host_nbytes(state: ExecutionState, known: Known, t: int) -> int:
    value = state.host.get(t)
    if value is None:
        value = known.values.get(t)
    return 0 if value is None else int(value.nbytes)
