"""Worker threads for prepares and asynchronous executions, shared fairly between prepared models.

Order: the waiting job of the highest HAL 1.3 Priority runs first. Each job has a key (its prepared
model, for executions; prepares share one); within a priority the keys take turns (round-robin),
and one key's jobs run first come, first served. A key already running `per_key` jobs is passed
over until one of them finishes, whatever the priority of its waiting jobs.

Why per-key queues with a per-key limit in a pool that grows to a cap, rather than either alone:
one fixed 8-worker pool let eight long executions of one model (WHILE loops near their timeout)
hold every worker, and every other model's executions waited for them. Taking turns does not help
while every worker is busy, and a thread (or queue worker) per model would cost idle models threads.
So:
- a key occupies at most `per_key` workers at once (one model's concurrency stays what it was);
- a runnable job that finds no idle worker starts a thread, up to `workers` threads in all, so
  another model's job gets a thread at once instead of queueing behind a busy model;
- a thread idle for `idle_s` exits: an idle pool, and so idle models, cost no threads;
- at the cap jobs wait for a worker, so threads never grow without bound; the first time that
  happens is logged (once per pool), and `stats().full` counts every time.

The threads are daemons: a process that exits (or is interrupted) does not wait for a compile."""
from __future__ import annotations

import heapq
import itertools
import logging
import threading
from dataclasses import dataclass, field
from typing import Callable, Hashable, NamedTuple

from ..threads import block_stop_signals
from ..hal.types import Priority

log = logging.getLogger("nngpu.work_queue")


@dataclass
class _Queue:
    """One key's waiting jobs as (-priority, arrival, job), and its place in the round."""
    turn: int  # the smaller goes first among keys whose best waiting job has the same priority
    heap: list[tuple[int, int, Callable[[], None]]] = field(default_factory=list)
    running: int = 0


class PoolStats(NamedTuple):
    threads: int   # alive now, busy or idle
    idle: int
    waiting: int   # jobs not started
    running: int
    full: int      # times a runnable job found every thread busy at the cap


class PriorityPool:
    def __init__(self, workers: int, name: str, per_key: int | None = None, idle_s: float = 10.0) -> None:
        self._queues: dict[Hashable, _Queue] = {}  # only keys with jobs waiting or running
        self._order = itertools.count()
        self._ready = threading.Condition()
        self._cap, self._per_key, self._idle_s, self._name = workers, per_key or workers, idle_s, name
        self._threads = self._idle = self._full = 0
        self._names = itertools.count(1)
        self._closing = False

    def submit(self, job: Callable[[], None], priority: int = Priority.MEDIUM, key: Hashable = None) -> None:
        with self._ready:
            queue = self._queues.get(key)
            if queue is None:  # a key that comes back joins the end of the round
                queue = self._queues[key] = _Queue(next(self._order))
            heapq.heappush(queue.heap, (-int(priority), next(self._order), job))
            if len(queue.heap) > self._per_key - queue.running:
                return  # waits for one of its key's own jobs to finish; that worker takes it
            if self._runnable() > self._idle:
                if self._threads < self._cap:
                    self._threads += 1
                    self._idle += 1  # idle whenever it runs no job, from its start
                    threading.Thread(target=self._serve, name=f"{self._name}-{next(self._names)}",
                                     daemon=True).start()
                else:
                    self._report_full()
            self._ready.notify()

    def close(self) -> None:
        """Let idle threads exit now, not after idle_s: the pool's owner is gone (jobs already
        submitted still run; a thread that finds none left exits)."""
        with self._ready:
            self._closing = True
            self._ready.notify_all()

    def waiting(self) -> int:
        with self._ready:
            return sum(len(q.heap) for q in self._queues.values())

    def stats(self) -> PoolStats:
        with self._ready:
            return PoolStats(self._threads, self._idle, sum(len(q.heap) for q in self._queues.values()),
                             sum(q.running for q in self._queues.values()), self._full)

    def _report_full(self) -> None:
        self._full += 1
        if self._full == 1:
            log.warning("%s: all %d threads are busy; jobs wait for one (logged once, see stats().full)",
                        self._name, self._cap)

    def _runnable(self) -> int:
        return sum(min(len(q.heap), self._per_key - q.running) for q in self._queues.values())

    def _pick(self) -> tuple[Hashable, Callable[[], None]] | None:
        ready = [(q.heap[0][0], q.turn, key) for key, q in self._queues.items()
                 if q.heap and q.running < self._per_key]
        if not ready:
            return None
        key = min(ready, key=lambda r: r[:2])[2]
        queue = self._queues[key]
        job = heapq.heappop(queue.heap)[2]
        queue.running += 1
        queue.turn = next(self._order)  # to the end of the round
        return key, job

    def _take(self) -> tuple[Hashable, Callable[[], None]] | None:
        """The next job, or None when none came for idle_s (the thread then exits)."""
        with self._ready:
            picked = self._pick()
            while picked is None:
                woke = not self._closing and self._ready.wait(self._idle_s)
                picked = self._pick()
                if picked is None and not woke:
                    self._idle -= 1
                    self._threads -= 1
                    return None
            self._idle -= 1
            return picked

    def _serve(self) -> None:
        # Ctrl-C and SIGTERM go to the main thread, never here: taken by a worker, the signal
        # interrupts a system call inside its job (PoCL's compiler then fails a read with EINTR
        # and prints "1 error generated." beside "nngpu: interrupted").
        block_stop_signals()
        while (picked := self._take()) is not None:
            key, job = picked
            try:
                job()
            except Exception:  # a job reports its own failures; this keeps the worker alive
                log.exception("%s job raised", self._name)
            job = picked = None   # not held while waiting: it holds its request's memories
            with self._ready:
                queue = self._queues[key]
                queue.running -= 1
                if not queue.heap and not queue.running:
                    del self._queues[key]  # an idle key costs nothing
                self._idle += 1
