"""IBuffer (HAL 1.3): driver-managed device memory with roles, and the device's token table.

A buffer holds one operand value in its backend's memory (host memory on numpy). It is
uninitialized until copyFrom succeeds or an execution writes it as an output; a failed copyFrom
or a failed execution that had it as an output makes it uninitialized again."""
from __future__ import annotations

import itertools
import threading
import weakref
from dataclasses import dataclass

import numpy as np

from ..hal.interfaces import IBuffer
from ..hal.types import ErrorStatus, Operand
from ..backends.base import DeviceValue
from ..memory import Memory, MemoryError_
from ..modelutil import fully_specified, merge_dims, nbytes_of
from ..ops.lib.dtypes import dtype_of, is_tensor


class BufferUsageError(Exception):
    def __init__(self, status: ErrorStatus, reason: str):
        super().__init__(reason)
        self.status = status


@dataclass(frozen=True)
class Role:
    executor: object   # the prepared model's executor (identity)
    io: str          # "input" | "output"
    index: int


class DeviceBuffer(IBuffer):
    """The value lives in one backend allocation (grown when a larger shape is written);
    copyTo / copyFrom move it straight between that allocation and the shared memory."""

    def __init__(self, token: int, operand: Operand, dims: list[int], roles: set[Role], backend):
        self.token = token
        self.operand = operand          # type, scale, zeroPoint, extraParams shared by all roles
        self.dims = list(dims)          # what allocate could deduce (0 = unknown)
        self.roles = roles
        self.backend = backend
        self._value: DeviceValue | None = None
        self._storage = None            # the backend allocation
        self._capacity = 0
        self._lock = threading.Lock()

    @property
    def initialized(self) -> bool:
        return self._value is not None

    @property
    def dtype(self) -> np.dtype:
        return dtype_of(self.operand.type)

    def storage(self, nbytes: int):
        """The backend allocation, grown to at least `nbytes`."""
        if self._storage is None or self._capacity < nbytes:
            self._storage = self.backend.alloc(max(nbytes, 1))
            self._capacity = max(nbytes, 1)
        return self._storage

    # ---- IBuffer ------------------------------------------------------------------------
    def copyTo(self, dst) -> ErrorStatus:
        with self._lock:
            value = self._value
            if value is None:
                return ErrorStatus.GENERAL_FAILURE
            if not isinstance(dst, Memory) or dst.size != value.nbytes:
                return ErrorStatus.INVALID_ARGUMENT
            try:
                dst.verify()  # a file smaller than the memory declares is an invalid memory
                if dst.mapped:
                    self.backend.download(value.buf, dst.array(self.dtype).reshape(value.shape))
                else:  # a pool that could shrink is never mapped (nngpu.memory): pwrite a copy
                    host = np.empty(value.shape, self.dtype)
                    self.backend.download(value.buf, host)
                    dst.write(0, host)
            except MemoryError_:
                return ErrorStatus.INVALID_ARGUMENT
        return ErrorStatus.NONE

    def copyFrom(self, src, dimensions) -> ErrorStatus:
        status = self._copy_from(src, list(dimensions))
        if status != ErrorStatus.NONE:
            self.invalidate()
        return status

    def _copy_from(self, src, dimensions: list[int]) -> ErrorStatus:
        if not isinstance(src, Memory):
            return ErrorStatus.INVALID_ARGUMENT
        if dimensions and (not all(d > 0 for d in dimensions) or merge_dims(self.dims, dimensions) is None):
            return ErrorStatus.INVALID_ARGUMENT
        dims = dimensions or self.dims
        if not fully_specified(self.operand.type, dims):
            return ErrorStatus.INVALID_ARGUMENT
        need = nbytes_of(self.operand.type, dims)
        if src.size != need:
            return ErrorStatus.INVALID_ARGUMENT
        shape = tuple(dims) if is_tensor(self.operand.type) else ()
        try:
            src.verify()
            data = src.read(0, need).view(self.dtype).reshape(shape)
        except MemoryError_:
            return ErrorStatus.INVALID_ARGUMENT
        self.write_from_output(data)
        return ErrorStatus.NONE

    # ---- used by the execution path -----------------------------------------------------
    def check_role(self, executor: object, io: str, index: int) -> None:
        if Role(executor, io, index) not in self.roles:
            raise BufferUsageError(ErrorStatus.INVALID_ARGUMENT,
                                   f"buffer {self.token} has no {io} role {index} for this prepared model")

    def read_for_input(self, request_dims: list[int]) -> DeviceValue:
        with self._lock:
            value = self._value
        if value is None:
            raise BufferUsageError(ErrorStatus.GENERAL_FAILURE, f"buffer {self.token} is used uninitialized")
        if request_dims and list(request_dims) != list(value.shape):
            raise BufferUsageError(ErrorStatus.INVALID_ARGUMENT, f"buffer {self.token} holds {list(value.shape)}")
        return value  # read-only use: kernels never write their inputs

    def can_hold(self, value) -> bool:
        return merge_dims(self.dims, list(value.shape)) is not None

    def write_from_output(self, value: np.ndarray | DeviceValue) -> None:
        """Take an execution's output: a device-side copy of a DeviceValue (in the executor's
        buffers), an upload of a host value."""
        with self._lock:
            if isinstance(value, DeviceValue):
                # on the producing plan's queue, after its kernels; that plan synchronizes before
                # the execution returns, so the buffer is whole before anyone else reads it
                buf = self.storage(value.nbytes)
                value.backend.copy(buf, value.buf, value.nbytes, 0, value.offset)
                self._value = DeviceValue(buf, tuple(value.shape), self.dtype, self.backend)
            else:
                host = np.ascontiguousarray(value, dtype=self.dtype)
                buf = self.storage(host.nbytes)
                self.backend.upload(buf, host)
                self.backend.synchronize()   # whole before a plan reads it on its own queue
                self._value = DeviceValue(buf, tuple(host.shape), self.dtype, self.backend)

    def invalidate(self) -> None:
        with self._lock:
            self._value = None


class BufferTable:
    """The tokens alive on one device: positive, never reused while alive."""

    def __init__(self) -> None:
        # Weak: a token lives as long as the client holds its IBuffer.
        self._buffers: weakref.WeakValueDictionary[int, DeviceBuffer] = weakref.WeakValueDictionary()
        self._next = itertools.count(1)
        self._lock = threading.Lock()

    def add(self, make) -> DeviceBuffer:
        with self._lock:
            token = next(self._next)
            buf = make(token)
            self._buffers[token] = buf
            return buf

    def get(self, token: int) -> DeviceBuffer | None:
        with self._lock:
            return self._buffers.get(token)

    def remove(self, token: int) -> None:
        with self._lock:
            self._buffers.pop(token, None)
