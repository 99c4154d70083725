"""byte_lookup / pair_lookup against plain fancy indexing: blocks across a tensor larger than
one block, broadcast and strided operands, int8 bytes; compiled and numpy alike."""
from __future__ import annotations

import numpy as np
import pytest

from nngpu.ops.lib.byte_tables import byte_lookup, pair_lookup

pytestmark = pytest.mark.usefixtures("cpu_loops")


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_byte_lookup(dtype):
    rng = np.random.default_rng(41)
    table = rng.integers(-128, 128, 256).astype(np.int8)
    for x in (rng.integers(0, 256, (3, 100, 70)).astype(np.uint8).view(dtype),     # several blocks
              rng.integers(0, 256, (50, 80)).astype(np.uint8).view(dtype)[:, ::3]):  # strided
        out = np.empty(x.shape, np.int8)
        byte_lookup(table, x, out)
        np.testing.assert_array_equal(out, table[x.view(np.uint8).astype(np.intp)])


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_pair_lookup(dtype):
    rng = np.random.default_rng(42)
    table = rng.integers(0, 256, 65536).astype(np.uint8)

    def draw(shape):
        return rng.integers(0, 256, shape).astype(np.uint8).view(dtype)

    cases = [(draw((3, 100, 70)), draw((3, 100, 70))),                 # same shape, several blocks
             (draw((1, 20, 30, 8)), draw((1, 1, 1, 8))),               # broadcast second
             (draw((8,)), draw((5, 8))),                               # broadcast first
             (draw((40, 60))[:, ::2], draw((40, 30)))]                 # strided
    for a, b in cases:
        out = np.empty(np.broadcast_shapes(a.shape, b.shape), np.uint8)
        pair_lookup(table, a, b, out)
        want = table[a.view(np.uint8).astype(np.intp) * 256 + b.view(np.uint8)]
        np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.bool_, np.int64])
def test_lookups_of_every_entry_type(dtype):
    """Tables of floats (DEQUANTIZE to float16 or float32), bools and wide integers."""
    rng = np.random.default_rng(43)
    table = rng.standard_normal(65536).astype(dtype)
    a, b = rng.integers(0, 256, (2, 6, 9)).astype(np.uint8)
    out = np.empty(a.shape, dtype)
    byte_lookup(table[:256], a, out)
    np.testing.assert_array_equal(out, table[a])
    pair_lookup(table, a, b[:1], out)
    np.testing.assert_array_equal(out, table[a.astype(np.intp) * 256 + b[:1]])
