"""HAL 1.3 IPreparedModel::executeFenced: sync fences in and out, IFencedExecutionCallback, and
the waiter that starts a fenced execution once all its fences have signalled.

Fences. A waitFor fence is a Linux sync_file or an eventfd. It has signalled when it polls
readable; the driver never reads it (that would consume it). nngpu's own fences, the ones
executeFenced returns, are eventfds whose counter says the state: 0 while the execution is
pending, FENCE_SIGNALED (1) when it succeeded, FENCE_ERROR (2) when it failed. A client signals
an eventfd fence of its own the same way: one write of 1, or of 2 to put it in error. The state
of an eventfd is read from /proc/self/fdinfo, which does not consume it either.

Ownership. The driver dups every waitFor fd it waits on (the caller may close its own as soon
as executeFenced returns) and closes each dup once the fence has signalled or the execution is
abandoned. The returned fd is the caller's to close; the driver signals its own dup of it and
closes that dup right after, so a caller that closes early loses nothing and leaks nothing.
"""
from __future__ import annotations

import enum
import fcntl
import logging
import os
import selectors
import struct
import threading
import time
from dataclasses import replace
from typing import Callable

from ..threads import start_thread
from ..hal.interfaces import IFencedExecutionCallback
from ..hal.types import ErrorStatus, MeasureTiming, NativeHandle, OptionalTimeoutDuration, Timing, UINT64_MAX
from ..validation import ValidationError
from .deadline import passed
from .execution import Checked, Result

log = logging.getLogger("nngpu.fenced")

FENCE_SIGNALED = 1
FENCE_ERROR = 2

_KINDS = {"anon_inode:[eventfd]": "eventfd", "anon_inode:sync_file": "sync_file"}
# linux/sync_file.h: SYNC_IOC_FILE_INFO = _IOWR('>', 4, struct sync_file_info), 56 bytes:
# char name[32]; __s32 status; __u32 flags, num_fences, pad; __u64 sync_fence_info
_SYNC_FILE_INFO = struct.Struct("32siIIIQ")
_SYNC_IOC_FILE_INFO = (3 << 30) | (_SYNC_FILE_INFO.size << 16) | (ord(">") << 8) | 4


class FenceState(enum.Enum):
    ACTIVE = "active"
    SIGNALED = "signaled"
    ERROR = "error"


def fence_kind(fd: int) -> str | None:
    """"eventfd" or "sync_file"; None for a closed fd or anything else."""
    try:
        return _KINDS.get(os.readlink(f"/proc/self/fd/{fd}"))
    except OSError:
        return None


def fence_state(fd: int, kind: str) -> FenceState:
    """The fence's state, read without consuming it; a fence that cannot be read is in error."""
    try:
        if kind == "eventfd":
            with open(f"/proc/self/fdinfo/{fd}") as f:
                line = next(ln for ln in f if ln.startswith("eventfd-count:"))
            count = int(line.split(":", 1)[1], 16)
            if count == 0:
                return FenceState.ACTIVE
            return FenceState.SIGNALED if count == FENCE_SIGNALED else FenceState.ERROR
        raw = fcntl.ioctl(fd, _SYNC_IOC_FILE_INFO, bytes(_SYNC_FILE_INFO.size))
        status = _SYNC_FILE_INFO.unpack(raw)[1]  # 1 signalled, 0 active, < 0 an error
    except (OSError, StopIteration, ValueError):
        return FenceState.ERROR
    return FenceState.SIGNALED if status == 1 else FenceState.ACTIVE if status == 0 else FenceState.ERROR


def timeout_ns(duration: OptionalTimeoutDuration | None, what: str) -> int | None:
    """The nanoseconds of an OptionalTimeoutDuration (a uint64), None when it has none."""
    if duration is None:
        return None
    if not isinstance(duration, OptionalTimeoutDuration):
        raise ValidationError(f"{what} is not an OptionalTimeoutDuration: {type(duration).__name__}")
    ns = duration.nanoseconds
    if ns is not None and (isinstance(ns, bool) or not isinstance(ns, int) or not 0 <= ns <= UINT64_MAX):
        raise ValidationError(f"{what} {ns!r} is not a uint64 duration")
    return ns


def accept_wait_for(waitFor) -> list[tuple[int, str]]:
    """The (fd, kind) of each waitFor fence; ValidationError for anything that is not a live
    sync fence in one handle of one fd, or a fence already in error."""
    if not isinstance(waitFor, (list, tuple)):
        raise ValidationError(f"waitFor is not a list of handles: {type(waitFor).__name__}")
    fences = []
    for k, handle in enumerate(waitFor):
        if not isinstance(handle, NativeHandle) or not isinstance(handle.fds, (list, tuple)) or len(handle.fds) != 1:
            raise ValidationError(f"waitFor {k}: not a handle of exactly one fd")
        fd = handle.fds[0]
        kind = fence_kind(fd) if isinstance(fd, int) and not isinstance(fd, bool) and fd >= 0 else None
        if kind is None:
            raise ValidationError(f"waitFor {k}: fd {fd!r} is not an open sync_file or eventfd")
        if fence_state(fd, kind) is FenceState.ERROR:
            raise ValidationError(f"waitFor {k}: the fence is in error")
        fences.append((fd, kind))
    return fences


class FencedExecutionCallback(IFencedExecutionCallback):
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._info: tuple[ErrorStatus, Timing, Timing] | None = None

    def getExecutionInfo(self) -> tuple[ErrorStatus, Timing, Timing]:
        with self._lock:
            return self._info or (ErrorStatus.GENERAL_FAILURE, Timing(), Timing())

    def set_info(self, status: ErrorStatus, launched: Timing, fenced: Timing) -> None:
        with self._lock:
            self._info = (status, launched, fenced)


class FencedJob:
    """One fenced execution: its fences still to signal (the driver's dups), then the run on the
    execution pool, then the callback's info and the returned fence."""

    def __init__(self, checked: Checked, fences: list[tuple[int, str]], out_fd: int, duration_ns: int | None,
                 t_call: int, submit: Callable[[Callable[[], None]], None]):
        self.checked = checked
        self.fences = fences                # unsignalled waitFor fences, driver-owned dups
        self.out_fd = out_fd                # the driver's dup of the returned fence
        self.duration_ns = duration_ns
        self.t_call = t_call                # perf_counter_ns at executeFenced
        self.submit = submit
        self.callback = FencedExecutionCallback()

    def close_fences(self) -> None:
        for fd, _ in self.fences:
            os.close(fd)
        self.fences = []

    def start(self) -> None:
        """All fences have signalled: the duration starts now; run on the execution pool."""
        self.close_fences()
        t_fenced, now = time.perf_counter_ns(), time.monotonic_ns()
        limit = self.checked.deadline_ns
        if self.duration_ns is not None:
            limit = now + self.duration_ns if limit is None else min(limit, now + self.duration_ns)
        self.submit(lambda: self._run(replace(self.checked, deadline_ns=limit), t_fenced))

    def abort(self, status: ErrorStatus, reason: str) -> None:
        """Give up before running: a waitFor fence erred, or the deadline passed while waiting."""
        self.close_fences()
        self._complete(self.checked.fail(status, reason), self.t_call)

    def _run(self, checked: Checked, t_fenced: int) -> None:
        try:
            pending = checked.read()
            if isinstance(pending, Result):
                checked.invalidate_outputs()
                result = pending
            else:
                result = pending.finish()
        except Exception as e:  # the fence must be signalled whatever happens
            log.exception("fenced execution failed")
            result = Result(ErrorStatus.GENERAL_FAILURE, [], Timing(), f"{type(e).__name__}: {e}")
        self._complete(result, t_fenced)

    def _complete(self, result: Result, t_fenced: int) -> None:
        launched = fenced = Timing()
        if result.status == ErrorStatus.NONE and self.checked.measure == MeasureTiming.YES:
            t_done = time.perf_counter_ns()
            device = result.timing.timeOnDevice
            launched = Timing(device, (t_done - self.t_call) // 1000)
            fenced = Timing(device, (t_done - t_fenced) // 1000)
        # The info is set before the fence signals: a client woken by the fence reads it at once.
        self.callback.set_info(result.status, launched, fenced)
        try:
            os.eventfd_write(self.out_fd, FENCE_SIGNALED if result.status == ErrorStatus.NONE else FENCE_ERROR)
        finally:
            os.close(self.out_fd)


class FenceWaiter:
    """One daemon thread waits on the fences of every fenced execution (epoll through
    selectors) and hands an execution to the pool once all its fences have signalled. So a
    blocked execution occupies no pool worker, however long its fences take, and a fence that
    errs or a deadline that passes is noticed at once (the select timeout is the nearest
    deadline)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._incoming: list[FencedJob] = []
        self._wake: int | None = None

    def add(self, job: FencedJob) -> None:
        with self._lock:
            if self._wake is None:
                self._wake = os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK)
                start_thread(self._serve, "nngpu-fence-waiter")
            self._incoming.append(job)
            os.eventfd_write(self._wake, 1)

    def _serve(self) -> None:
        selector = selectors.DefaultSelector()
        selector.register(self._wake, selectors.EVENT_READ)
        waiting: dict[FencedJob, set[int]] = {}

        def drop(job: FencedJob) -> None:  # stop watching before the job closes its fds
            for fd in waiting.pop(job):
                selector.unregister(fd)

        while True:
            events = selector.select(self._timeout(waiting))
            for key, _ in events:
                try:
                    if key.fd == self._wake:
                        self._take_incoming(selector, waiting)
                    elif key.data in waiting:
                        self._on_ready(key.data, key.fd, waiting, selector, drop)
                except Exception:  # keep serving every other execution
                    log.exception("fence waiter")
            for job in [j for j in waiting if passed(j.checked.deadline_ns)]:
                drop(job)
                job.abort(ErrorStatus.MISSED_DEADLINE_PERSISTENT, "the deadline passed while waiting for fences")

    def _take_incoming(self, selector: selectors.BaseSelector, waiting: dict[FencedJob, set[int]]) -> None:
        os.eventfd_read(self._wake)
        with self._lock:
            jobs, self._incoming = self._incoming, []
        for job in jobs:
            waiting[job] = set()
            try:
                for fd, _ in job.fences:
                    selector.register(fd, selectors.EVENT_READ, job)
                    waiting[job].add(fd)
            except (OSError, ValueError) as e:  # a fence epoll refuses: this execution cannot wait
                for fd in waiting.pop(job):
                    selector.unregister(fd)
                job.abort(ErrorStatus.GENERAL_FAILURE, f"cannot wait on a fence: {e}")

    @staticmethod
    def _on_ready(job: FencedJob, fd: int, waiting: dict[FencedJob, set[int]], selector: selectors.BaseSelector,
                  drop: Callable[[FencedJob], None]) -> None:
        state = fence_state(fd, dict(job.fences)[fd])
        if state is FenceState.ERROR:
            drop(job)
            job.abort(ErrorStatus.GENERAL_FAILURE, "a waitFor fence was set to error")
        elif state is FenceState.SIGNALED:
            selector.unregister(fd)
            waiting[job].discard(fd)
            if not waiting[job]:
                del waiting[job]
                job.start()

    @staticmethod
    def _timeout(waiting: dict[FencedJob, set[int]]) -> float | None:
        deadlines = [j.checked.deadline_ns for j in waiting if j.checked.deadline_ns is not None]
        return None if not deadlines else max(0.0, (min(deadlines) - time.monotonic_ns()) / 1e9)


_WAITER = FenceWaiter()


def launch_fenced(checked: Checked, waitFor, duration_ns: int | None,
                  submit: Callable[[Callable[[], None]], None]) -> tuple[ErrorStatus, NativeHandle,
                                                                        IFencedExecutionCallback | None]:
    """executeFenced once the request and the timeouts are valid: the fences, then the launch."""
    failed = (ErrorStatus.INVALID_ARGUMENT, NativeHandle(), None)
    problem = checked.unspecified_output()
    try:
        fences = accept_wait_for(waitFor)
    except ValidationError as e:
        problem = problem or str(e)
    if problem:
        log.info("execution rejected: INVALID_ARGUMENT: %s", problem)
        return failed
    missed = checked.missed_deadline()
    if missed is not None:
        return missed.status, NativeHandle(), None
    owned: list[int] = []
    try:
        waits = []
        for fd, kind in fences:
            if fence_state(fd, kind) is not FenceState.SIGNALED:
                owned.append(os.dup(fd))
                waits.append((owned[-1], kind))
        fence = os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK)
        owned.append(fence)
        owned.append(os.dup(fence))
        job = FencedJob(checked, waits, owned[-1], duration_ns, checked.t0, submit)
        if waits:
            _WAITER.add(job)
    except OSError as e:  # out of file descriptors
        for fd in owned:
            os.close(fd)
        log.info("execution rejected: RESOURCE_EXHAUSTED_TRANSIENT: %s", e)
        return ErrorStatus.RESOURCE_EXHAUSTED_TRANSIENT, NativeHandle(), None
    if not waits:
        job.start()
    return ErrorStatus.NONE, NativeHandle([fence]), job.callback
