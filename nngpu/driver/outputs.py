"""The one writer of an execution's outputs. The executor hands it every output at once, while a
device plan's are still in its buffers; it checks that each fits its argument, and only then
writes them all: a device-side copy into an IBuffer or a registered pool, a download
straight into a mapped pool, or a write of a host value. Nothing is written when the deadline
has passed, an output conflicts with the request, or one is too small."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from ..backends.base import DeviceValue
from ..hal.types import ErrorStatus, OutputShape, Request
from ..modelutil import merge_dims
from .deadline import passed


def shape_of(value) -> list[int]:
    return [int(d) for d in value.shape]


class OutputWriter:
    """Called with the outputs (runtime/executor.py's Deliver). Afterwards `failure` is
    (status, reason) when it wrote nothing, `insufficient` the output shapes when some region
    was too small (OUTPUT_INSUFFICIENT_SIZE), both None when every output was written."""

    def __init__(self, request: Request, pools: Sequence, deadline_ns: int | None) -> None:
        self.request, self.pools, self.deadline_ns = request, pools, deadline_ns
        self.failure: tuple[ErrorStatus, str] | None = None
        self.insufficient: list[OutputShape] | None = None

    def __call__(self, outputs: list) -> None:
        if passed(self.deadline_ns):
            self.failure = ErrorStatus.MISSED_DEADLINE_TRANSIENT, "the execution finished after its deadline"
            return
        self.failure = self._check(outputs)
        if self.failure is None and self.insufficient is None:
            for arg, value in zip(self.request.outputs, outputs):
                if not arg.hasNoValue:
                    self._write(self.pools[arg.location.poolIndex], arg.location.offset, value)

    def _check(self, outputs: list) -> tuple[ErrorStatus, str] | None:
        shapes = [OutputShape(shape_of(v), True) for v in outputs]
        for k, (arg, value) in enumerate(zip(self.request.outputs, outputs)):
            if arg.dimensions and merge_dims(arg.dimensions, shapes[k].dimensions) is None:
                return (ErrorStatus.INVALID_ARGUMENT,
                        f"output {k}: shape {shapes[k].dimensions} conflicts with request {arg.dimensions}")
            if arg.hasNoValue:
                continue
            pool = self.pools[arg.location.poolIndex]
            if pool.buffer is not None:
                if not pool.buffer.can_hold(value):  # known only now: not the request's fault
                    return (ErrorStatus.GENERAL_FAILURE,
                            f"output {k}: shape {shapes[k].dimensions} does not fit the device buffer's {pool.buffer.dims}")
            elif arg.location.length < value.nbytes:
                shapes[k].isSufficient = False
        if not all(s.isSufficient for s in shapes):
            self.insufficient = shapes
        return None

    @staticmethod
    def _write(pool, offset: int, value) -> None:
        if pool.buffer is not None:
            pool.buffer.write_from_output(value)
            return
        if isinstance(value, DeviceValue):
            reg = pool.registered
            if reg is not None and reg.backend.shares_memory(value.backend):   # device-side, into its registration
                value.backend.copy(reg.buf, value.buf, value.nbytes, reg.offset + offset, value.offset)
                return
            if pool.memory.mapped:   # straight into the mapping; done at the executor's one wait
                value.backend.download_into(value.buf, pool.memory.array(np.uint8, offset, value.nbytes), value.offset)
                return
            value = value.to_host()
        pool.memory.write(offset, np.ascontiguousarray(value).reshape(-1).view(np.uint8))
