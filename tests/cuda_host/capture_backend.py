"""The host CUDA backend with streams and stream capture, as CUDA defines them: work issued to
a stream while it captures is recorded into its graph, not run; a graph launch runs what was
recorded. Each recorded call notes the thread that issued it, so a test can see whether work
from another thread landed in an open capture (what a stream shared by plans would allow)."""
from __future__ import annotations

import copy
import functools
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from .host_backend import HostCudaBackend


@dataclass
class HostStream:
    recording: list[tuple[int, Callable[[], Any]]] | None = None   # (issuing thread, call) while capturing
    lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class Captures:
    """What every capture recorded, and the work other threads issued while one was open."""
    graphs: list[tuple[int, list[int]]] = field(default_factory=list)   # (capturing thread, issuers)
    open: int = 0
    overlapped: int = 0                  # calls run by another thread while a capture was open
    hold: Callable[[], None] | None = None   # called in each capture, after its first step
    lock: threading.Lock = field(default_factory=threading.Lock)


class CapturingHostBackend(HostCudaBackend):
    graphs = True

    def __init__(self, captures: Captures) -> None:
        super().__init__()
        self.captures = captures
        self.stream = HostStream()

    def for_plan(self) -> "CapturingHostBackend":
        plan = copy.copy(self)      # the device's compiled kernels and memory, a stream of its own
        plan.stream = HostStream()
        return plan

    def _issue(self, run: Callable[[], Any]) -> None:
        with self.stream.lock:
            if self.stream.recording is not None:
                self.stream.recording.append((threading.get_ident(), run))
                return
        with self.captures.lock:
            if self.captures.open:
                self.captures.overlapped += 1
        run()

    def launch(self, kernel, global_size: int, args: list) -> None:
        self._issue(functools.partial(super().launch, kernel, global_size, args))

    def gemm(self, a, b, c, m: int, n: int, k: int, b_transposed: bool = False, relaxed: bool = False,
             half: bool = False) -> None:
        self._issue(functools.partial(super().gemm, a, b, c, m, n, k, b_transposed, relaxed, half))

    def copy(self, dst, src, nbytes: int, dst_offset: int = 0, src_offset: int = 0) -> None:
        self._issue(functools.partial(super().copy, dst, src, nbytes, dst_offset, src_offset))

    def stage_in(self, buf, staging: np.ndarray, nbytes: int) -> None:
        self._issue(functools.partial(buf.__setitem__, slice(0, nbytes), staging[:nbytes]))

    def stage_out(self, staging: np.ndarray, buf, nbytes: int) -> None:
        self._issue(functools.partial(staging.__setitem__, slice(0, nbytes), buf[:nbytes]))

    def pinned(self, nbytes: int) -> np.ndarray:
        return np.zeros(max(int(nbytes), 1), np.uint8)

    def address(self, buf) -> int:
        return int(buf.ctypes.data)

    def capture(self, steps: list[Callable[[], Any]]) -> Callable[[], None]:
        """Record the steps on this stream; returns the graph's launch (itself stream work)."""
        with self.stream.lock:
            if self.stream.recording is not None:   # CUDA: the stream is already capturing
                raise RuntimeError("cudaErrorStreamCaptureUnsupported: the stream is capturing")
            self.stream.recording = []
        with self.captures.lock:
            self.captures.open += 1
        try:
            for k, step in enumerate(steps):
                step()
                if k == 0 and self.captures.hold is not None:
                    self.captures.hold()
        finally:
            with self.stream.lock:
                recorded, self.stream.recording = self.stream.recording, None
            with self.captures.lock:
                self.captures.open -= 1
                self.captures.graphs.append((threading.get_ident(), [t for t, _ in recorded]))
        calls = [run for _, run in recorded]
        return functools.partial(self._issue, lambda: [run() for run in calls])   # the graph's launch
