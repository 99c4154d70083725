"""The numpy backend's executor: the reference interpreter precompiled (compiler/numpy_bind.py
binds it, once per set of input shapes, at prepare when the model gives them all). Bound
operations write into a buffer set planned for them; every other operation runs its reference as
GraphRunner runs it (a fresh OpContext, the outputs cast and checked). IF / WHILE bodies run on
the GraphRunner. An output that is not in its planned buffer yet views the buffer set (a
reference step or kernel returning a view of its input) is copied out: nothing outlives the
bytes it lives in.

Executions of one prepared model may run concurrently: each takes a buffer set of its own from
a free list, and the graph's outputs are copied out of it."""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import numpy as np

from .. import profiling
from ..backends.base import DeviceValue
from ..compiler.steps import Bound, BoundStep, Shapes
from ..hal.types import ErrorStatus, Operand
from ..ops.lib.dtypes import is_tensor, nbytes
from ..ops.registry import OpError
from .executor import Deliver
from .interpreter import ExecutionError, GraphRunner

log = logging.getLogger("nngpu.numpy_plan")

MAX_SHAPE_SETS = 8  # bound plans kept per model, one per set of input shapes seen
ALIGN = 64          # buffer offsets: a cache line, which suits every dtype

Bind = Callable[[GraphRunner, Mapping[int, tuple[int, ...]]], Bound]


@dataclass
class Buffers:
    """One execution's buffer set: the bytes, and each step's outputs viewed in them."""

    arena: np.ndarray
    outs: list[list[np.ndarray | None]]


class _Sets:
    """A Bound's buffer sets: taken one per execution, given back after."""

    def __init__(self, bound: Bound) -> None:
        self.bound = bound
        self.free: list[Buffers] = []

    def take(self) -> Buffers:
        try:
            return self.free.pop()   # atomic: concurrent executions never share a set
        except IndexError:
            b = self.bound
            raw = np.empty(b.nbytes + ALIGN, np.uint8)
            shift = -raw.ctypes.data % ALIGN
            arena = raw[shift: shift + b.nbytes]
            return Buffers(arena, [[None if at is None else
                                    arena[at: at + nbytes(s, d)].view(d).reshape(s)
                                    for at, s, d in zip(offsets, st.shapes, st.dtypes)]
                                   for st, offsets in zip(b.steps, b.layout)])

def _owned(v: np.ndarray, arena: np.ndarray) -> np.ndarray:
    """v, or a copy of it where it views the buffer set outside the planned lifetimes (a view of
    an input), whose bytes a later output may take."""
    return v.copy() if np.may_share_memory(v, arena) else v


def _declared_shape(operand: Operand) -> tuple[int, ...] | None:
    """The shape every execution's value has, or None when the model leaves it open."""
    if not is_tensor(operand.type):
        return ()
    dims = tuple(operand.dimensions)
    return dims if dims and all(dims) else None


class NumpyPlan:
    """A prepared model's executor on the numpy backend (runtime/executor.py)."""

    def __init__(self, runner: GraphRunner, bind: Bind):
        self.runner, self._bind = runner, bind
        self.model = runner.model
        self._bound: dict[Shapes, _Sets] = {}
        self._lock = threading.Lock()
        declared = [_declared_shape(self.model.main.operands[i]) for i in self.model.main.inputIndexes]
        if all(s is not None for s in declared):  # all fully specified: bind now, at prepare
            try:
                self._get(tuple(declared))
            except Exception:  # a shape function bug: the executions report it, prepare succeeds as before
                log.exception("binding the numpy plan failed")

    def placement(self) -> tuple[int, int]:
        return 0, len(self.model.main.operations)

    def launches(self) -> int:
        return 0

    def _get(self, key: Shapes) -> _Sets:
        sets = self._bound.get(key)
        if sets is None:
            with self._lock:
                sets = self._bound.get(key)
                if sets is None:
                    inputs = self.model.main.inputIndexes
                    sets = _Sets(self._bind(self.runner, {i: s for i, s in zip(inputs, key) if s is not None}))
                    if len(self._bound) >= MAX_SHAPE_SETS:
                        self._bound.pop(next(iter(self._bound)))
                    self._bound[key] = sets
        return sets

    def bounds(self) -> list[Bound]:
        """The bound steps of each set of input shapes seen."""
        return [sets.bound for sets in list(self._bound.values())]

    def execute(self, inputs: Sequence, deliver: Deliver | None = None, deadline_ns: int | None = None) -> list[np.ndarray]:
        """The Executor contract: device values are read to the host, outputs are host arrays."""
        with profiling.execution():
            host = [v.to_host() if isinstance(v, DeviceValue) else v for v in inputs]
            outputs = self.run(host, deadline_ns)
            if deliver is not None:
                deliver(outputs)
            return outputs

    def run(self, inputs: Sequence[np.ndarray | None], deadline_ns: int | None = None) -> list[np.ndarray]:
        """The main graph's outputs for these input values (None: omitted)."""
        main = self.model.main
        sets = self._get(tuple(None if v is None else tuple(v.shape) for v in inputs))
        bound = sets.bound
        values = list(bound.values)
        for idx, v in zip(main.inputIndexes, inputs):
            values[idx] = v
        buffers = sets.take()
        try:
            with np.errstate(all="ignore"):
                self._run_steps(bound.steps, buffers, values, deadline_ns)
            # copies: the buffers go back to the free list, for the next execution to overwrite
            return [np.array(values[i]) for i in main.outputIndexes]
        finally:
            sets.free.append(buffers)

    def _run_steps(self, steps: list[BoundStep], buffers: Buffers, values: list, deadline_ns: int | None) -> None:
        prof = profiling.current
        arena = buffers.arena
        for step, outs in zip(steps, buffers.outs):
            start = prof.now() if prof else 0
            ins = [values[i] for i in step.inputs]
            if step.kernel is not None:
                try:
                    got = step.kernel(ins, outs)
                except OpError as e:
                    raise ExecutionError(ErrorStatus(e.status or ErrorStatus.GENERAL_FAILURE),
                                         f"operation {step.k} ({self._name(step)}): {e}") from e
                except Exception as e:  # a kernel bug must not escape a HAL method
                    log.exception("operation %d (%s): bound kernel raised", step.k, self._name(step))
                    raise ExecutionError(ErrorStatus.GENERAL_FAILURE,
                                         f"operation {step.k} ({self._name(step)}): {type(e).__name__}: {e}") from e
                for j, (v, planned) in enumerate(zip(got, outs)):
                    if v is not planned and not (j == 0 and step.view):
                        values[step.outputs[j]] = _owned(v, arena)
                    else:
                        values[step.outputs[j]] = v
            else:
                for i, v in zip(step.outputs, self._reference(step, ins, deadline_ns)):
                    values[i] = _owned(v, arena)
            if prof:
                prof.operation(self._name(step), step.k, start)

    def _name(self, step: BoundStep) -> str:
        return self.model.main.operations[step.k].type.name

    def _reference(self, step: BoundStep, ins: list, deadline_ns: int | None) -> list[np.ndarray]:
        """The reference's outputs, cast and checked only where they differ from the static
        shape and type (which bound consumers rely on)."""
        outs = self.runner.call_reference(step.k, ins, 0, deadline_ns)
        checked = []
        for idx, v, shape, dtype in zip(step.outputs, outs, step.shapes, step.dtypes):
            if not (isinstance(v, np.ndarray) and v.dtype == dtype and v.shape == shape):
                v = GraphRunner.conform(step.k, self.model.main, idx, v)
                if shape is not None and v.shape != shape:
                    log.error("operation %d: shape function gave %s, the reference %s", step.k, shape, v.shape)
                    raise ExecutionError(ErrorStatus.GENERAL_FAILURE,
                                         f"operation {step.k}: output operand {idx} has shape {list(v.shape)}, "
                                         f"expected {list(shape)}")
            checked.append(v)
        return checked
