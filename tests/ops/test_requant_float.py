"""FloatRequantizer: the float64 requantization of exact accumulators gives the int64
reference's MultiplyByQuantizedMultiplier bits, ties included, and takes the int64 path when
its exactness bound does not hold; as numpy passes and as the compiled loop alike."""
from __future__ import annotations

import numpy as np
import pytest

from nngpu.ops.lib.quant import multiply_by_quantized_multiplier, wrap_int32
from nngpu.ops.lib.requant_float import FloatRequantizer

pytestmark = pytest.mark.usefixtures("cpu_loops")


def _reference(x: np.ndarray, mults, shifts, zp: int, lo: int, hi: int) -> np.ndarray:
    y = multiply_by_quantized_multiplier(wrap_int32(x.astype(np.int64)), mults, shifts) + zp
    return np.clip(y, lo, hi)


def _multipliers(rng: np.random.Generator, kind: str, channels: int) -> np.ndarray:
    if kind == "random":
        return rng.integers(1 << 30, 1 << 31, channels)
    # Round multipliers (0.5, 0.75, ...) make exact ties of both roundings frequent.
    return rng.integers(4, 8, channels) << 28


@pytest.mark.parametrize("kind", ["random", "ties"])
@pytest.mark.parametrize("channels", [1, 5])
def test_float_path_matches_the_int64_reference(kind, channels):
    rng = np.random.default_rng([31, channels, len(kind)])
    taken = 0
    for _ in range(300):
        mults = _multipliers(rng, kind, channels)
        shifts = rng.integers(-14, 3, channels)
        zp = int(rng.integers(-128, 128))
        lo, hi = sorted(int(v) for v in rng.integers(-300, 300, 2))
        bound = int(rng.choice([40, 3000, 1 << 19]))
        x = rng.integers(-bound, bound + 1, (64, channels)).astype(np.float32 if bound < 1 << 20 else np.float64)
        bias = rng.integers(-bound, bound + 1, channels)
        requantizer = FloatRequantizer(mults, shifts, zp, lo, hi, bias)
        taken += np.abs(x).max() + np.abs(bias).max() <= requantizer.max_one
        out = np.empty(x.shape, np.int32)
        requantizer(x, out)
        np.testing.assert_array_equal(out, _reference(x + bias, mults, shifts, zp, lo, hi))
    assert taken > 250, "the float path should serve accumulators of these sizes"


@pytest.mark.parametrize("signed", [False, True])
def test_long_right_shifts_take_two_floors(signed):
    """A small multiplier (shift -15 and beyond) with a large bias: past one floor's exact range,
    within two floors'."""
    rng = np.random.default_rng([32, signed])
    lo, hi, zp = (-128, 127, -5) if signed else (0, 255, 130)
    two = 0
    for _ in range(200):
        mults, shifts = rng.integers(1 << 30, 1 << 31, 4), rng.integers(-26, -14, 4)
        bias = rng.integers(-(1 << 22), 1 << 22, 4)
        x = rng.integers(-(1 << 20), 1 << 20, (50, 4)).astype(np.float32)
        requantizer = FloatRequantizer(mults, shifts, zp, lo, hi, bias)
        need = np.abs(x).max() + np.abs(bias).max()
        two += requantizer.max_one < need <= requantizer.max_two
        out = np.empty(x.shape, np.int8 if signed else np.uint8)
        requantizer(x, out)
        np.testing.assert_array_equal(out, _reference(x + bias, mults, shifts, zp, lo, hi))
    assert two > 60


def test_large_accumulators_take_the_int64_path():
    """|x * M| past 2^52, and x << left past int32 (which the reference wraps)."""
    mults, shifts = np.array([1 << 30, (1 << 31) - 1]), np.array([-3, 1])
    requantizer = FloatRequantizer(mults, shifts, 0, -(1 << 40), 1 << 40)
    x = np.array([[1 << 23, -(1 << 30) - 5], [7, 3]], dtype=np.float64)
    assert np.abs(x).max() > max(requantizer.max_one, requantizer.max_two)
    out = np.empty(x.shape, np.int64)
    requantizer(x, out)
    np.testing.assert_array_equal(out, _reference(x, mults, shifts, 0, -(1 << 40), 1 << 40))


def test_a_clamp_at_the_zero_point_skips_the_correction_for_negative_values():
    """With a RELU clamp the h < 0 correction changes nothing; the results still match."""
    mults, shifts = np.array([3 << 28]), np.array([-4])
    assert not FloatRequantizer(mults, shifts, 10, 10, 255).corrects
    assert FloatRequantizer(mults, shifts, 10, 9, 255).corrects
    x = np.arange(-3000, 3000, dtype=np.float32).reshape(-1, 1)
    out = np.empty(x.shape, np.int32)
    FloatRequantizer(mults, shifts, 10, 10, 255)(x, out)
    np.testing.assert_array_equal(out, _reference(x, mults, shifts, 10, 10, 255))


def test_a_proven_bound_skips_the_check_only_when_it_is_within_range():
    mults, shifts = np.array([1 << 30]), np.array([-5])
    assert not FloatRequantizer(mults, shifts, 0, 0, 255, bound=1000.0).checked
    assert not FloatRequantizer(mults, shifts, 0, 0, 255, bound=float(1 << 21)).checked    # two floors
    assert FloatRequantizer(mults, shifts, 0, 0, 255, bound=float(1 << 40)).checked
    assert FloatRequantizer(mults, shifts, 0, 0, 255).checked


def test_a_non_contiguous_output_is_written_in_place():
    mults, shifts = np.array([3 << 28, 5 << 28]), np.array([-2, -6])
    x = np.arange(-40, 40, dtype=np.float64).reshape(40, 2)
    out = np.zeros((40, 4), np.int16)[:, ::2]
    FloatRequantizer(mults, shifts, 3, -100, 100)(x, out)
    np.testing.assert_array_equal(out, _reference(x, mults, shifts, 3, -100, 100))


def test_a_bound_per_channel_is_proven_against_each_channel_own_limit():
    """Channel 0 has a large multiplier (a small exact range) and small sums, channel 1 the
    reverse: the largest bound exceeds the smallest limit, yet each channel is within its own."""
    mults, shifts = np.array([(1 << 31) - 1, 1 << 30]), np.array([3, -5])
    requantizer = FloatRequantizer(mults, shifts, 0, -128, 127, bound=np.array([1000.0, 1e6]))
    assert 1e6 > requantizer.max_one and not requantizer.checked
    assert FloatRequantizer(mults, shifts, 0, -128, 127, bound=np.array([1e6, 1000.0])).checked
    x = np.array([[-1000, 1e6], [999, -1e6], [3, 5]])
    out = np.empty(x.shape, np.int8)
    requantizer(x, out)
    np.testing.assert_array_equal(out, _reference(x, mults, shifts, 0, -128, 127))
