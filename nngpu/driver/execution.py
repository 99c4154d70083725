"""One execution end to end: validate the request, read inputs from pools, run, write outputs.

Every entry point (executeSynchronously, execute*, the burst worker) calls `run` or `begin`;
executeFenced calls `check` and reads the inputs once its fences have signalled. None of them
raises, and none writes into a pool before every output is known to fit (outputs.py)."""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, replace
from typing import Any, Callable

import numpy as np

from ..backends.base import DeviceValue
from ..hal.types import (
    ErrorStatus,
    LoopTimeoutDurationNs,
    MeasureTiming,
    MemoryPool,
    OptionalTimePoint,
    OutputShape,
    Request,
    Timing,
    UINT64_MAX,
)
from ..memory import MemoryError_
from ..modelutil import fully_specified, merge_dims, nbytes_of
from ..ops.lib.dtypes import dtype_of, is_tensor
from ..validation import ValidationError, validate_request
from .buffer import BufferUsageError
from .deadline import deadline_ns, passed
from .outputs import OutputWriter, shape_of
from ..runtime.executor import Executor
from ..runtime.interpreter import ExecutionError

log = logging.getLogger("nngpu.execution")

NO_TIMING = (UINT64_MAX, UINT64_MAX)


@dataclass
class Result:
    status: ErrorStatus
    output_shapes: list[OutputShape]
    timing: Timing
    reason: str = ""  # why it failed, for logs and the conformance runner

    def as_tuple(self) -> tuple[ErrorStatus, list[OutputShape], Timing]:
        return self.status, self.output_shapes, self.timing


def device_lost(executor: Executor) -> str | None:
    """The sticky fault that lost the executor's device, or None (a numpy plan has no device)."""
    backend = getattr(executor, "backend", None)
    return None if backend is None else backend.health.lost


def _fail(status: ErrorStatus, reason: str) -> Result:
    log.info("execution rejected: %s: %s", status.name, reason)
    return Result(status, [], Timing(), reason)


def _rejected(e: Exception) -> Result:
    """The Result of a request that could not be checked or read (called in its except block)."""
    if isinstance(e, BufferUsageError):
        return _fail(e.status, str(e))
    if isinstance(e, (ValidationError, MemoryError_)):
        return _fail(ErrorStatus.INVALID_ARGUMENT, str(e))
    log.exception("request could not be read")  # malformed objects of any kind are the caller's error
    return _fail(ErrorStatus.INVALID_ARGUMENT, f"{type(e).__name__}: {e}")


class PoolView:
    """Byte access to one request pool: a shared Memory, or (1.3) a device buffer token."""

    def __init__(self, pool: Any, resolve_token: Callable[[int], Any] | None):
        self.buffer = None
        self.memory = None
        # A burst slot's backend registration of the whole memory (uint8): its regions are read
        # and written device-side, with no host copy (nngpu.driver.burst_executor).
        self.registered: DeviceValue | None = None
        if isinstance(pool, MemoryPool):
            if pool.token is not None:
                self.buffer = resolve_token(pool.token) if resolve_token else None
                if self.buffer is None:
                    raise ValidationError(f"unknown buffer token {pool.token}")
                return
            pool = pool.hidlMemory
        if pool is None or not hasattr(pool, "read"):
            raise ValidationError("pool is not a memory")
        self.memory = pool

    def region(self, offset: int, shape: tuple[int, ...], dtype: np.dtype) -> DeviceValue:
        """Bytes [offset, ...) of the registered memory as a value of `shape`."""
        reg = self.registered
        return DeviceValue(reg.buf, shape, dtype, reg.backend, reg.offset + offset)


def _pools(request: Request, resolve_token) -> list[PoolView]:
    return [PoolView(p, resolve_token) for p in request.pools]


def _check_token_argument(buffer, arg, executor, io: str, k: int) -> None:
    if arg.location.offset != 0 or arg.location.length != 0:
        raise ValidationError(f"{io} {k}: a device buffer argument must have offset 0 and length 0")
    if arg.dimensions and merge_dims(buffer.dims, arg.dimensions) is None:
        raise ValidationError(f"{io} {k}: dimensions {list(arg.dimensions)} conflict with the device buffer's "
                              f"{buffer.dims}")
    buffer.check_role(executor, io, k)


def _check_token_sharing(request: Request, pools: list[PoolView]) -> None:
    """A device buffer written by an output is that request's only use of it (MemoryDomainTests:
    several inputs may read one buffer, but it cannot be an input and an output, or two outputs)."""
    uses: dict[int, list[str]] = {}
    for io, args in (("input", request.inputs), ("output", request.outputs)):
        for k, arg in enumerate(args):
            buffer = None if arg.hasNoValue else pools[arg.location.poolIndex].buffer
            if buffer is not None:
                uses.setdefault(id(buffer), []).append(f"{io} {k}")
    for names in uses.values():
        if len(names) > 1 and any(n.startswith("output") for n in names):
            raise ValidationError(f"one device buffer is used by {' and '.join(names)}")


def _check_inputs(executor: Executor, request: Request, pools: list[PoolView]) -> None:
    """Every input argument fits its operand; a device buffer's contents are checked when read."""
    model = executor.model
    for k, (arg, idx) in enumerate(zip(request.inputs, model.main.inputIndexes)):
        if arg.hasNoValue:
            continue
        pool = pools[arg.location.poolIndex]
        if pool.buffer is not None:
            _check_token_argument(pool.buffer, arg, executor, "input", k)
            continue
        operand = model.main.operands[idx]
        dims = merge_dims(operand.dimensions, arg.dimensions)
        if dims is None or not fully_specified(operand.type, dims):
            raise ValidationError(f"input {k}: dimensions {arg.dimensions} do not complete {operand.dimensions}")
        need = nbytes_of(operand.type, dims)
        if arg.location.length < need:
            raise ValidationError(f"input {k}: {arg.location.length} bytes given, {need} needed")


def _read_inputs(executor: Executor, request: Request, pools: list[PoolView]) -> list[np.ndarray | None]:
    """The input values of a request `_check_inputs` passed."""
    model = executor.model
    values: list[np.ndarray | None] = []
    for arg, idx in zip(request.inputs, model.main.inputIndexes):
        if arg.hasNoValue:
            values.append(None)
            continue
        pool = pools[arg.location.poolIndex]
        if pool.buffer is not None:
            values.append(pool.buffer.read_for_input(arg.dimensions))
            continue
        operand = model.main.operands[idx]
        dims = merge_dims(operand.dimensions, arg.dimensions)
        if pool.registered is not None:  # copied device-side: the kernels never alias it either
            values.append(pool.region(arg.location.offset, tuple(dims) if is_tensor(operand.type) else (),
                                      dtype_of(operand.type)))
            continue
        # A copy (pread where the pool is not sealed): the kernels never alias a caller's input pool.
        arr = pool.memory.read(arg.location.offset, nbytes_of(operand.type, dims)).view(dtype_of(operand.type))
        values.append(arr.reshape(dims) if is_tensor(operand.type) else arr.reshape(()))
    return values


@dataclass
class Checked:
    """A request that passed validation against its model, nothing read yet: a fenced execution
    reads its inputs only once its fences have signalled."""

    executor: Executor
    request: Request
    measure: MeasureTiming
    pools: list[PoolView]
    t0: int
    loop_timeout_ns: int = int(LoopTimeoutDurationNs.DEFAULT)
    deadline_ns: int | None = None      # the request's deadline (time.monotonic_ns), if any

    def again(self) -> "Checked":
        """This request, checked once, for another execution (a burst repeating a packet)."""
        return replace(self, t0=time.perf_counter_ns())

    def missed_deadline(self) -> Result | None:
        if passed(self.deadline_ns):
            return _fail(ErrorStatus.MISSED_DEADLINE_PERSISTENT, "the deadline passed before the execution began")
        return None

    def unspecified_output(self) -> str | None:
        """Why an output's dimensions are not fully known from the model, the request and its
        device buffer (executeFenced needs them known), or None."""
        model = self.executor.model
        for k, (arg, idx) in enumerate(zip(self.request.outputs, model.main.outputIndexes)):
            operand = model.main.operands[idx]
            dims = merge_dims(operand.dimensions, arg.dimensions)
            buffer = None if arg.hasNoValue else self.pools[arg.location.poolIndex].buffer
            if buffer is not None and dims is not None:
                dims = merge_dims(buffer.dims, dims)
            if dims is None or not fully_specified(operand.type, dims):
                return f"output {k}: dimensions {dims if dims is not None else arg.dimensions} are not fully specified"
        return None

    def run(self) -> Result:
        """This request executed here and now: its Result (a missed deadline or a failed read
        included). Never raises."""
        pending = self.missed_deadline() or self.read()
        return pending if isinstance(pending, Result) else pending.finish()

    def read(self) -> Pending | Result:
        """Read the inputs: a Pending to finish, or the failure Result."""
        try:
            return Pending(self, _read_inputs(self.executor, self.request, self.pools))
        except Exception as e:
            return _rejected(e)

    def fail(self, status: ErrorStatus, reason: str) -> Result:
        """The Result of an execution that failed before it ran."""
        self.invalidate_outputs()
        return _fail(status, reason)

    def invalidate_outputs(self) -> None:
        """A failed execution leaves its output buffers uninitialized."""
        for arg in self.request.outputs:
            pool = None if arg.hasNoValue else self.pools[arg.location.poolIndex]
            if pool is not None and pool.buffer is not None:
                pool.buffer.invalidate()


@dataclass
class Pending:
    """A request that passed validation, its inputs read: ready to run on any thread."""

    checked: Checked
    inputs: list[np.ndarray | None]

    def finish(self) -> Result:
        result = self._finish()
        if result.status != ErrorStatus.NONE:
            self.checked.invalidate_outputs()
        return result

    def _finish(self) -> Result:
        c = self.checked
        try:
            t1 = time.perf_counter_ns()
            missed = c.missed_deadline()  # an async execution that waited past its deadline
            if missed is not None:
                return missed
            deadline = time.monotonic_ns() + c.loop_timeout_ns
            if c.deadline_ns is not None:  # a WHILE loop also stops at the request's deadline
                deadline = min(deadline, c.deadline_ns)
            writer = OutputWriter(c.request, c.pools, c.deadline_ns)
            outputs = c.executor.execute(self.inputs, writer, deadline)
            t2 = time.perf_counter_ns()
        except ExecutionError as e:
            return _fail(e.status, str(e))
        except (ValidationError, MemoryError_) as e:
            return _fail(ErrorStatus.INVALID_ARGUMENT, str(e))
        except Exception as e:
            backend = getattr(c.executor, "backend", None)
            if backend is not None and backend.note_fault(e):
                log.error("the device is lost: %s", e)
                return _fail(ErrorStatus.DEVICE_UNAVAILABLE, f"the device is lost: {type(e).__name__}: {e}")
            log.exception("execution failed")
            return _fail(ErrorStatus.GENERAL_FAILURE, f"{type(e).__name__}: {e}")
        if writer.failure is not None:
            return _fail(*writer.failure)
        if writer.insufficient is not None:
            return Result(ErrorStatus.OUTPUT_INSUFFICIENT_SIZE, writer.insufficient, Timing())
        shapes = [OutputShape(shape_of(v), True) for v in outputs]
        timing = Timing()
        if c.measure == MeasureTiming.YES:
            t3 = time.perf_counter_ns()
            timing = Timing(timeOnDevice=(t2 - t1) // 1000, timeInDriver=(t3 - c.t0) // 1000)
        return Result(ErrorStatus.NONE, shapes, timing)


Register = Callable[[Any], "DeviceValue | None"]   # a memory's registration with the plan's backend


def check(executor: Executor, request: Request, measure: MeasureTiming = MeasureTiming.NO,
          resolve_token: Callable[[int], Any] | None = None, loop_timeout_ns: int | None = None,
          deadline: OptionalTimePoint | None = None, register: Register | None = None) -> Checked | Result:
    """Validate `request` and the execution's arguments without reading any input (whether the
    deadline has passed is the caller's next question: `Checked.missed_deadline`). With
    `register` (a device plan's PoolRegistry), each memory pool is read and written through its
    registration with the backend, on the device."""
    t0 = time.perf_counter_ns()
    lost = device_lost(executor)
    if lost is not None:
        return _fail(ErrorStatus.DEVICE_UNAVAILABLE, f"the device is lost ({lost}); a new Device recovers")
    try:
        if measure not in (MeasureTiming.NO, MeasureTiming.YES):
            raise ValidationError(f"bad MeasureTiming {measure}")
        if loop_timeout_ns is None:
            loop_timeout_ns = int(LoopTimeoutDurationNs.DEFAULT)
        elif isinstance(loop_timeout_ns, bool) or not isinstance(loop_timeout_ns, int) or \
                not 0 <= loop_timeout_ns <= LoopTimeoutDurationNs.MAXIMUM:
            raise ValidationError(f"loop timeout {loop_timeout_ns!r} ns outside [0, MAXIMUM]")
        limit = deadline_ns(deadline)
        validate_request(request, executor.model)
        pools = _pools(request, resolve_token)
        for k, arg in enumerate(request.outputs):
            pool = pools[arg.location.poolIndex] if not arg.hasNoValue else None
            if pool is not None and pool.buffer is not None:
                _check_token_argument(pool.buffer, arg, executor, "output", k)
        _check_token_sharing(request, pools)
        _check_inputs(executor, request, pools)
        if register is not None:
            for pool in pools:
                if pool.memory is not None:
                    pool.registered = register(pool.memory)
    except Exception as e:
        return _rejected(e)
    return Checked(executor, request, measure, pools, t0, loop_timeout_ns, limit)


def begin(executor: Executor, request: Request, measure: MeasureTiming = MeasureTiming.NO,
          resolve_token: Callable[[int], Any] | None = None, loop_timeout_ns: int | None = None,
          deadline: OptionalTimePoint | None = None, register: Register | None = None) -> Pending | Result:
    """Validate `request` and read its inputs: a Pending to finish, or the failure Result."""
    checked = check(executor, request, measure, resolve_token, loop_timeout_ns, deadline, register)
    if isinstance(checked, Result):
        return checked
    return checked.missed_deadline() or checked.read()


def run(executor: Executor, request: Request, measure: MeasureTiming = MeasureTiming.NO,
        resolve_token: Callable[[int], Any] | None = None, loop_timeout_ns: int | None = None,
        deadline: OptionalTimePoint | None = None, register: Register | None = None) -> Result:
    """Execute `request` on a prepared model's executor. Never raises."""
    checked = check(executor, request, measure, resolve_token, loop_timeout_ns, deadline, register)
    return checked if isinstance(checked, Result) else checked.run()
