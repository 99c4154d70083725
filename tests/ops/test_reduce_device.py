"""Device kernels of the reductions, normalizations, arg-selection and resize match the numpy
reference: float within the corpus tolerances, quantized and integer results exactly."""
from __future__ import annotations

import numpy as np
import pytest

from nngpu.backends import device_backends
from nngpu.hal import OperandType as T
from nngpu.hal import OperationType as Op
from nngpu.testing import output, run_op, scalar, single_op_model, tensor
from . import device_check
from .device_check import F16, F32, Q8, S8, check_on_device, data, flag, fscalar, i32, segments, vec

REDUCTIONS = [Op.MEAN, Op.REDUCE_SUM, Op.REDUCE_PROD, Op.REDUCE_MAX, Op.REDUCE_MIN]
FLAGS = [(False, False), (True, False), (False, True)]   # (align_corners, half_pixel_centers)


def keep_dims(op, keep: bool):
    return i32(int(keep)) if op == Op.MEAN else scalar(T.BOOL, keep)


def kept_rank(rank: int, axes, keep: bool) -> int:
    return rank if keep else max(rank - len({a % rank for a in axes}), 1)


# ---- reductions ----------------------------------------------------------------------------
@pytest.mark.parametrize("op", REDUCTIONS)
@pytest.mark.parametrize("t", [F32, F16])
@pytest.mark.parametrize("axes, keep", [([1, 2], True), ([-1, 0, -1], False), ([0, 1, 2, 3], False)])
def test_float_reductions(op, t, axes, keep):
    x = tensor(t, data((2, 3, 4, 5), t, 0.6 if op == Op.REDUCE_PROD else 1.0))
    check_on_device(op, [x, vec(axes), keep_dims(op, keep)], t, kept_rank(4, axes, keep))


def test_mean_over_a_long_axis_is_accurate():
    x = tensor(F32, (np.random.default_rng(0).random((1, 4096, 3)) * 100 + 1000).astype(np.float32))
    check_on_device(Op.MEAN, [x, vec([1]), i32(0)], F32, 2)


def test_max_propagates_nan():
    v = data((3, 4))
    v[1, 2] = np.nan
    out = check_on_device(Op.REDUCE_MAX, [tensor(F32, v), vec([1]), keep_dims(Op.REDUCE_MAX, False)], F32, 1)
    assert np.isnan(out[1]) and not np.isnan(out[0])


@pytest.mark.parametrize("op", [Op.MEAN, Op.REDUCE_MAX, Op.REDUCE_MIN])
@pytest.mark.parametrize("t, zp", [(Q8, 3), (S8, -5)])
def test_quantized_reductions_are_exact(op, t, zp):
    x = tensor(t, data((3, 5, 4), t), 0.5, zp)
    check_on_device(op, [x, vec([0, 2]), keep_dims(op, False)], t, 1, scale=0.5, zero_point=zp)


@pytest.mark.parametrize("op", [Op.REDUCE_ALL, Op.REDUCE_ANY])
def test_bool_reductions(op):
    x = tensor(T.TENSOR_BOOL8, np.random.default_rng(3).random((4, 3, 2)) < 0.7)
    check_on_device(op, [x, vec([1]), keep_dims(op, True)], T.TENSOR_BOOL8, 3)


# ---- softmax -------------------------------------------------------------------------------
@pytest.mark.parametrize("t", [F32, F16])
@pytest.mark.parametrize("shape, axis", [((2, 10), -1), ((2, 3, 4, 5), 1), ((7,), 0)])
@pytest.mark.parametrize("op", [Op.SOFTMAX, Op.LOG_SOFTMAX])
def test_float_softmax(op, t, shape, axis):
    x = tensor(t, data(shape, t, 3.0))
    check_on_device(op, [x, fscalar(t, 0.7), i32(axis)], t, len(shape))


def test_softmax_without_axis():
    check_on_device(Op.SOFTMAX, [tensor(F32, data((3, 6))), fscalar(F32, 1.0)], F32, 2)


def test_softmax_reads_the_maximum_before_the_sum_loop():
    """The slice maximum is computed once, not again inside the loop of the sum."""
    ins = [tensor(F32, data((2, 10))), fscalar(F32, 1.0)]
    model = single_op_model(Op.SOFTMAX, ins, [output(F32, [0, 0])])
    source = segments(model, ins, "opencl")[0].kernels[0].source
    depth, deepest = 0, 0
    for line in source.splitlines():
        depth += line.count("{") - line.count("}")
        deepest = max(deepest, depth)
    assert deepest == 2, source  # the kernel body and one loop


@pytest.mark.parametrize("t, zp", [(Q8, 0), (S8, -128)])
@pytest.mark.parametrize("shape, axis, beta, scale", [((2, 10), -1, 1.0, 0.1), ((3, 4, 5), 1, 0.7, 0.5),
                                                      ((4, 300), -1, 1.3, 0.02)])
def test_quantized_softmax_is_exact(t, zp, shape, axis, beta, scale):
    x = tensor(t, data(shape, t), scale, 7 if t == Q8 else -7)
    check_on_device(Op.SOFTMAX, [x, fscalar(F32, beta), i32(axis)], t, len(shape), scale=1 / 256, zero_point=zp)


def test_quantized_softmax_of_equal_values_and_beyond_the_radius():
    x = np.array([[9, 9, 9, 9], [0, 255, 128, 254], [255, 0, 0, 0]], np.uint8)
    check_on_device(Op.SOFTMAX, [tensor(Q8, x, 0.5, 0), fscalar(F32, 1.0)], Q8, 2, scale=1 / 256)


def test_quantized_softmax_whose_sum_wraps_int32():
    """4096 equal values: the Q12.19 sum reaches 2^31 and wraps, as in the reference."""
    x = np.full((1, 4096), 77, np.uint8)
    check_on_device(Op.SOFTMAX, [tensor(Q8, x, 0.5, 0), fscalar(F32, 1.0)], Q8, 2, scale=1 / 256)


# ---- normalizations ------------------------------------------------------------------------
@pytest.mark.parametrize("t", [F32, F16])
@pytest.mark.parametrize("shape, axis", [((2, 3, 4), -1), ((2, 3, 4), 1), ((5,), 0)])
def test_float_l2_normalization(t, shape, axis):
    check_on_device(Op.L2_NORMALIZATION, [tensor(t, data(shape, t)), i32(axis)], t, len(shape))


def test_l2_normalization_of_zeros_uses_the_epsilon():
    check_on_device(Op.L2_NORMALIZATION, [tensor(F32, np.zeros((2, 3), np.float32))], F32, 2)


@pytest.mark.parametrize("t, zp_in, zp_out", [(Q8, 128, 128), (Q8, 3, 128), (S8, -3, 0)])
@pytest.mark.parametrize("shape, axis", [((4, 6), -1), ((3, 5, 2), 1), ((2, 700), -1)])
def test_quantized_l2_normalization_is_exact(t, zp_in, zp_out, shape, axis):
    x = tensor(t, data(shape, t), 0.1, zp_in)
    check_on_device(Op.L2_NORMALIZATION, [x, i32(axis)], t, len(shape), scale=1 / 128, zero_point=zp_out)


def test_quantized_l2_normalization_of_a_large_sum():
    """A sum of squares above 2^29: the inverse square root scales its input down first."""
    x = np.random.default_rng(4).integers(200, 256, (1, 9000)).astype(np.uint8)
    check_on_device(Op.L2_NORMALIZATION, [tensor(Q8, x, 0.1, 0)], Q8, 2, scale=1 / 128, zero_point=128)


def test_quantized_l2_normalization_of_a_zero_slice():
    x = np.array([[128, 128, 128], [128, 129, 127], [0, 255, 128]], np.uint8)
    out = check_on_device(Op.L2_NORMALIZATION, [tensor(Q8, x, 0.1, 128)], Q8, 2, scale=1 / 128, zero_point=128)
    assert out[0].tolist() == [128] * 3


@pytest.mark.parametrize("t", [F32, F16])
@pytest.mark.parametrize("radius, axis", [(2, -1), (0, 1), (9, 0)])
def test_local_response_normalization(t, radius, axis):
    ins = [tensor(t, data((3, 4, 7), t)), i32(radius), fscalar(t, 1.5), fscalar(t, 0.3), fscalar(t, 0.75), i32(axis)]
    check_on_device(Op.LOCAL_RESPONSE_NORMALIZATION, ins, t, 3)


@pytest.mark.parametrize("t", [F32, F16])
@pytest.mark.parametrize("nchw", [False, True])
def test_instance_normalization(t, nchw):
    x = (data((2, 3, 4, 5), t, 3.0) + 2).astype(np.float16 if t == F16 else np.float32)
    ins = [tensor(t, x), fscalar(t, 1.5), fscalar(t, -0.5), fscalar(t, 1e-3), flag(nchw)]
    check_on_device(Op.INSTANCE_NORMALIZATION, ins, t, 4)


# ---- ARGMAX / ARGMIN -----------------------------------------------------------------------
@pytest.mark.parametrize("op", [Op.ARGMAX, Op.ARGMIN])
@pytest.mark.parametrize("t", [F32, F16, Q8, S8, T.TENSOR_INT32])
@pytest.mark.parametrize("axis", [0, -1])
def test_arg_selection(op, t, axis):
    if t == T.TENSOR_INT32:
        x = tensor(t, np.random.default_rng(5).integers(-3, 3, (4, 6)))   # many ties
    else:
        x = tensor(t, data((4, 6), t), 0.5, 1) if t in (Q8, S8) else tensor(t, np.round(data((4, 6), t)))
    check_on_device(op, [x, i32(axis)], T.TENSOR_INT32, 1)


@pytest.mark.parametrize("op", [Op.ARGMAX, Op.ARGMIN])
def test_arg_selection_ties_and_nan_as_the_reference(op):
    x = np.array([[1, 3, 3, 0], [2, np.nan, 5, np.nan], [-0.0, 0.0, 0.0, -0.0],
                  [-np.inf, -np.inf, -np.inf, -np.inf]], np.float32)
    check_on_device(op, [tensor(F32, x), i32(1)], T.TENSOR_INT32, 1)


@pytest.mark.parametrize("t", [F32, F16, Q8, S8, T.TENSOR_INT32])
@pytest.mark.parametrize("shape, k", [((3, 7), 3), ((2, 2, 5), 5), ((6,), 1)])
def test_topk(t, shape, k):
    rng = np.random.default_rng(8)
    if t == T.TENSOR_INT32:
        x = tensor(t, rng.integers(-2, 3, shape))   # many ties
    else:
        x = tensor(t, data(shape, t), 0.5, 1) if t in (Q8, S8) else tensor(t, np.round(data(shape, t)))
    outs = [output(t, list(shape[:-1]) + [k], x.scale, x.zero_point), output(T.TENSOR_INT32, list(shape[:-1]) + [k])]
    check_outputs_on_device(Op.TOPK_V2, [x, i32(k)], outs)


def test_topk_puts_nan_last_and_ties_by_index_descending():
    x = np.array([[1, np.nan, 3, np.nan, 3, -np.inf, np.nan], [0.0, -0.0, 0.0, 2, 2, -1, 5]], np.float32)
    outs = [output(F32, [2, 7]), output(T.TENSOR_INT32, [2, 7])]
    check_outputs_on_device(Op.TOPK_V2, [tensor(F32, x), i32(7)], outs)


def check_outputs_on_device(op, inputs, outs) -> None:
    """check_on_device for an operation with several outputs, compared exactly."""
    model = single_op_model(op, inputs, [output(o.type, [0] * len(o.dims), o.scale, o.zero_point) for o in outs])
    assert device_check.placement(model, inputs) == (1, 0)
    if device_check._has_cupy():
        for seg in segments(model, inputs, "cuda"):
            for step in seg.kernels:
                assert device_check._nvrtc_compiles(step.source) is None, step.source
    ref = run_op(op, inputs, outs, version=13)
    assert ref.status == 0
    for name in device_backends():
        got = run_op(op, inputs, outs, version=13, device=device_check._device(name))
        assert got.status == 0, name
        for a, b in zip(got.outputs, ref.outputs):
            np.testing.assert_array_equal(a, b, err_msg=name)


# ---- resize --------------------------------------------------------------------------------
@pytest.mark.parametrize("op", [Op.RESIZE_BILINEAR, Op.RESIZE_NEAREST_NEIGHBOR])
@pytest.mark.parametrize("align, half", FLAGS)
@pytest.mark.parametrize("nchw", [False, True])
@pytest.mark.parametrize("size", [(7, 5), (2, 3)])   # (out_h, out_w) from a 3x4 image
def test_resize_by_shape(op, align, half, nchw, size):
    shape = (2, 3, 3, 4) if nchw else (2, 3, 4, 3)
    out_h, out_w = size
    ins = [tensor(F32, data(shape)), i32(out_w), i32(out_h), flag(nchw), flag(align), flag(half)]
    check_on_device(op, ins, F32, 4)


@pytest.mark.parametrize("op", [Op.RESIZE_BILINEAR, Op.RESIZE_NEAREST_NEIGHBOR])
@pytest.mark.parametrize("t", [F32, F16, Q8, S8])
@pytest.mark.parametrize("align, half", FLAGS)
def test_resize_by_scale(op, t, align, half):
    scale, zp = (0.5, 3) if t in (Q8, S8) else (0.0, 0)
    ins = [tensor(t, data((1, 5, 7, 2), t), scale, zp), fscalar(t, 1.7), fscalar(t, 0.6), flag(False), flag(align),
           flag(half)]
    check_on_device(op, ins, t, 4, scale=scale, zero_point=zp)


def test_resize_bilinear_without_optional_flags():
    check_on_device(Op.RESIZE_BILINEAR, [tensor(F32, data((1, 2, 2, 1))), i32(3), i32(3)], F32, 4)
