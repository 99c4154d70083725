"""IBuffer (HAL 1.3): driver-managed device memory with roles, and the device's token table.

A buffer holds one operand value on the device (a numpy array on the reference backend). It is
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
from ..memory import Memory, MemoryError_
from ..modelutil import fully_specified, merge_dims, nbytes_of
from ..ops.dtypes import dtype_of, is_tensor


class BufferUsageError(Exception):
    def __init__(self, status: ErrorStatus, reason: str):
        super().__init__(reason)
        self.status = status


@dataclass(frozen=True)
class Role:
    runner: object   # the prepared model's GraphRunner (identity)
    io: str          # "input" | "output"
    index: int


class DeviceBuffer(IBuffer):
    def __init__(self, token: int, operand: Operand, dims: list[int], roles: set[Role]):
        self.token = token
        self.operand = operand          # type, scale, zeroPoint, extraParams shared by all roles
        self.dims = list(dims)          # what allocate could deduce (0 = unknown)
        self.roles = roles
        self._data: np.ndarray | None = None
        self._lock = threading.Lock()

    @property
    def initialized(self) -> bool:
        return self._data is not None

    @property
    def dtype(self) -> np.dtype:
        return dtype_of(self.operand.type)

    # ---- IBuffer ------------------------------------------------------------------------
    def copyTo(self, dst) -> ErrorStatus:
        with self._lock:
            data = self._data
        if data is None:
            return ErrorStatus.GENERAL_FAILURE
        if not isinstance(dst, Memory) or dst.size != data.nbytes:
            return ErrorStatus.INVALID_ARGUMENT
        try:
            dst.view(0, data.nbytes)[:] = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
        except MemoryError_:
            return ErrorStatus.INVALID_ARGUMENT
        return ErrorStatus.NONE

    def copyFrom(self, src, dimensions) -> ErrorStatus:
        status = self._copy_from(src, list(dimensions))
        if status != ErrorStatus.NONE:
            with self._lock:
                self._data = None
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
        try:
            data = np.frombuffer(src.view(0, need), dtype=self.dtype).copy()
        except MemoryError_:
            return ErrorStatus.INVALID_ARGUMENT
        with self._lock:
            self._data = data.reshape(dims) if is_tensor(self.operand.type) else data.reshape(())
        return ErrorStatus.NONE

    # ---- used by the execution path -----------------------------------------------------
    def check_role(self, runner: object, io: str, index: int) -> None:
        if Role(runner, io, index) not in self.roles:
            raise BufferUsageError(ErrorStatus.INVALID_ARGUMENT,
                                   f"buffer {self.token} has no {io} role {index} for this prepared model")

    def read_for_input(self, request_dims: list[int]) -> np.ndarray:
        with self._lock:
            data = self._data
        if data is None:
            raise BufferUsageError(ErrorStatus.GENERAL_FAILURE, f"buffer {self.token} is used uninitialized")
        if request_dims and list(request_dims) != list(data.shape):
            raise BufferUsageError(ErrorStatus.INVALID_ARGUMENT, f"buffer {self.token} holds {list(data.shape)}")
        return data  # read-only use: kernels never write their inputs

    def can_hold(self, value: np.ndarray) -> bool:
        return merge_dims(self.dims, list(value.shape)) is not None

    def write_from_output(self, value: np.ndarray) -> None:
        with self._lock:
            self._data = np.array(value, dtype=self.dtype, copy=True)

    def invalidate(self) -> None:
        with self._lock:
            self._data = None


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
