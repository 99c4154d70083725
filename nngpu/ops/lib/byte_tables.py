"""Lookups in tables indexed by stored 8-bit values: one input's byte (256 entries) or two
inputs' bytes (65,536 entries). The numpy plan runs 8-bit elementwise operations this way, as
ByteTable / PairTable kernels, whose tables its fusion (compiler/numpy_fuse.py) composes.

np.take converts its indices to intp first; over a whole tensor that conversion is a pass of 8
bytes per element through memory, so contiguous tensors go in blocks whose indices stay in cache."""
from __future__ import annotations

from typing import Callable, Sequence

import numpy as np

from ...hal.types import OperandType as T
from ..registry import OpError
from . import jit
from .device import reference_table

# Elements per block: 128 KiB of intp indices.
_BLOCK = 16384


def _compiled(table: np.ndarray, out: np.ndarray, entries: int):
    """The compiled loops, where they serve this lookup: a whole table (the loops index it
    unchecked), out contiguous and of the table's type."""
    if not (table.shape == (entries,) and out.flags.c_contiguous and out.dtype == table.dtype
            and table.dtype.itemsize in (1, 2, 4, 8)):
        return None
    return jit.kernels()


def as_words(table: np.ndarray, out: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The table and the output as unsigned words of their item size: a lookup copies entries,
    and the compiled loops then serve every element type (float16 and bool too)."""
    word = np.dtype(f"u{table.dtype.itemsize}")
    return table.view(word), out.view(word)


def byte_lookup(table: np.ndarray, x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """out = table[byte of x], for 8-bit x of out's shape."""
    stored = x.view(np.uint8)
    loops = _compiled(table, out, 256)
    if loops is not None and stored.flags.c_contiguous and stored.shape == out.shape:
        loops.byte_lookup(*as_words(table, out.reshape(-1)), stored.reshape(-1))
        return out
    if not (stored.flags.c_contiguous and out.flags.c_contiguous and stored.shape == out.shape):
        return np.take(table, stored, out=out, mode="clip")
    flat_x, flat_out = stored.reshape(-1), out.reshape(-1)
    index = np.empty(min(_BLOCK, flat_x.size), dtype=np.intp)
    for r in range(0, flat_x.size, _BLOCK):
        block = flat_x[r:r + _BLOCK]
        np.copyto(index[:block.size], block)
        np.take(table, index[:block.size], out=flat_out[r:r + _BLOCK], mode="clip")
    return out


def pair_lookup(table: np.ndarray, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> np.ndarray:
    """out = table[byte of a * 256 + byte of b], with a and b broadcast to out's shape."""
    a8, b8 = a.view(np.uint8), b.view(np.uint8)
    loops = _compiled(table, out, 65536)
    if loops is not None and out.size:
        # Broadcast views as [rows, last axis]: reshaping merges zero strides without a copy.
        rows = out.reshape(-1, out.shape[-1] if out.ndim else 1)
        wide = [np.broadcast_to(v, out.shape).reshape(rows.shape) for v in (a8, b8)]
        words, rows = as_words(table, rows)
        loops.pair_lookup(words, *wide, rows)
        return out
    same = a8.shape == b8.shape == out.shape
    if not (same and a8.flags.c_contiguous and b8.flags.c_contiguous and out.flags.c_contiguous):
        index = np.bitwise_or(np.left_shift(a8, 8, dtype=np.uint16), b8, dtype=np.uint16)
        return np.take(table, index, out=out, mode="clip")
    flat_a, flat_b, flat_out = a8.reshape(-1), b8.reshape(-1), out.reshape(-1)
    # The index is formed in uint16 (the narrow passes are the cheap ones), then widened once.
    narrow = np.empty(min(_BLOCK, flat_a.size), dtype=np.uint16)
    index = np.empty(narrow.size, dtype=np.intp)
    for r in range(0, flat_a.size, _BLOCK):
        k = flat_a[r:r + _BLOCK].size
        np.multiply(flat_a[r:r + _BLOCK], 256, out=narrow[:k], dtype=np.uint16)
        np.add(narrow[:k], flat_b[r:r + _BLOCK], out=narrow[:k])
        np.copyto(index[:k], narrow[:k])
        np.take(table, index[:k], out=flat_out[r:r + _BLOCK], mode="clip")
    return out


class ByteTable:
    """A bound kernel: output = table[byte of input 0]."""

    def __init__(self, table: np.ndarray):
        self.table = np.ascontiguousarray(table)

    def __call__(self, ins: Sequence[np.ndarray], outs: list[np.ndarray]) -> list[np.ndarray]:
        byte_lookup(self.table, ins[0], outs[0])
        return outs


class ElementwiseMap:
    """A bound kernel: output = fn(input 0), fn an elementwise function of arrays (returning the
    output's dtype). Fed by a ByteTable, it composes into one: fn of the table's entries."""

    def __init__(self, fn: Callable[[np.ndarray], np.ndarray]):
        self.fn = fn

    def __call__(self, ins: Sequence[np.ndarray], outs: list[np.ndarray]) -> list[np.ndarray]:
        np.copyto(outs[0], self.fn(ins[0]), casting="unsafe")
        return outs


class PairTable:
    """A bound kernel: output = table[byte of input 0 * 256 + byte of input 1], broadcast."""

    def __init__(self, table: np.ndarray):
        self.table = np.ascontiguousarray(table)

    def __call__(self, ins: Sequence[np.ndarray], outs: list[np.ndarray]) -> list[np.ndarray]:
        pair_lookup(self.table, ins[0], ins[1], outs[0])
        return outs


def reference_byte_table(node) -> ByteTable | None:
    """The bound kernel of an operation mapping the elements of its 8-bit input 0 on their own:
    its reference over all 256 values as a table (exact by construction). None for other input
    types, or where the reference refuses the parameters (it then says why when it runs)."""
    t = node.in_operand(0).type
    if t not in (T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED):
        return None
    try:
        table = reference_table(node)
    except OpError:
        return None
    if t == T.TENSOR_QUANT8_ASYMM_SIGNED:   # entry k is value k - 128; byte b holds value b ^ 0x80
        table = np.roll(table, 128, axis=0)
    return ByteTable(table)
