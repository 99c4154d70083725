"""Tensors in the kernel IR: a stored buffer, or a computation fused into its consumer.

A device implementation sees its inputs as `Tensor`s and describes each output as a
`Compute`: a function from output coordinates to the element's value. Whether an input is a
buffer or another operation's Compute (fusion) is invisible to it: both answer `load(coords)`,
the Compute by evaluating its function at those coordinates. The compiler stores a Compute
with one kernel, or hands it to its consumer."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from .expr import Buffer, Const, Expr, Load, Var, as_expr


def strides(shape: Sequence[int]) -> list[int]:
    """Element strides of a C-contiguous tensor."""
    out, acc = [0] * len(shape), 1
    for k in range(len(shape) - 1, -1, -1):
        out[k] = acc
        acc *= int(shape[k])
    return out


def size_of(shape: Sequence[int]) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


def linear(axes: Sequence[Expr | int], shape_strides: Sequence[int], base: int = 0) -> Expr:
    """base + sum(axis * stride), as a 64-bit index."""
    out: Expr = Const(base, "long")
    for axis, s in zip(axes, shape_strides):
        if s:
            out = out + as_expr(axis, "long").cast("long") * s
    return out


class Coords:
    """Coordinates of one element of `shape` (one Expr per axis) and, when it is cheaper, its
    flat index (for contiguous reads at the kernel's own element)."""

    def __init__(self, shape: Sequence[int], axes: Sequence[Expr], flat: Expr | None = None) -> None:
        self.shape = tuple(int(d) for d in shape)
        self.axes = list(axes)
        self.flat = flat

    def __getitem__(self, k: int) -> Expr:
        return self.axes[k]

    def __len__(self) -> int:
        return len(self.axes)

    @staticmethod
    def unravel(flat: Expr, shape: Sequence[int], hint: str = "") -> "Coords":
        """The coordinates of flat index `flat` in a C-contiguous `shape`."""
        shape = tuple(int(d) for d in shape)
        st = strides(shape)
        axes: list[Expr] = []
        for k, (d, s) in enumerate(zip(shape, st)):
            if d == 1:
                axes.append(Const(0, "long"))
                continue
            a = flat / s if s != 1 else flat
            if k:
                a = a % d
            named = hint is not None and not isinstance(a, (Var, Const))
            axes.append(a.named(f"{hint}c{k}") if named else a)
        return Coords(shape, axes, flat)

    def flat_in(self, shape: Sequence[int]) -> Expr:
        """The flat index of these coordinates in a C-contiguous tensor of `shape`."""
        if self.flat is not None and self.shape == tuple(shape):
            return self.flat
        return linear(self.axes, strides(shape))

    def replace(self, k: int, axis: Expr) -> "Coords":
        """These coordinates with axis k moved (the flat index no longer applies)."""
        axes = list(self.axes)
        axes[k] = axis
        return Coords(self.shape, axes)


def kernel_coords(shape: Sequence[int]) -> tuple[Var, Coords]:
    """The flat element index `i` of a kernel over `shape`, and its coordinates c0..c{r-1}."""
    i = Var("i", "long")
    return i, Coords.unravel(i, shape, hint="")


def broadcast(coords: Coords, shape: Sequence[int]) -> Coords:
    """Coordinates into a (numpy-broadcast) input of `shape`: right-aligned, size-1 axes at 0."""
    shape = tuple(int(d) for d in shape)
    if shape == coords.shape:
        return coords
    offset = len(coords.shape) - len(shape)
    axes = [Const(0, "long") if d == 1 else coords.axes[offset + k] for k, d in enumerate(shape)]
    return Coords(shape, axes)


class Tensor:
    shape: tuple[int, ...]
    dtype: str

    def load(self, coords: Coords) -> Expr:
        raise NotImplementedError

    def at(self, flat: Expr) -> Expr:
        """The element at flat index `flat`."""
        return self.load(Coords.unravel(flat, self.shape, hint=None))

    @property
    def size(self) -> int:
        return size_of(self.shape)


class BufferTensor(Tensor):
    """A tensor stored contiguously in a kernel buffer."""

    def __init__(self, buffer: Buffer, shape: Sequence[int]) -> None:
        self.buffer = buffer
        self.shape = tuple(int(d) for d in shape)
        self.dtype = buffer.dtype
        self._strides = strides(self.shape)

    def load(self, coords: Coords) -> Expr:
        if coords.flat is not None and coords.shape == self.shape:
            return Load(self.buffer, coords.flat)
        return Load(self.buffer, linear(coords.axes, self._strides))

    def at(self, flat: Expr) -> Expr:
        return Load(self.buffer, flat)


class Compute(Tensor):
    """out[coords] = fn(coords): an operation's output before it is stored."""

    def __init__(self, shape: Sequence[int], dtype: str, fn: Callable[[Coords], Expr]) -> None:
        self.shape = tuple(int(d) for d in shape)
        self.dtype = dtype
        self.fn = fn

    def load(self, coords: Coords) -> Expr:
        value = self.fn(coords)
        return value if value.dtype == self.dtype else value.cast(self.dtype)


def elementwise(shape: Sequence[int], dtype: str, fn: Callable[..., Expr], *inputs: Tensor) -> Compute:
    """out = fn(in0, in1, ...) per element, the inputs broadcast to `shape`."""
    return Compute(shape, dtype, lambda c: fn(*[t.load(broadcast(c, t.shape)) for t in inputs]))


@dataclass(frozen=True)
class View:
    """What RESHAPE, SQUEEZE and EXPAND_DIMS build: the output is input `input`'s bytes under
    another shape, sharing its buffer when that is stored (else read through `compute`)."""

    input: int = 0

    def compute(self, inputs: Sequence[Tensor | None], shape: Sequence[int]) -> Compute:
        src = inputs[self.input]
        return Compute(shape, src.dtype, lambda c: src.at(c.flat_in(shape)))


@dataclass(frozen=True)
class Stored:
    """What a library kernel builds: it has written the operation's output, `tensor`, itself
    (consumers read that buffer; nothing stores a Compute for it)."""

    tensor: BufferTensor
