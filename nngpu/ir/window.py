"""Windows over images, defined once: the tap loops of convolutions and pooling.

`Image` gives a 4-D tensor's coordinate roles in NHWC or NCHW. `window` is the loop nest over
a (strided, padded, dilated) window's taps that fall inside the image, padding excluded, as
every forward convolution and pooling operation reads it; `transposed_window` is the same for
the gather form of a transposed convolution."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from .expr import Expr, Loop, Var
from .tensor import Coords


@dataclass(frozen=True)
class Image:
    """A 4-D image tensor: batch, height, width and channel extents, in either layout."""

    nchw: bool
    n: int
    h: int
    w: int
    c: int

    @staticmethod
    def of(shape: Sequence[int], nchw: bool) -> "Image":
        n, a, b, d = (int(x) for x in shape)
        return Image(nchw, n, b, d, a) if nchw else Image(nchw, n, a, b, d)

    @property
    def shape(self) -> tuple[int, int, int, int]:
        return (self.n, self.c, self.h, self.w) if self.nchw else (self.n, self.h, self.w, self.c)

    def split(self, c: Coords) -> tuple[Expr, Expr, Expr, Expr]:
        """(batch, row, column, channel) of coordinates in this layout."""
        return (c[0], c[2], c[3], c[1]) if self.nchw else (c[0], c[1], c[2], c[3])

    def at(self, batch, row, col, channel) -> Coords:
        axes = [batch, channel, row, col] if self.nchw else [batch, row, col, channel]
        return Coords(self.shape, axes)


@dataclass(frozen=True)
class Geometry:
    """A window's placement: kernel extents, strides, the padding before the first row and
    column, dilations, and the input extents."""

    kh: int
    kw: int
    stride_h: int
    stride_w: int
    pad_top: int
    pad_left: int
    in_h: int
    in_w: int
    dil_h: int = 1
    dil_w: int = 1


@dataclass
class Taps:
    """The loops over a window's taps and, inside them, the tap's input row and column."""

    loops: list[Loop]
    ky: Var
    kx: Var
    ih: Var
    iw: Var

    def then(self, *loops: Loop) -> "Taps":
        """These taps with more loops inside them (input channels, say)."""
        return Taps(self.loops + list(loops), self.ky, self.kx, self.ih, self.iw)


def tap_row(row: Expr, ky: Expr, g: Geometry) -> Expr:
    """The input row of filter row ky at output row `row`: row * stride - pad + ky * dilation."""
    return row * g.stride_h - g.pad_top + ky * g.dil_h


def tap_col(col: Expr, kx: Expr, g: Geometry) -> Expr:
    return col * g.stride_w - g.pad_left + kx * g.dil_w


def inside(ih: Expr, iw: Expr, g: Geometry) -> Expr:
    """The tap falls inside the image (not in the padding)."""
    return (ih >= 0) & (ih < g.in_h) & (iw >= 0) & (iw < g.in_w)


def window(row: Expr, col: Expr, g: Geometry) -> Taps:
    """Taps of the window whose output position is (row, col), skipped when outside the image."""
    ky, kx, ih, iw = Var("ky", "int"), Var("kx", "int"), Var("ih", "long"), Var("iw", "long")
    rows = Loop(ky, g.kh, lets=[(ih, tap_row(row, ky, g))], guards=[(ih >= 0) & (ih < g.in_h)])
    cols = Loop(kx, g.kw, lets=[(iw, tap_col(col, kx, g))], guards=[(iw >= 0) & (iw < g.in_w)])
    return Taps([rows, cols], ky, kx, ih, iw)


def transposed_window(row: Expr, col: Expr, g: Geometry) -> Taps:
    """Taps of a transposed convolution's output (row, col), output-stationary: the input row
    ih with ih * stride + ky == row + pad, for each filter row ky."""
    ky, kx, ih, iw = Var("ky", "int"), Var("kx", "int"), Var("ih", "long"), Var("iw", "long")
    ty, tx = Var("ty", "long"), Var("tx", "long")
    rows = Loop(ky, g.kh, lets=[(ty, row + g.pad_top - ky), (ih, ty / g.stride_h)],
                guards=[(ty >= 0) & (ty % g.stride_h).eq(0) & (ih < g.in_h)])
    cols = Loop(kx, g.kw, lets=[(tx, col + g.pad_left - kx), (iw, tx / g.stride_w)],
                guards=[(tx >= 0) & (tx % g.stride_w).eq(0) & (iw < g.in_w)])
    return Taps([rows, cols], ky, kx, ih, iw)
