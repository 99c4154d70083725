"""How a generated kernel is launched: a Schedule (chosen per target, compiler/target.py) and
the Grid it gives a kernel of a given size. The renderer frames a kernel's body by the same
schedule that its backend launches it with, so the two cannot disagree."""
from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Grid:
    """A launch: threads per dimension (a multiple of the group's), and the work-group (CUDA:
    block) size, None where the driver chooses it."""

    threads: tuple[int, ...]
    group: tuple[int, ...] | None

    @property
    def total(self) -> int:
        return math.prod(self.threads)


@dataclass(frozen=True)
class Schedule:
    """How a target runs a generated kernel over its output's `size` elements: 1-D work-groups of
    `group` threads (None: the driver's choice), each thread computing `per_thread` outputs that
    lie a grid apart (adjacent threads, adjacent elements: coalesced on a GPU, one vector on a
    CPU device); with `declare_group` the kernel tells its compiler the group size."""

    group: int | None = 256
    per_thread: int = 1
    declare_group: bool = False

    def __post_init__(self) -> None:
        if self.per_thread < 1 or (self.group is not None and self.group < 1):
            raise ValueError(f"a schedule needs positive sizes: {self}")
        if self.declare_group and self.group is None:
            raise ValueError("a schedule can declare only a group size it fixes")

    def grid(self, size: int) -> Grid:
        """The launch of a kernel over `size` outputs (threads past it return at once)."""
        threads = -(-size // self.per_thread)
        if self.group is None:
            return Grid((threads,), None)
        return Grid((-(-threads // self.group) * self.group,), (self.group,))

    def flat(self, size: int) -> Grid:
        """The launch of a hand-written kernel that runs one thread per work item, `size` of them."""
        return Grid((size,), None) if self.group is None else Grid((-(-size // self.group) * self.group,), (self.group,))
