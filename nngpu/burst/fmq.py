"""A fast message queue (the HIDL fmq_sync equivalent): one writer, one reader, fixed-size
elements in a shared-memory ring, usable across processes.

Layout of the shared region (a memfd, little-endian):

    offset  0  u32 magic "NNFQ"      offset 64   u64 write counter (elements ever written)
    offset  4  u32 layout version    offset 128  u64 read counter  (elements ever read)
    offset  8  u32 element size      offset 4096 the ring: capacity * element size bytes
    offset 12  u32 capacity
    offset 16  u32 flags (bit 0: blocking queue, has event fds)
    offset 20  u32 closed (nonzero once either side closed the queue)
    offset 192 u32 readers asleep (waiting in poll for "not empty")
    offset 256 u32 writers asleep (waiting in poll for "not full")

Counters only grow; an element's ring slot is its counter modulo the capacity. Ordering: the
writer copies the payload and only then stores the write counter; the reader loads the write
counter before copying the payload, and stores the read counter after copying. On x86-64 (TSO)
plain aligned 8-byte stores are atomic and not reordered with earlier stores, which is exactly
this publish order; elsewhere a full barrier is issued around each counter access (see
`_fence`). A write of n elements is published by one counter store, so a packet becomes visible
entirely or not at all, and a reader dequeues whole packets.

Blocking queues carry two eventfds, "not empty" (written by the writer after publishing) and
"not full" (written by the reader after consuming); a waiter spins for a short window (spin_us,
giving up the CPU and the GIL every turn), then sleeps in poll() on its eventfd, rechecking the
counters after every wake-up. On x86-64 a side signals only when its peer has said it is asleep,
so a hot queue makes no system calls: the sleeper counts itself in, then rechecks the counters;
the other side stores its counter, then reads that count. Both steps are separated by a
threading.Lock release or acquire (an atomic read-modify-write: a full barrier on x86), so one
of them sees the other, and no wake-up is lost; each sleep is still capped at _SLEEP_SLICE_S.
Elsewhere every transfer signals. Closing sets the shared closed word and signals both eventfds:
every waiter on either side returns. Non-blocking queues have no eventfds; their blocking calls
poll with a short sleep.

The counters live in memory the peer can write. Counters that make no sense (the read counter
past the write counter, or more written than the ring holds) can only come from a broken or
hostile peer: the side that sees them closes the queue (`corrupt` says why) rather than wait for
data that is never coherent, which would spin a waiter at full CPU.

A `QueueDescriptor` (fds + sizes, descriptor.py) travels to another process over a Unix socket
(`send_descriptor` / `recv_descriptor`, SCM_RIGHTS) and is opened there with `MessageQueue.attach`.

The region is a memfd sealed with F_SEAL_SHRINK | F_SEAL_GROW, and attach refuses (QueueError)
one that is not sealed against shrinking: a queue lives in its mapping (the counters are read and
written in place), and a peer that truncated a mapped region would kill this process with SIGBUS.
"""
from __future__ import annotations

import ctypes
import errno
import logging
import mmap
import os
import platform
import select
import struct
import threading
import time

from ..memory import close_fds, sealed_memfd, shrink_sealed
from .descriptor import QueueDescriptor, QueueError, queue_error

log = logging.getLogger("nngpu.burst.fmq")

__all__ = ["MessageQueue", "QueueDescriptor", "QueueError", "DEFAULT_SPIN_US"]

MAGIC = 0x51464E4E  # "NNFQ"
LAYOUT_VERSION = 2
HEADER_SIZE = 4096
_WRITE_AT, _READ_AT = 64, 128
_READERS_ASLEEP_AT, _WRITERS_ASLEEP_AT = 192, 256
_SLEEP_SLICE_S = 0.1  # a sleeper rechecks at least this often whatever the signals
_FLAG_BLOCKING = 1
DEFAULT_SPIN_US = 50  # the reference implementation polls about this long before sleeping
_POLL_SLEEP_S = 0.0002  # non-blocking queues: nap between polls in their blocking calls
_HEADER = struct.Struct("<IIIIII")


def _make_fence():
    """A full memory barrier where the CPU may reorder stores (not needed on x86-64 TSO)."""
    if platform.machine().lower() in ("x86_64", "amd64", "i386", "i686"):
        return None
    try:  # a mutex lock/unlock pair is a full barrier in every libc
        libc = ctypes.CDLL(None)
        m = ctypes.create_string_buffer(64)
        libc.pthread_mutex_init(m, None)
        lock, unlock = libc.pthread_mutex_lock, libc.pthread_mutex_unlock

        def fence() -> None:
            lock(m)
            unlock(m)
        return fence
    except (OSError, AttributeError):
        return lambda: None


_fence = _make_fence()
_SIGNAL_ALWAYS = _fence is not None  # the sleeper count needs x86's store-load ordering via locks
# A spinning waiter gives up the CPU (to processes sharing the core) and the GIL on every turn.
_yield = getattr(os, "sched_yield", None) or (lambda: time.sleep(0))



class MessageQueue:
    """One end of a single-producer single-consumer ring of fixed-size elements."""

    def __init__(self, element_size: int, capacity: int, *, blocking: bool = True,
                 spin_us: float = DEFAULT_SPIN_US, _attach: QueueDescriptor | None = None):
        self.spin_s = max(float(spin_us), 0.0) / 1e6
        self._lock = threading.Lock()
        self._closed_locally = False
        # The eventfds are written, read and closed under _fd_lock: a wake-up sent after close()
        # would otherwise write 8 bytes into whatever file took the closed fd's number since
        # (another queue's memfd, over its header).
        self._fd_lock = threading.Lock()
        self._fds_closed = False
        self.corrupt: str | None = None  # why the counters were found incoherent, if they were
        if _attach is None:
            if element_size <= 0 or capacity <= 0 or element_size * capacity > (1 << 31):
                raise QueueError(f"bad queue size {capacity} x {element_size}")
            memfd = sealed_memfd("nngpu-burst-fmq", HEADER_SIZE + element_size * capacity)
            fds = [memfd]
            if blocking:
                fds += [os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC) for _ in range(2)]
            desc = QueueDescriptor(memfd, *(fds[1:] if blocking else (-1, -1)), element_size, capacity)
            self._map_region(desc)
            _HEADER.pack_into(self._mm, 0, MAGIC, LAYOUT_VERSION, element_size, capacity,
                              _FLAG_BLOCKING if blocking else 0, 0)
        else:
            desc = _attach
            self._map_region(desc)
            magic, version, esize, cap, flags, _closed = _HEADER.unpack_from(self._mm, 0)
            if (magic, version, esize, cap) != (MAGIC, LAYOUT_VERSION, desc.element_size, desc.capacity) \
                    or bool(flags & _FLAG_BLOCKING) != desc.blocking:
                self._closed_word = ctypes.c_uint32(1)
                self._unmap()
                raise QueueError("descriptor does not match the shared queue header")
        self.desc = desc
        self.element_size = desc.element_size
        self.capacity = desc.capacity
        self.blocking = desc.blocking
        self._ring_bytes = self.element_size * self.capacity
        self._poll_empty = self._poller(desc.not_empty_fd)
        self._poll_full = self._poller(desc.not_full_fd)

    # ---- setup ------------------------------------------------------------------------------
    def _map_region(self, desc: QueueDescriptor) -> None:
        size = HEADER_SIZE + desc.element_size * desc.capacity
        try:
            if not shrink_sealed(desc.memfd, size):  # else a peer's ftruncate would SIGBUS us
                raise QueueError("shared region not sealed against shrinking, or smaller than the descriptor says")
            self._mm = mmap.mmap(desc.memfd, size)
        except (OSError, ValueError) as e:
            raise queue_error("cannot map queue", e) from e
        self._write_ctr = ctypes.c_uint64.from_buffer(self._mm, _WRITE_AT)
        self._read_ctr = ctypes.c_uint64.from_buffer(self._mm, _READ_AT)
        self._closed_word = ctypes.c_uint32.from_buffer(self._mm, 20)
        self._readers_asleep = ctypes.c_uint32.from_buffer(self._mm, _READERS_ASLEEP_AT)
        self._writers_asleep = ctypes.c_uint32.from_buffer(self._mm, _WRITERS_ASLEEP_AT)
        self._ring = memoryview(self._mm)[HEADER_SIZE:]

    @staticmethod
    def _poller(fd: int):
        if fd < 0:
            return None
        p = select.poll()
        p.register(fd, select.POLLIN)
        return p

    @classmethod
    def attach(cls, desc: QueueDescriptor, *, dup: bool = True, spin_us: float = DEFAULT_SPIN_US) -> "MessageQueue":
        """Open the queue `desc` describes. dup=True leaves the caller's fds untouched;
        dup=False takes ownership of them (fds just received from another process)."""
        if not isinstance(desc, QueueDescriptor):
            raise QueueError("not a queue descriptor")
        if desc.element_size <= 0 or desc.capacity <= 0:
            raise QueueError("bad queue sizes")
        fds = desc.fds()
        try:
            owned = [os.dup(fd) for fd in fds] if dup else list(fds)
        except OSError as e:
            raise queue_error("cannot take the descriptor's fds", e) from e
        mine = QueueDescriptor(owned[0], *(owned[1:] if desc.blocking else (-1, -1)),
                               desc.element_size, desc.capacity)
        try:
            return cls(desc.element_size, desc.capacity, spin_us=spin_us, _attach=mine)
        except QueueError:
            for fd in owned:
                os.close(fd)
            raise

    def descriptor(self) -> QueueDescriptor:
        """The fds (still owned by this queue) and sizes; attach() dups or takes them."""
        return self.desc

    # ---- state -----------------------------------------------------------------------------
    @property
    def closed(self) -> bool:
        return self._closed_locally or self._closed_word.value != 0

    def available_to_read(self) -> int:
        w_ctr, r_ctr = self._write_ctr, self._read_ctr
        if w_ctr is None:
            return 0
        w = w_ctr.value
        if _fence:
            _fence()
        return max(self._coherent_span(w, r_ctr.value), 0)

    def available_to_write(self) -> int:
        w_ctr, r_ctr = self._write_ctr, self._read_ctr
        if w_ctr is None:
            return 0
        r = r_ctr.value
        if _fence:
            _fence()
        span = self._coherent_span(w_ctr.value, r)
        return 0 if span < 0 else self.capacity - span

    def _coherent_span(self, w: int, r: int) -> int:
        """w - r for a snapshot taken without the lock (-1 if the queue is incoherent). Another
        thread on this end may move our counter between the two loads, so an odd snapshot is
        only a race until a recheck under the lock, where our own counter holds still, confirms it."""
        if 0 <= w - r <= self.capacity:
            return w - r
        with self._lock:
            w_ctr, r_ctr = self._write_ctr, self._read_ctr
            if w_ctr is None or self._incoherent(w_ctr.value, r_ctr.value):
                return -1
        return min(max(w - r, 0), self.capacity)

    def _incoherent(self, w: int, r: int) -> bool:
        """True (and the queue closed for both sides) if the counters w, r make no sense; the
        caller holds the lock, so this end's own counter is exact."""
        if 0 <= w - r <= self.capacity:
            return False
        if self.corrupt is None:
            self.corrupt = f"write counter {w}, read counter {r}, capacity {self.capacity}"
            log.warning("queue closed: its counters make no sense (%s)", self.corrupt)
        self.shutdown()
        return True

    # ---- non-blocking transfer -------------------------------------------------------------
    def write(self, data: bytes | bytearray | memoryview, wake: bool = True) -> bool:
        """Enqueue whole elements atomically: all of them, or (False) none. wake=False skips
        the "not empty" signal: for a writer that knows nobody sleeps on it (see wake_reader)."""
        size = len(data)
        n, rest = divmod(size, self.element_size)
        if rest or n == 0:
            return False
        with self._lock:
            if self._closed_locally or self._closed_word.value:
                return False
            w, r = self._write_ctr.value, self._read_ctr.value
            if self._incoherent(w, r) or n > self.capacity - (w - r):
                return False
            start = (w % self.capacity) * self.element_size
            first = self._ring_bytes - start
            if size <= first:
                self._ring[start:start + size] = data
            else:  # the packet wraps around the end of the ring
                self._ring[start:] = data[:first]
                self._ring[: size - first] = data[first:]
            if _fence:
                _fence()
            self._write_ctr.value = w + n  # publish: the payload is in place
        # (the lock's release above orders the publish before the sleeper count is read)
        if wake and self.blocking and (_SIGNAL_ALWAYS or self._readers_asleep.value):
            self._signal(self.desc.not_empty_fd)
        return True

    def wake_reader(self) -> None:
        """Signal "not empty" (after a write(..., wake=False) that turned out to need it)."""
        if self.blocking:
            self._signal(self.desc.not_empty_fd)

    def read(self, count: int | None = None) -> bytes | None:
        """Dequeue exactly `count` elements (None: everything available), or None if not there."""
        with self._lock:
            if self._closed_locally:
                return None
            r, w = self._read_ctr.value, self._write_ctr.value
            if _fence:
                _fence()
            avail = w - r
            n = avail if count is None else count
            if self._incoherent(w, r) or n <= 0 or n > avail:
                return None
            start = (r % self.capacity) * self.element_size
            size = n * self.element_size
            first = self._ring_bytes - start
            if size <= first:
                out = bytes(self._ring[start:start + size])
            else:
                out = bytes(self._ring[start:]) + bytes(self._ring[: size - first])
            if _fence:
                _fence()
            self._read_ctr.value = r + n
        if self.blocking and (_SIGNAL_ALWAYS or self._writers_asleep.value):
            self._signal(self.desc.not_full_fd)
        return out

    # ---- blocking transfer -----------------------------------------------------------------
    def write_blocking(self, data, timeout: float | None = None) -> bool:
        """write(), waiting up to `timeout` s for room; False on timeout, close or oversize."""
        n = len(data) // self.element_size
        if n > self.capacity:
            return False
        if self.write(data):
            return True
        ok = self._wait(self.available_to_write, n, self._poll_full, self.desc.not_full_fd, "_writers_asleep",
                        timeout)
        return ok and self.write(data)

    def read_blocking(self, count: int | None = None, timeout: float | None = None) -> bytes | None:
        """read(), waiting up to `timeout` s for data; None on timeout or close. count=None
        returns everything available once something is: one whole packet of a request/reply
        protocol, whose writer publishes a packet with one write."""
        out = self.read(count)
        if out is not None:
            return out
        if not self.wait_readable(1 if count is None else count, timeout):
            return None
        return self.read(count)

    def wait_readable(self, count: int = 1, timeout: float | None = None) -> bool:
        """Wait up to `timeout` s until `count` elements can be read; False on timeout or close."""
        if count > self.capacity or count <= 0:
            return False
        return self._wait(self.available_to_read, count, self._poll_empty, self.desc.not_empty_fd, "_readers_asleep",
                          timeout)

    def _wait(self, available, need: int, poller, fd: int, sleepers: str, timeout: float | None) -> bool:
        """Spin for spin_s (yielding the CPU and the GIL every turn), then sleep on `fd`,
        counted in the shared word `sleepers` names while asleep (module docstring)."""
        if available() >= need:
            return True
        start = time.monotonic()
        deadline = None if timeout is None else start + max(timeout, 0.0)
        spin_until = start + self.spin_s
        while True:
            if available() >= need:
                return True
            if self.closed:
                return False
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                return False
            if now < spin_until:
                _yield()
                continue
            if poller is None:
                time.sleep(_POLL_SLEEP_S)
                continue
            wait_s = _SLEEP_SLICE_S if deadline is None else min(deadline - now, _SLEEP_SLICE_S)
            if not self._sleep(available, need, poller, fd, sleepers, wait_s):
                return False

    def _sleep(self, available, need: int, poller, fd: int, sleepers: str, wait_s: float) -> bool:
        """One poll() on `fd`, announced to the peer; False if the queue went away."""
        with self._lock:
            if self._closed_locally:
                return False
            getattr(self, sleepers).value += 1
        try:  # the release above made the count visible before this recheck
            if available() >= need or self.closed:
                return True
            if poller.poll(max(int(wait_s * 1000) + 1, 0)):
                with self._fd_lock:   # consume the wake-up, then recheck the counters
                    if self._fds_closed:
                        return False
                    os.eventfd_read(fd)
        except BlockingIOError:
            pass
        except OSError as e:
            if e.errno in (errno.EBADF, errno.EINVAL):
                return False
            raise
        finally:
            with self._lock:
                if not self._closed_locally:
                    getattr(self, sleepers).value -= 1
        return True

    def _signal(self, fd: int) -> None:
        with self._fd_lock:
            if self._fds_closed:
                return
            try:
                # Releases the GIL around the syscall: in one process the woken side runs at once.
                os.eventfd_write(fd, 1)
            except OSError:
                pass  # a saturated counter: the waiter is awake anyway

    # ---- teardown --------------------------------------------------------------------------
    def shutdown(self) -> None:
        """Mark the queue closed for both sides and wake every waiter. Safe from any thread;
        the fds and mapping stay valid until close()."""
        if self._closed_locally:
            return
        self._closed_word.value = 1
        if self.blocking:
            self._signal(self.desc.not_empty_fd)
            self._signal(self.desc.not_full_fd)

    def close(self) -> None:
        """shutdown(), then release this end: call once no other thread uses this object."""
        if self._closed_locally:
            return
        self.shutdown()
        with self._lock:
            self._closed_locally = True
            self._write_ctr = self._read_ctr = None  # drop the buffer exports before unmapping
            self._closed_word = ctypes.c_uint32(1)
            self._readers_asleep = self._writers_asleep = ctypes.c_uint32(0)
        self._unmap()
        with self._fd_lock:   # once, even when two threads close at the same time
            if not self._fds_closed:
                self._fds_closed = True
                close_fds(self.desc.fds())

    def _unmap(self) -> None:
        self._write_ctr = self._read_ctr = None
        self._readers_asleep = self._writers_asleep = ctypes.c_uint32(0)
        self._ring.release()
        try:
            self._mm.close()
        except BufferError:
            pass  # a reader still holds a counter: the mapping goes when it does

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self) -> "MessageQueue":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
