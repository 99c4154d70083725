"""Shared-memory pools: the hidl_memory equivalent.

A Memory is a (name, size, fd) triple like hidl_memory. "ashmem" memories are anonymous memfd
regions (another process can map the same fd, e.g. after receiving it over a Unix socket);
"mmap_fd" memories are a file from an offset.

Shrinking pools (issue 10). Touching a mapped page past the end of a file that someone has
truncated raises SIGBUS, which kills the whole driver process and every client it serves. So a
Memory is accessed in one of two ways, chosen once when it is made:

- Mapped (the hot path: one cached mapping per Memory, views without copies, and burst slots
  register the mapping with the backend): only when the fd is a memfd sealed with F_SEAL_SHRINK
  and already holds [offset, offset + size). Seals can never be removed, so after that one
  check no client can make a mapped page disappear (a hole punched with fallocate reads back
  as zeros, it does not fault). Pools nngpu creates (`allocate_shared`) are
  sealed with F_SEAL_SHRINK | F_SEAL_GROW, so they are always mapped.
- Unmapped, for everything else (unsealed memfds from clients, mmap_fd memories of regular
  files, which cannot be sealed and which anyone with write access can truncate): `read` and
  `write` use pread/pwrite, never a mapping. A shrink then shows up as a short read (or, before
  a write, as a size below the region: checked with fstat, since pwrite past the end would grow
  the file back) and raises MemoryError_: executions (sync, async, burst) and IBuffer
  copyTo/copyFrom answer INVALID_ARGUMENT, an asynchronous prepare whose weights pool shrank
  GENERAL_FAILURE; the driver never faults. That fstat check races with a truncate, but the
  race is harmless: pwrite cannot fault, at worst it re-grows the client's own file.
  `map` / `view` / `array` refuse an unmapped Memory (MemoryError_), so no code path can fault.

Lying sizes (issue 25). A Memory's declared size is the client's word; the file may hold less.
`Memory.verify` compares the two (fstat, plus the offset of a file memory) and raises
MemoryError_ for a memory that declares more than its fd holds, or a size or offset beyond what
a file can address (off_t: below 2^63), checked before any arithmetic on them. Each request's
validation calls it for every pool (sync, async, fenced, a burst's slots, and so `nngpu serve`),
and so do IBuffer copyTo/copyFrom; all answer INVALID_ARGUMENT. A sealed, mapped memory was
checked when it was made and cannot shrink, so it costs no syscall; an unsealed one costs one
fstat per request (about 4 us here). A memory that shrinks after that check is caught by
`read` and `write` as above.

Unsealed memories are read, not refused, because mmap_fd files can never carry seals and most
clients do not seal their memfds; refusing them would turn working clients away. The cost is
small: an execution copies its inputs out of a pool anyway (pread is that one copy) and writes
its outputs with one copy either way; what an unmapped pool loses is only the zero-copy burst
registration (bench/test_bench_pools.py: the same time for a 12 kB pool, about 1.2x for 3 MB).
FMQ regions are the exception: a queue lives in its mapping, so nngpu.burst.fmq
refuses to attach an unsealed one.
"""
from __future__ import annotations

import fcntl
import mmap
import os
import threading

import numpy as np

__all__ = ["Memory", "allocate_shared", "memory_from_fd", "memory_from_file", "sealed_memfd", "MemoryError_"]


class MemoryError_(Exception):
    """A pool that cannot be mapped, a region outside it, or a pool that shrank under us."""


_SEALS = fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW  # what nngpu's own pools are sealed with
OFF_MAX = (1 << 63) - 1  # off_t: no file holds a byte at or past this offset


def addressable(offset: int, size: int) -> bool:
    """Whether [offset, offset + size) can lie in a file at all: each bound is compared before
    they are added (a hidl_memory's size is a uint64; no platform maps 2^64 bytes)."""
    return 0 <= offset <= OFF_MAX and 0 <= size <= OFF_MAX - offset


def close_fds(fds) -> None:
    """Close fds of our own, each at most once; one already gone is no error."""
    for fd in fds:
        try:
            os.close(fd)
        except OSError:
            pass


def shrink_sealed(fd: int, end: int) -> bool:
    """Whether `fd` is sealed against shrinking and holds at least `end` bytes: then no one can
    make a mapping of [0, end) fault. Regular files and unsealed memfds answer False."""
    try:
        sealed = fcntl.fcntl(fd, fcntl.F_GET_SEALS) & fcntl.F_SEAL_SHRINK
        return bool(sealed) and os.fstat(fd).st_size >= end
    except OSError:  # EINVAL: not a file that takes seals; EBADF: no file at all
        return False


def sealed_memfd(name: str, size: int) -> int:
    """A new zero-filled memfd of `size` bytes that nobody can shrink or grow."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    try:
        os.ftruncate(fd, size)
        fcntl.fcntl(fd, fcntl.F_ADD_SEALS, _SEALS)
    except OSError:
        os.close(fd)
        raise
    return fd


class Memory:
    def __init__(self, name: str, size: int, fd: int, offset: int = 0, *, owns_fd: bool = True):
        self.name = name
        self.size = int(size)
        self.fd = fd
        self.offset = int(offset)
        self._owns_fd = owns_fd
        self._map: mmap.mmap | None = None
        self._lock = threading.Lock()
        # Mapped access only where no one can truncate the pages away (module docstring).
        self.mapped = addressable(self.offset, self.size) and shrink_sealed(fd, self.offset + self.size)

    def __repr__(self) -> str:
        return f"Memory({self.name!r}, size={self.size}, fd={self.fd})"

    def verify(self) -> None:
        """MemoryError_ unless the fd now holds all [offset, offset + size) the memory declares."""
        if not addressable(self.offset, self.size):
            raise MemoryError_(f"{self!r} at offset {self.offset} is beyond what a file can hold")
        if self.mapped:  # sealed against shrinking, and it held the region when it was made
            return
        try:
            held = os.fstat(self._fd()).st_size
        except OSError as e:
            raise MemoryError_(f"cannot stat {self!r}: {e}") from e
        if held < self.offset + self.size:
            raise MemoryError_(f"{self!r} at offset {self.offset} declares more than its file's {held} bytes")

    def map(self) -> memoryview:
        """A writable view of the whole pool (mapped once, then cached); sealed pools only."""
        with self._lock:
            if self._map is None:
                if self.fd < 0:
                    raise MemoryError_("memory is closed")
                if not self.mapped:
                    raise MemoryError_(f"{self!r} is not sealed against shrinking: it is read, never mapped")
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

    def _check(self, offset: int, length: int) -> None:
        if offset < 0 or length < 0 or offset + length > self.size:
            raise MemoryError_(f"region [{offset}, {offset + length}) outside pool of {self.size} bytes")

    def view(self, offset: int, length: int) -> memoryview:
        """A bounds-checked byte view [offset, offset + length) of a sealed pool."""
        self._check(offset, length)
        return self.map()[offset : offset + length]

    def array(self, dtype, offset: int = 0, count: int | None = None) -> np.ndarray:
        """A view of a sealed pool as `count` elements of `dtype`."""
        dtype = np.dtype(dtype)
        if count is None:
            count = (self.size - offset) // dtype.itemsize
        return np.frombuffer(self.view(offset, count * dtype.itemsize), dtype=dtype)

    def read(self, offset: int, length: int) -> np.ndarray:
        """A copy of bytes [offset, offset + length) as uint8, from any pool; MemoryError_ if
        the file no longer holds them."""
        self._check(offset, length)
        if self.mapped:
            return np.frombuffer(self.view(offset, length), np.uint8).copy()
        out = np.empty(length, np.uint8)
        done = 0
        while done < length:
            try:
                n = os.preadv(self._fd(), [out[done:]], self.offset + offset + done)
            except OSError as e:
                raise MemoryError_(f"cannot read {self!r}: {e}") from e
            if n == 0:
                raise MemoryError_(f"{self!r} shrank: {done} of {length} bytes at {offset} left")
            done += n
        return out

    def write(self, offset: int, data) -> None:
        """Store the bytes of `data` (any contiguous buffer) at `offset`, into any pool."""
        src = memoryview(data).cast("B")
        length = len(src)
        self._check(offset, length)
        if self.mapped:
            self.view(offset, length)[:] = src
            return
        at = self.offset + offset
        try:
            if os.fstat(self._fd()).st_size < at + length:  # pwrite would grow a shrunk file back
                raise MemoryError_(f"{self!r} shrank below the region [{offset}, {offset + length})")
            done = 0
            while done < length:
                n = os.pwritev(self.fd, [src[done:]], at + done)
                if n == 0:
                    raise MemoryError_(f"{self!r}: no room to write at {offset + done}")
                done += n
        except OSError as e:
            raise MemoryError_(f"cannot write {self!r}: {e}") from e

    def _fd(self) -> int:
        if self.fd < 0:
            raise MemoryError_("memory is closed")
        return self.fd

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
    """A new zero-filled "ashmem" pool of `size` bytes: a memfd sealed against resizing."""
    if size < 0:
        raise ValueError("size must be >= 0")
    return Memory("ashmem", size, sealed_memfd("nngpu-pool", size))


def memory_from_fd(name: str, size: int, fd: int, offset: int = 0) -> Memory:
    """Wrap an fd received from another process (the Memory takes ownership of it); it is
    mapped only if sealed against shrinking, else read and written with pread/pwrite."""
    return Memory(name, size, fd, offset)


def memory_from_file(path: str, size: int | None = None, offset: int = 0, writable: bool = True) -> Memory:
    """An "mmap_fd" memory over `path` starting at `offset` (a file: read with pread, never mapped)."""
    fd = os.open(path, os.O_RDWR if writable else os.O_RDONLY)
    if size is None:
        size = os.fstat(fd).st_size - offset
    return Memory("mmap_fd", size, fd, offset)
