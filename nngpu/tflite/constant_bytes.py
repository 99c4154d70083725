"""A model's operandValues while it is built: a list of 8-byte aligned chunks, joined into one
immutable `bytes` once, when the model is made.

A chunk that views immutable bytes (a weight read in place from the .tflite file's bytes) is
held by reference until then, so the weights exist twice at most while importing (the file's
bytes and the model's), never three times as with a growing bytearray copied into `bytes`."""
from __future__ import annotations

import bisect

import numpy as np

_ALIGN = 8


def _immutable(a: np.ndarray) -> bool:
    """Whether `a` views a `bytes` object, which nothing can change before the join."""
    base: object = a
    while True:
        if isinstance(base, np.ndarray) and base.base is not None:
            base = base.base
        elif isinstance(base, memoryview):
            base = base.obj
        else:
            return isinstance(base, bytes)


class ConstantBytes:
    """operandValues under construction (see the module docstring)."""

    def __init__(self) -> None:
        self._chunks: list[tuple[int, memoryview | bytes]] = []   # (offset, bytes at that offset)
        self._size = 0
        self._frozen: bytes | None = None

    def __len__(self) -> int:
        return self._size

    def append(self, value: np.ndarray) -> tuple[int, int]:
        """(offset, length) of `value`'s bytes, placed at the next 8-byte boundary."""
        return self._place(memoryview(value).cast("B") if _immutable(value) else value.tobytes())

    def extend(self, other: "ConstantBytes") -> int:
        """Append every chunk of `other` (a referenced subgraph's constants); returns the offset
        its offset 0 now has."""
        base = self._aligned()
        for offset, data in other._chunks:
            self._place(data, base + offset)
        return base

    def truncate(self, size: int) -> None:
        """Drop what was appended since the store was `size` bytes long (an operator undone)."""
        self._writable()
        while self._chunks and self._chunks[-1][0] >= size:
            self._chunks.pop()
        self._size = min(self._size, size)

    def read(self, offset: int, length: int) -> memoryview:
        """A read-only view of bytes [offset, offset + length): one value, as `append` placed it."""
        if self._frozen is not None:
            return memoryview(self._frozen)[offset: offset + length]
        k = bisect.bisect_right(self._chunks, offset, key=lambda chunk: chunk[0]) - 1
        if k >= 0:
            start, data = self._chunks[k]
            if offset + length <= start + len(data):
                return memoryview(data).toreadonly()[offset - start: offset - start + length]
        raise ValueError(f"no constant at [{offset}, {offset + length})")

    def freeze(self) -> bytes:
        """The bytes, made once (later calls return the same object); nothing appends after."""
        if self._frozen is None:
            pieces: list[memoryview | bytes] = []
            end = 0
            for offset, data in self._chunks:
                pieces += [bytes(offset - end), data]
                end = offset + len(data)
            pieces.append(bytes(self._size - end))
            self._frozen = b"".join(pieces)   # one allocation of the final size
            self._chunks = []
        return self._frozen

    def _aligned(self) -> int:
        return (self._size + _ALIGN - 1) // _ALIGN * _ALIGN

    def _place(self, data: memoryview | bytes, offset: int | None = None) -> tuple[int, int]:
        self._writable()
        offset = self._aligned() if offset is None else offset
        if len(data):
            self._chunks.append((offset, data))
        self._size = offset + len(data)
        return offset, len(data)

    def _writable(self) -> None:
        if self._frozen is not None:
            raise RuntimeError("the model's constants are made: nothing more can be appended")
