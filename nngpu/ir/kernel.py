"""A kernel: one thread per element of an output tensor, storing one Compute into a buffer."""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from .expr import Buffer, Expr, Load, Var, walk
from .tensor import Tensor, kernel_coords, size_of


@dataclass(eq=False)
class Kernel:
    name: str
    out: Buffer
    shape: tuple[int, ...]
    index: Var           # the flat element index the value is written at
    value: Expr

    @property
    def size(self) -> int:
        return size_of(self.shape)

    @cached_property
    def inputs(self) -> list[Buffer]:
        """The buffers the kernel reads, in the order they first appear (its parameter order)."""
        seen: dict[int, Buffer] = {}
        for node in walk(self.value):
            if isinstance(node, Load) and node.buffer.key not in seen:
                seen[node.buffer.key] = node.buffer
        return list(seen.values())


def store(name: str, out: Buffer, value: Tensor) -> Kernel:
    """The kernel writing every element of `value` into `out`."""
    i, coords = kernel_coords(value.shape)
    expr = value.load(coords)
    if expr.dtype != out.dtype:
        expr = expr.cast(out.dtype)
    return Kernel(name, out, tuple(value.shape), i, expr)
