"""CUDA graph replay of a segment's device runs (capture.py says which steps form one).

A run is captured at prepare for uploads from host values of the shapes the plan knows (stream
capture records, it launches nothing), and replayed by each execution with one launch. Host
values reach the device through pinned staging buffers the graph copies from; downloads land in
pinned staging the graph copies to, read after the one wait the run's downloads need. An upload
from an IBuffer (a device value) is captured as a copy from that buffer's address, so the graphs
are keyed by where each upload comes from: another source (an IBuffer storage, a host value of
another size) runs step by step once and is captured then, at most CACHE_SIZE keys per run
(later ones stay step by step)."""
from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from ..ops.lib.dtypes import dtype_of, nbytes
from .capture import Run

if TYPE_CHECKING:
    from .plan import Segment, _State

log = logging.getLogger("nngpu.replay")

CACHE_SIZE = 16
_FAILED = None  # a key whose capture failed: run step by step


class Replay:
    """One device run of a segment, as graphs by upload sources."""

    def __init__(self, seg: "Segment", run: Run) -> None:
        self.seg, self.run = seg, run
        self.graphs: dict[tuple, Callable[[], Any] | None] = {}
        self._staging: dict[tuple[int, int], np.ndarray] = {}     # (tensor, nbytes) -> pinned bytes
        key = self._planned_key()
        if key is not None:
            self._capture(key, None)

    def _planned_key(self) -> tuple | None:
        """The key of uploads from host values of the shapes the plan knows (None: a shape is
        known only once a host step has run)."""
        key = []
        for t in self.run.uploads:
            if self.seg.spec.known.shapes.get(t) is None:
                return None
            key.append((t, "host", nbytes(*self._type(t))))
        return tuple(key)

    def _key(self, state: "_State") -> tuple[tuple, list[tuple[int, np.ndarray]]]:
        """Where each upload comes from, and the host values to stage."""
        backend, key, host = self.seg.plan.backend, [], []
        for t in self.run.uploads:
            value = state.device_inputs.get(t)
            if value is not None:
                key.append((t, "device", backend.address(value.buf), value.offset, value.nbytes))
            else:
                array = np.ascontiguousarray(self.seg.plan.lookup(state, self.seg, t))
                key.append((t, "host", array.nbytes))
                host.append((t, array))
        return tuple(key), host

    def replay(self, state: "_State") -> bool:
        """Run it from its graph; False when there is none for these sources (yet)."""
        key, host = self._key(state)
        graph = self.graphs.get(key)
        if graph is None:
            return False
        for t, array in host:
            self._buffer(t, array.nbytes)[: array.nbytes] = array.reshape(-1).view(np.uint8)
        self.seg.plan.transfers += len(host) + len(self.run.downloads)
        graph()
        if self.run.downloads:
            self.seg.plan.backend.synchronize()
            for t in self.run.downloads:
                shape, dtype = self._type(t)
                n = nbytes(shape, dtype)
                state.host[t] = self._buffer(t, n)[:n].view(dtype).reshape(shape).copy()
        return True

    def capture(self, state: "_State") -> None:
        """After a step-by-step run: record the graph for its sources, for the next ones."""
        self._capture(self._key(state)[0], state)

    def _capture(self, key: tuple, state: "_State | None") -> None:
        if key in self.graphs or len(self.graphs) >= CACHE_SIZE:
            return
        try:
            self.graphs[key] = self.seg.plan.backend.capture(self._calls(key, state))
        except Exception as e:  # a step the driver cannot capture: stay step by step, answers unchanged
            log.warning("segment from operation %d, steps %d-%d: no CUDA graph (%s); launching step by step",
                        self.seg.spec.start, self.run.start, self.run.stop - 1, e)
            self.graphs[key] = _FAILED

    def _calls(self, key: tuple, state: "_State | None") -> list[Callable[[], Any]]:
        """The run's steps as calls to capture, each upload from the source its key entry names."""
        seg, backend = self.seg, self.seg.plan.backend
        sources = iter(key)
        calls = []
        for i in range(self.run.start, self.run.stop):
            step = seg.steps[i]
            kind = step[0]
            if kind in ("launch", "gemm"):
                calls.append(step[1])
            elif kind == "upload":
                source = next(sources)
                if source[1] == "device":   # plan.upload: the IBuffer's copy, as step by step
                    calls.append(functools.partial(seg.plan.upload, state, seg, step[1], step[2]))
                else:
                    n = source[2]
                    calls.append(functools.partial(backend.stage_in, step[2], self._buffer(step[1], n), n))
            else:
                n = nbytes(*self._type(step[1]))
                calls.append(functools.partial(backend.stage_out, self._buffer(step[1], n), step[2], n))
        return calls

    def _buffer(self, t: int, nbytes: int) -> np.ndarray:
        staging = self._staging.get((t, nbytes))
        if staging is None:
            staging = self._staging[t, nbytes] = self.seg.plan.backend.pinned(nbytes)
        return staging

    def _type(self, t: int) -> tuple[tuple[int, ...], np.dtype]:
        """Tensor t's shape, as the plan knows it, and dtype."""
        return tuple(self.seg.spec.known.shapes[t]), np.dtype(dtype_of(self.seg.plan.graph.operands[t].type))
