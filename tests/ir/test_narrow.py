"""32-bit index arithmetic (nngpu/ir/narrow.py): ranges are sound for C's integer operators,
a long value is narrowed only when it and its long operands are proven to fit, and what keeps
64 bits computes in 64 bits."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from nngpu.backends.opencl import TARGET as OPENCL
from nngpu.ir.expr import Buffer, Call, Const, Load, Var, walk
from nngpu.ir.fixedpoint import MBQM
from nngpu.ir.kernel import Kernel
from nngpu.ir.narrow import INT_MAX, _binary, narrow_indices, ranges


def _c_div(x: int, y: int) -> int:
    return int(x / y)


def _c_mod(x: int, y: int) -> int:
    return x - _c_div(x, y) * y


C_OPS = {"+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y, "/": _c_div, "%": _c_mod,
         "&": lambda x, y: x & y, "|": lambda x, y: x | y, "^": lambda x, y: x ^ y,
         "<<": lambda x, y: x << y, ">>": lambda x, y: x >> y}


@pytest.mark.parametrize("op", sorted(C_OPS))
def test_every_value_of_an_operator_lies_in_its_range(op):
    rng = np.random.default_rng(23)
    for _ in range(300):
        a = sorted(int(v) for v in rng.integers(-40, 40, 2))
        b = sorted(int(v) for v in rng.integers(-9, 9, 2))
        if op in ("<<", ">>"):
            b = [abs(b[0]) % 8, abs(b[0]) % 8 + abs(b[1]) % 4]
        r = _binary(op, tuple(a), tuple(b))
        if r is None:
            continue
        for x, y in itertools.product(range(a[0], a[1] + 1), range(b[0], b[1] + 1)):
            if op in ("/", "%") and y == 0:
                continue
            assert r[0] <= C_OPS[op](x, y) <= r[1], (op, a, b, x, y, r)


def _kernel(size: int, value_of) -> Kernel:
    i = Var("i", "long")
    out = Buffer(99, "float")
    return Kernel("nn_k", out, (size,), i, value_of(i))


def _source(kernel: Kernel) -> str:
    return OPENCL.renderer.render(narrow_indices(kernel))


def test_an_index_that_fits_is_an_int():
    x = Buffer(1, "float")
    src = _source(_kernel(98304, lambda i: Load(x, (i / 1536) % 64 * 24 + i % 24)))
    assert "int i = " in src and "long" not in src and "1536L" not in src


def test_a_grid_past_32_bits_keeps_64_bit_indices():
    x = Buffer(1, "float")
    src = _source(_kernel(INT_MAX + 10, lambda i: Load(x, i % 24)))
    assert "long i = " in src
    assert "(i % 24L)" in src   # i itself is long: the modulo computes in 64 bits, then fits


def test_a_product_past_32_bits_computes_in_64_bits():
    """i < 10^6 fits, i * 10^5 does not: the product casts i back to long."""
    x = Buffer(1, "float")
    kernel = _kernel(10 ** 6, lambda i: Load(x, i * Const(100000, "long") % Const(7, "long")))
    r = ranges(kernel)
    assert r[id(kernel.index)] == (0, 10 ** 6 - 1)
    src = _source(kernel)
    assert "int i = " in src and "(((long)i) * 100000L)" in src


def test_fixed_point_arithmetic_keeps_64_bits():
    """A helper's long result and what is computed from it are never narrowed."""
    q = Buffer(1, "u8")
    kernel = _kernel(64, lambda i: Call(MBQM, [Load(q, i).cast("long"), Const(1 << 30, "long"),
                                               Const(-3, "int")]).cast("float"))
    narrowed = narrow_indices(kernel)
    calls = [n for n in walk(narrowed.value) if isinstance(n, Call)]
    assert calls and calls[0].dtype == "long"
    assert narrowed.index.dtype == "int"
