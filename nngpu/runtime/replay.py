"""CUDA graph replay of a segment's device runs (capture.py says which steps form one).

A run is captured at prepare for uploads from host values of the shapes the plan knows (stream
capture records, it launches nothing), and replayed by each execution with one launch. Host
values reach the device through pinned staging buffers the graph copies from; downloads land in
pinned staging the graph copies to, read after the one wait the run's downloads need. An upload
from an IBuffer (a device value) is captured as a copy from that buffer's address, so the graphs
are keyed by where each upload comes from: another source (an IBuffer storage, a host value of
another size) runs step by step once and is captured then, at most CACHE_SIZE keys per run
(later ones stay step by step). Replay sees the run's step runners only, never the plan."""
from __future__ import annotations

import logging
from typing import Any, Callable, Sequence

import numpy as np

from ..backends.base import Backend
from .capture import Run
from .runners import DeviceCall, Download, StepRunner, Upload
from .state import ExecutionState

log = logging.getLogger("nngpu.replay")

CACHE_SIZE = 16
_FAILED = None  # a key whose capture failed: run step by step


class Replay:
    """One device run of a segment, as graphs by upload sources."""

    def __init__(self, backend: Backend, runners: Sequence[StepRunner], run: Run, where: str) -> None:
        self.backend, self.run, self.where = backend, run, where
        self.runners = list(runners[run.start: run.stop])
        self.uploads = [r for r in self.runners if isinstance(r, Upload)]
        self.downloads = [r for r in self.runners if isinstance(r, Download)]
        self.graphs: dict[tuple, Callable[[], Any] | None] = {}
        self._staging: dict[tuple[int, int], np.ndarray] = {}     # (tensor, nbytes) -> pinned bytes
        planned = [u.planned_nbytes() for u in self.uploads]
        if all(n is not None for n in planned):
            self._capture(tuple(("host", n) for n in planned), None)

    def _key(self, state: ExecutionState) -> tuple:
        return tuple(u.source(state) for u in self.uploads)

    def replay(self, state: ExecutionState) -> bool:
        """Run it from its graph; False when there is none for these sources (yet)."""
        key = self._key(state)
        graph = self.graphs.get(key)
        if graph is None:
            return False
        for upload, source in zip(self.uploads, key):
            if source[0] == "host":
                array = upload.host_value(state)
                self._buffer(upload.tensor, array.nbytes)[: array.nbytes] = array.reshape(-1).view(np.uint8)
        graph()
        if self.downloads:
            self.backend.synchronize()
            for d in self.downloads:
                d.read(state, self._buffer(d.tensor, d.nbytes))
        return True

    def capture(self, state: ExecutionState) -> None:
        """After a step-by-step run: record the graph for its sources, for the next ones."""
        self._capture(self._key(state), state)

    def _capture(self, key: tuple, state: ExecutionState | None) -> None:
        if key in self.graphs or len(self.graphs) >= CACHE_SIZE:
            return
        try:
            self.graphs[key] = self.backend.capture(self._calls(key, state))
        except Exception as e:  # a step the driver cannot capture: stay step by step, answers unchanged
            log.warning("%s, steps %d-%d: no CUDA graph (%s); launching step by step",
                        self.where, self.run.start, self.run.stop - 1, e)
            self.graphs[key] = _FAILED

    def _calls(self, key: tuple, state: ExecutionState | None) -> list[Callable[[], Any]]:
        """The run's steps as calls to capture, each upload from the source its key entry names."""
        sources = iter(key)
        calls = []
        for runner in self.runners:
            if isinstance(runner, DeviceCall):
                calls.append(runner.captured())
            elif isinstance(runner, Upload):
                source = next(sources)
                staging = self._buffer(runner.tensor, source[1]) if source[0] == "host" else None
                calls.append(runner.captured(state, source, staging))
            elif isinstance(runner, Download):
                calls.append(runner.captured(self._buffer(runner.tensor, runner.nbytes)))
            else:
                raise TypeError(f"a device run holds a {type(runner).__name__}")
        return calls

    def _buffer(self, t: int, nbytes: int) -> np.ndarray:
        staging = self._staging.get((t, nbytes))
        if staging is None:
            staging = self._staging[t, nbytes] = self.backend.pinned(nbytes)
        return staging
