"""Shared-memory pools: the hidl_memory equivalent.

A Memory is a (name, size, fd) triple like hidl_memory. "ashmem" memories are anonymous memfd
regions (another process can map the same fd, e.g. after receiving it over a Unix socket);
"mmap_fd" memories map a file from an offset. The mapping is made once per Memory and cached.
"""
from __future__ import annotations

import mmap
import os
import threading

import numpy as np

__all__ = ["Memory", "allocate_shared", "memory_from_file", "MemoryError_"]


class MemoryError_(Exception):
    """A pool that cannot be mapped or a region outside it."""


def close_fds(fds) -> None:
    """Close fds of our own, each at most once; one already gone is no error."""
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


class Memory:
    def __init__(self, name: str, size: int, fd: int, offset: int = 0, *, owns_fd: bool = True):
        self.name = name
        self.size = int(size)
        self.fd = fd
        self.offset = int(offset)
        self._owns_fd = owns_fd
        self._map: mmap.mmap | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Memory({self.name!r}, size={self.size}, fd={self.fd})"

    def map(self) -> memoryview:
        """A writable view of the whole pool (mapped once, then cached)."""
        with self._lock:
            if self._map is None:
                if self.fd < 0:
                    raise MemoryError_("memory is closed")
                if self.size == 0:
                    return memoryview(bytearray(0))
                page = mmap.ALLOCATIONGRANULARITY
                base = self.offset - self.offset % page
                length = self.size + self.offset - base
                try:
                    try:
                        self._map = mmap.mmap(self.fd, length, offset=base)
                    except PermissionError:  # a read-only fd: map it read-only
                        self._map = mmap.mmap(self.fd, length, offset=base, access=mmap.ACCESS_READ)
                except (OSError, ValueError) as e:
                    raise MemoryError_(f"cannot map {self!r}: {e}") from e
                self._skip = self.offset - base
            return memoryview(self._map)[self._skip : self._skip + self.size]

    def view(self, offset: int, length: int) -> memoryview:
        """A bounds-checked byte view [offset, offset + length) of the pool."""
        if offset < 0 or length < 0 or offset + length > self.size:
            raise MemoryError_(f"region [{offset}, {offset + length}) outside pool of {self.size} bytes")
        return self.map()[offset : offset + length]

    def array(self, dtype, offset: int = 0, count: int | None = None) -> np.ndarray:
        dtype = np.dtype(dtype)
        if count is None:
            count = (self.size - offset) // dtype.itemsize
        return np.frombuffer(self.view(offset, count * dtype.itemsize), dtype=dtype)

    def close(self) -> None:
        with self._lock:
            if self._map is not None:
                try:
                    self._map.close()
                except BufferError:
                    pass  # a view is still alive; the mapping goes with it
                self._map = None
            if self._owns_fd and self.fd >= 0:
                os.close(self.fd)
            self.fd = -1

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


def allocate_shared(size: int) -> Memory:
    """A new zero-filled "ashmem" pool of `size` bytes backed by memfd_create."""
    if size < 0:
        raise ValueError("size must be >= 0")
    fd = os.memfd_create("nngpu-pool", os.MFD_CLOEXEC)
    os.ftruncate(fd, size)
    return Memory("ashmem", size, fd)


def memory_from_fd(name: str, size: int, fd: int, offset: int = 0) -> Memory:
    """Wrap an fd received from another process (the Memory takes ownership of it)."""
    return Memory(name, size, fd, offset)


def memory_from_file(path: str, size: int | None = None, offset: int = 0, writable: bool = True) -> Memory:
    """An "mmap_fd" memory over `path` starting at `offset`."""
    fd = os.open(path, os.O_RDWR if writable else os.O_RDONLY)
    if size is None:
        size = os.fstat(fd).st_size - offset
    return Memory("mmap_fd", size, fd, offset)
