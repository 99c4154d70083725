"""MEAN, REDUCE_* and ARGMAX / ARGMIN / TOPK_V2 through the driver, against independent loops."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from nngpu.hal.types import ErrorStatus
from nngpu.hal.types import OperandType as T
from nngpu.hal.types import OperationType as Op
from nngpu.runtime.interpreter import GraphRunner
from nngpu.modelutil import as_model_1_3
from nngpu.ops.lib.dtypes import is_tensor
from nngpu.testing import output, run_op, scalar, single_op_model, tensor

FAILED = {ErrorStatus.INVALID_ARGUMENT, ErrorStatus.GENERAL_FAILURE}


def run_reference(op, inputs, outputs) -> list[np.ndarray]:
    """The 1.3 reference path directly (run_op prepares as 1.2, which has no signed quant8)."""
    model = single_op_model(op, inputs, outputs)
    feeds = [v.value for v in inputs if not v.omitted and not v.const and is_tensor(v.type)]
    return GraphRunner(as_model_1_3(model)).run(feeds)


def _reduce(op, t, x, axes, keep, out_dims, scale=0.0, zp=0):
    keep_v = scalar(T.INT32, int(keep)) if op == Op.MEAN else scalar(T.BOOL, keep)
    return run_op(op, [tensor(t, x, scale, zp), tensor(T.TENSOR_INT32, axes, const=True), keep_v],
                  [output(t, out_dims, scale, zp)])


def _loop_reduce(x: np.ndarray, axes: set[int], fn, keep: bool) -> np.ndarray:
    """Group the elements by their kept coordinates with a plain loop, then reduce each group."""
    groups: dict[tuple, list] = {}
    for idx in itertools.product(*(range(n) for n in x.shape)):
        key = tuple(0 if d in axes else i for d, i in enumerate(idx))
        groups.setdefault(key, []).append(x[idx])
    shape = tuple(1 if d in axes else n for d, n in enumerate(x.shape))
    out = np.empty(shape, dtype=np.float64)
    for key, vals in groups.items():
        out[key] = fn(vals)
    if keep:
        return out
    kept = tuple(n for d, n in enumerate(x.shape) if d not in axes)
    return out.reshape(kept or (1,))


@pytest.mark.parametrize("op,fn", [(Op.REDUCE_SUM, sum), (Op.REDUCE_PROD, np.prod), (Op.REDUCE_MAX, max),
                                   (Op.REDUCE_MIN, min), (Op.MEAN, lambda v: sum(v) / len(v))])
@pytest.mark.parametrize("keep", [False, True])
def test_float_negative_and_duplicate_axes(op, fn, keep):
    rng = np.random.default_rng(1)
    x = rng.uniform(0.5, 1.5, size=(2, 3, 4)).astype(np.float32)
    axes = [-1, 2, 0]  # -1 and 2 are the same axis: reduced once
    want = _loop_reduce(x.astype(np.float64), {0, 2}, fn, keep)
    r = _reduce(op, T.TENSOR_FLOAT32, x, axes, keep, list(want.shape))
    assert r.status == ErrorStatus.NONE
    assert r.shapes[0] == list(want.shape)
    np.testing.assert_allclose(r.outputs[0], want, rtol=1e-5)


def test_all_axes_without_keep_dims_gives_shape_1():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    r = _reduce(Op.REDUCE_SUM, T.TENSOR_FLOAT32, x, [0, 1], False, [1])
    assert r.status == ErrorStatus.NONE and r.shapes[0] == [1]
    assert r.outputs[0][0] == 15.0


def test_empty_axes_is_identity():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    # a 0-extent constant is not a valid model operand, so run the kernel on the reference path
    out = run_reference(Op.REDUCE_SUM, [tensor(T.TENSOR_FLOAT32, x), tensor(T.TENSOR_INT32, np.zeros(0, np.int32)),
                                        scalar(T.BOOL, False)], [output(T.TENSOR_FLOAT32, [2, 3])])
    np.testing.assert_array_equal(out[0], x)


@pytest.mark.parametrize("op,fn", [(Op.REDUCE_ANY, any), (Op.REDUCE_ALL, all)])
def test_bool_reductions(op, fn):
    x = np.array([[[True, False], [False, False]], [[True, True], [True, False]]])
    want = _loop_reduce(x, {1}, fn, False).astype(bool)
    r = _reduce(op, T.TENSOR_BOOL8, x, [-2], False, [2, 2])
    assert r.status == ErrorStatus.NONE
    np.testing.assert_array_equal(r.outputs[0], want)


def test_mean_int8_truncates_toward_zero():
    # raw values with zero point 0 summing to negatives: C division truncates, not floors
    x = np.array([[-3, -2, -2], [5, 0, 0], [-128, -128, -127]], dtype=np.int8)
    want = [int(sum(int(v) for v in row) / 3) for row in x]  # Python int(a / b) truncates
    t = T.TENSOR_QUANT8_ASYMM_SIGNED
    out = run_reference(Op.MEAN, [tensor(t, x, 0.5, 0), tensor(T.TENSOR_INT32, [1], const=True), scalar(T.INT32, 0)],
                        [output(t, [3], 0.5, 0)])
    assert out[0].tolist() == want == [-2, 1, -127]


def test_mean_uint8_with_zero_point():
    x = np.array([[10, 11, 13, 200]], dtype=np.uint8)
    r = _reduce(Op.MEAN, T.TENSOR_QUANT8_ASYMM, x, [1], True, [1, 1], scale=0.1, zp=100)
    assert r.status == ErrorStatus.NONE
    assert r.outputs[0].tolist() == [[(10 + 11 + 13 + 200) // 4]]


@pytest.mark.parametrize("axes", [[2], [-3]])
def test_axis_out_of_range_fails(axes):
    x = np.zeros((2, 3), np.float32)
    r = _reduce(Op.REDUCE_MAX, T.TENSOR_FLOAT32, x, axes, False, [2])
    assert r.status in FAILED


def test_quant_reduce_needs_same_output_params():
    x = np.zeros((2, 3), np.uint8)
    r = run_op(Op.REDUCE_MAX, [tensor(T.TENSOR_QUANT8_ASYMM, x, 0.5, 3), tensor(T.TENSOR_INT32, [1], const=True),
                               scalar(T.BOOL, False)], [output(T.TENSOR_QUANT8_ASYMM, [2], 0.25, 3)])
    assert r.status in FAILED


# ---- ARGMAX / ARGMIN / TOPK_V2 ------------------------------------------------------------
@pytest.mark.parametrize("op", [Op.ARGMAX, Op.ARGMIN])
def test_arg_ties_take_first_index_axis_minus_1(op):
    x = np.array([[3, 7, 7, 1], [2, 2, 2, 2], [1, 0, 9, 0]], dtype=np.int32)
    pick = max if op == Op.ARGMAX else min
    want = [list(row).index(pick(row)) for row in x]
    r = run_op(op, [tensor(T.TENSOR_INT32, x), scalar(T.INT32, -1)], [output(T.TENSOR_INT32, [3])])
    assert r.status == ErrorStatus.NONE
    assert r.outputs[0].tolist() == want


def test_argmax_1d_gives_shape_1():
    r = run_op(Op.ARGMAX, [tensor(T.TENSOR_FLOAT16, [1.0, 5.0, 2.0]), scalar(T.INT32, 0)],
               [output(T.TENSOR_INT32, [1])])
    assert r.status == ErrorStatus.NONE and r.shapes[0] == [1] and r.outputs[0].tolist() == [1]


def test_argmin_bad_axis_fails():
    r = run_op(Op.ARGMIN, [tensor(T.TENSOR_FLOAT32, np.zeros((2, 2))), scalar(T.INT32, 2)],
               [output(T.TENSOR_INT32, [2])])
    assert r.status in FAILED


def test_topk_ties_put_larger_index_first():
    x = np.array([[5, 1, 5, 3, 5], [0, 0, 0, 0, 1]], dtype=np.uint8)
    k = 4
    want_idx = [sorted(range(5), key=lambda i: (-int(row[i]), -i))[:k] for row in x]
    r = run_op(Op.TOPK_V2, [tensor(T.TENSOR_QUANT8_ASYMM, x, 0.5, 2), scalar(T.INT32, k)],
               [output(T.TENSOR_QUANT8_ASYMM, [2, k], 0.5, 2), output(T.TENSOR_INT32, [2, k])])
    assert r.status == ErrorStatus.NONE
    assert r.outputs[1].tolist() == want_idx == [[4, 2, 0, 3], [4, 3, 2, 1]]
    assert r.outputs[0].tolist() == [[int(x[b, i]) for i in want_idx[b]] for b in range(2)]


@pytest.mark.parametrize("k", [0, 4])
def test_topk_bad_k_fails(k):
    r = run_op(Op.TOPK_V2, [tensor(T.TENSOR_FLOAT32, np.zeros((2, 3))), scalar(T.INT32, k)],
               [output(T.TENSOR_FLOAT32, [2, 0]), output(T.TENSOR_INT32, [2, 0])])
    assert r.status in FAILED
