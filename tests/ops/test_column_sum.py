"""The OpenCL CPU devices' column_sum kernel (kernels/column_sum.cl) for float32 MEAN and
REDUCE_SUM over a run of middle axes: it runs wherever its geometry applies (every vector width,
keep_dims or not, axes negative or repeated) and gives the bits of the per-output compensated
sum the generated kernel computes, emulated here in numpy float32 (IEEE, the same operations in
the same order), infinities and NaN included; where it does not apply, the generated kernel
still matches the reference."""
from __future__ import annotations

import numpy as np
import pytest

from nngpu.backends import device_backends
from nngpu.hal import OperationType as Op
from nngpu.ops.reduce import _column_vectors
from nngpu.testing import output, run_op, single_op_model, tensor

from .device_check import F32, _device, cpu_templates, flag, i32, vec

pytestmark = pytest.mark.skipif("opencl" not in device_backends(), reason="no OpenCL device here")

# name: (input shape, axes, the [B, R, C] the kernel sees, or None where it does not apply)
CASES = {
    "pool-vw16": ((2, 7, 9, 32), [1, 2], (2, 63, 32)),
    "pool-vw8": ((1, 5, 3, 24), [1, 2], (1, 15, 24)),
    "two-inner-axes": ((3, 4, 6, 4), [1], (3, 4, 24)),
    "leading-vw4": ((2, 3, 12), [0], (1, 2, 36)),
    "negative-repeated": ((2, 6, 5, 8), [-3, 1, 2], (2, 30, 8)),
    "long-column": ((1, 300, 40, 16), [1, 2], (1, 12000, 16)),
    "squeeze-excite-240": ((1, 14, 14, 240), [1, 2], (1, 196, 240)),
    "split-axes": ((2, 4, 3, 8), [1, 3], None),
    "narrow-columns": ((2, 5, 6), [1], None),
    "last-axis": ((4, 16), [1], None),
}


def _kahan(x: np.ndarray, b: int, r: int, c: int) -> np.ndarray:
    """The generated kernel's sum per output, in float32: y = v - comp, s = acc + y,
    comp = (s - acc) - y (0 where that is not finite), acc = s, over the rows in order."""
    rows = x.reshape(b, r, c)
    acc, comp = np.zeros((b, c), np.float32), np.zeros((b, c), np.float32)
    with np.errstate(invalid="ignore"):   # inf - inf: the correction dropped below
        for k in range(r):
            y = rows[:, k] - comp
            s = acc + y
            comp = (s - acc) - y
            comp = np.where(np.isfinite(comp), comp, np.float32(0))
            acc = s
    return acc


@pytest.mark.parametrize("op", [Op.MEAN, Op.REDUCE_SUM], ids=["mean", "sum"])
@pytest.mark.parametrize("keep", [False, True])
@pytest.mark.parametrize("case", CASES)
def test_column_sums_give_the_compensated_sums_bits(case, keep, op):
    shape, axes, seen = CASES[case]
    rng = np.random.default_rng(len(case))
    # magnitudes apart, so that the compensation shows
    value = (rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 4, shape)).astype(np.float32)
    # a slice that starts at inf sums to inf (its correction past the inf is dropped, not NaN)
    value.reshape(-1)[0] = np.inf
    if case == "long-column":
        value.reshape(-1)[1:3] = [-np.inf, np.nan]
    inputs = [tensor(F32, value), vec(axes), i32(int(keep)) if op == Op.MEAN else flag(keep)]
    out = output(F32, [0] * (len(shape) if keep else len(shape) - len(set(a % len(shape) for a in axes))))
    model = single_op_model(op, inputs, [out])
    templates = cpu_templates(model, inputs)
    assert len(templates) == (seen is not None)
    got = run_op(op, inputs, [out], device=_device("opencl"), version=13)
    ref = run_op(op, inputs, [out], version=13)
    assert got.status == ref.status == 0 and got.shapes == ref.shapes
    if seen is None:
        np.testing.assert_allclose(got.outputs[0], ref.outputs[0], rtol=1e-5, atol=1e-5)
        return
    b, r, c = seen
    assert f"#define B {b}\n#define R {r}\n#define C {c}\n" in templates[0]
    want = _kahan(value, b, r, c)
    if op == Op.MEAN:
        want = want / np.float32(r)
    np.testing.assert_array_equal(got.outputs[0].reshape(b, c).view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("b, c, vw, cv", [
    (1, 16, 16, 1),     # one vector: one work-item
    (1, 96, 16, 3),     # MobileNet v3 small's squeeze-and-excite means
    (1, 240, 16, 5),
    (1, 120, 8, 5),
    (1, 576, 16, 6),    # 36 vectors: 6 a work-item (9 would hold too many accumulators)
    (2, 32, 16, 2),     # two batches of two vectors: a batch a work-item
    (1, 1280, 16, 8),
    (3, 4, 4, 1),
    (1, 6, None, None),
])
def test_column_vectors_leave_two_work_items_of_interleaved_sums(b, c, vw, cv):
    assert _column_vectors(b, c) == (None if vw is None else (vw, cv))
