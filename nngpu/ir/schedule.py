"""How a generated kernel is launched: a Schedule (chosen per target, compiler/target.py) and
the Grid it gives a kernel. The renderer frames a kernel's body by the same schedule that its
backend launches it with, so the two cannot disagree."""
from __future__ import annotations

import math
from dataclasses import dataclass

from .expr import Const, Expr, Loop, Reduce, Select
from .kernel import Kernel
from .narrow import INT_MAX
from .vectorize import vector_width


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
    CPU device); with `declare_group` the kernel tells its compiler the group size.

    With `reduce_group`, a kernel whose outputs are each one long reduction (a slice's maximum or
    sum: see block_reduce) runs a work-group of that many threads per output instead: each thread
    folds a strided part of the reduction, and the group combines the parts as a tree in local
    (shared) memory. Targets without fast local memory (CPU devices) leave it None: there one
    thread walks each reduction.

    With `vector` (a width up to 16), a float elementwise kernel (ir/vectorize.py) runs a vector
    of that many neighbouring outputs a thread, or of 8 or 4 where its size needs them."""

    group: int | None = 256
    per_thread: int = 1
    declare_group: bool = False
    reduce_group: int | None = None
    vector: int = 1

    def __post_init__(self) -> None:
        if self.per_thread < 1 or (self.group is not None and self.group < 1):
            raise ValueError(f"a schedule needs positive sizes: {self}")
        if self.vector < 1 or (self.vector > 1 and self.per_thread > 1):
            raise ValueError(f"a schedule takes either vectors or several outputs a thread: {self}")
        if self.declare_group and self.group is None:
            raise ValueError("a schedule can declare only a group size it fixes")
        r = self.reduce_group
        if r is not None and (r < 2 or r & (r - 1)):
            raise ValueError(f"a reduction's work-group halves down to one thread: {r} is not a power of two")

    def block_reduce(self, kernel: Kernel) -> Reduce | None:
        """The reduction a work-group computes for each output of `kernel`, or None (one thread
        an output): see block_reduce below."""
        return block_reduce(kernel, self.reduce_group) if self.reduce_group else None

    def launch(self, kernel: Kernel) -> Grid:
        """The grid a generated kernel runs on (its frame follows the same choice)."""
        if self.block_reduce(kernel) is not None:
            return Grid((kernel.size * self.reduce_group,), (self.reduce_group,))
        lanes = self.lanes(kernel)
        if lanes > 1:
            return self.flat(kernel.size // lanes)
        return self.grid(kernel.size)

    def lanes(self, kernel: Kernel) -> int:
        """How many outputs of `kernel` a thread computes as one vector (1: none)."""
        return vector_width(kernel, self.vector) if self.vector > 1 else 1

    def grid(self, size: int) -> Grid:
        """The launch of a kernel over `size` outputs (threads past it return at once)."""
        return self.flat(-(-size // self.per_thread))

    def flat(self, threads: int, group: int | None = None) -> Grid:
        """`threads` threads in whole groups of `group`, else of the schedule's (a hand-written
        kernel runs one per work item)."""
        group = group or self.group
        if group is None:
            return Grid((threads,), None)
        return Grid((-(-threads // group) * group,), (group,))


def constant_bounds(loop: Loop) -> tuple[int, int] | None:
    """(start, stop) of a loop whose bounds are constants (stop no lower than start), else None."""
    start, stop = (b.value if isinstance(b, Const) else b for b in (loop.start, loop.stop))
    if not (isinstance(start, int) and isinstance(stop, int)):
        return None
    return start, max(stop, start)


def constant_prefix(red: Reduce) -> list[tuple[int, int]]:
    """(start, stop) of the reduction's leading loops whose bounds are constants: the loops a
    work-group shares, walked as one flattened range."""
    bounds = []
    for loop in red.loops:
        found = constant_bounds(loop)
        if found is None:
            break
        bounds.append(found)
    return bounds


def block_reduce(kernel: Kernel, group: int) -> Reduce | None:
    """The one reduction of `kernel` that a work-group of `group` threads can share: every output
    computes exactly one Reduce, outside any select branch (every thread of the group must reach
    the group's barriers), with one associative accumulator and leading loops of constant bounds
    that together make at least `group` iterations (each thread takes every group-th of them).
    None otherwise."""
    found: list[Reduce] = []
    branched: list[Reduce] = []
    seen: set[tuple[int, bool]] = set()
    todo: list[tuple[Expr, bool]] = [(kernel.value, False)]   # (node, inside a select branch)
    while todo:
        node, in_branch = todo.pop()
        if (id(node), in_branch) in seen:
            continue
        seen.add((id(node), in_branch))
        if isinstance(node, Reduce):
            (branched if in_branch else found).append(node)
        elif isinstance(node, Select):
            todo += [(node.cond, in_branch), (node.a, True), (node.b, True)]
        else:
            todo += [(child, in_branch) for child in node.children()]
    reduces = {id(r): r for r in found + branched}
    if len(reduces) != 1 or branched:
        return None
    red = found[0]
    if len(red.accs) != 1 or not red.accs[0].associative:
        return None
    iterations = math.prod(stop - start for start, stop in constant_prefix(red))
    if not group <= iterations <= INT_MAX or kernel.size * group > INT_MAX:   # 32-bit thread and flat indices
        return None
    return red
