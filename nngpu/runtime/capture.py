"""Which steps of a segment run as one unit: the segmenting logic behind CUDA graph capture (see
replay.py), a pure function over the step list.

A device run is a maximal stretch of device steps: kernel launches, GEMMs and transfers (an
upload from a host value or an IBuffer's device copy, a download; captured, they go through
fixed pinned staging buffers). A host step is a run of its own and ends the device run before
it: it reads what that run downloads and writes what the next one uploads, so the device must
be waited for around it. The segment's end ends the last run: a barrier (whose key reads
downloaded values) or the model's outputs follow it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from ..compiler.steps import GemmStep, HostStep, KernelStep, Step, TemplateStep, Transfer


@dataclass(frozen=True)
class Run:
    start: int                      # steps[start:stop]
    stop: int
    host: bool                      # one host step; else device steps only
    uploads: tuple[int, ...] = ()   # the tensors its transfers move, in step order
    downloads: tuple[int, ...] = ()


def split_runs(steps: Sequence[Step]) -> list[Run]:
    """The steps as consecutive runs covering them all, in order."""
    runs: list[Run] = []
    start = 0
    for i, step in enumerate(steps):
        if isinstance(step, HostStep):
            if start < i:
                runs.append(_device_run(steps, start, i))
            runs.append(Run(i, i + 1, True))
            start = i + 1
        elif not isinstance(step, (KernelStep, TemplateStep, GemmStep, Transfer)):
            raise TypeError(f"step {i} is not a plan step: {type(step).__name__}")
    if start < len(steps):
        runs.append(_device_run(steps, start, len(steps)))
    return runs


def _device_run(steps: Sequence[Step], start: int, stop: int) -> Run:
    moves = [s for s in steps[start:stop] if isinstance(s, Transfer)]
    return Run(start, stop, False, tuple(s.tensor for s in moves if s.to_device),
               tuple(s.tensor for s in moves if not s.to_device))
