"""Worker threads for prepares and asynchronous executions that take the waiting job of the
highest HAL 1.3 Priority first (first come, first served within a priority).

The threads are daemons: a process that exits (or is interrupted) does not wait for a compile."""
from __future__ import annotations

import heapq
import itertools
import logging
import threading
from typing import Callable

from ..hal.types import Priority

log = logging.getLogger("nngpu.work_queue")


class PriorityPool:
    def __init__(self, workers: int, name: str) -> None:
        self._heap: list[tuple[int, int, Callable[[], None]]] = []
        self._order = itertools.count()
        self._ready = threading.Condition()
        self._workers, self._name = workers, name
        self._started = 0

    def submit(self, job: Callable[[], None], priority: int = Priority.MEDIUM) -> None:
        with self._ready:
            heapq.heappush(self._heap, (-int(priority), next(self._order), job))
            if self._started < self._workers:  # threads start as work arrives
                self._started += 1
                threading.Thread(target=self._serve, name=f"{self._name}-{self._started}", daemon=True).start()
            self._ready.notify()

    def waiting(self) -> int:
        with self._ready:
            return len(self._heap)

    def _serve(self) -> None:
        while True:
            with self._ready:
                while not self._heap:
                    self._ready.wait()
                _, _, job = heapq.heappop(self._heap)
            try:
                job()
            except Exception:  # a job reports its own failures; this keeps the worker alive
                log.exception("%s job raised", self._name)
