"""CONCATENATION, TRANSPOSE, PAD(_V2), SLICE, STRIDED_SLICE, SPLIT, TILE, GATHER, CHANNEL_SHUFFLE:
edges the corpus leaves out, checked against plain loops / Python slicing, and error paths."""
import itertools

import numpy as np
import pytest

from nngpu.driver.device import Device
from nngpu.runtime.interpreter import GraphRunner
from nngpu.hal.types import ErrorStatus
from nngpu.hal.types import OperandType as T
from nngpu.hal.types import OperationType as Op
from nngpu.modelutil import as_model_1_3
from nngpu.ops.registry import HalVersion, lookup
from nngpu.testing import omitted, output, run_op, scalar, single_op_model, tensor

F32, I32 = T.TENSOR_FLOAT32, T.TENSOR_INT32
Q8, Q8S = T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED


class Device13(Device):
    """run_op prepares through prepareModel_1_2; route it to the 1.3 rules for the signed types."""

    def prepareModel_1_2(self, model, preference, modelCache, dataCache, token, callback):
        return self.prepare(13, as_model_1_3(model), callback, preference)


def _ok(result):
    assert result.status == ErrorStatus.NONE, result.status
    return result.outputs


def _fails(result):
    assert result.status in (ErrorStatus.INVALID_ARGUMENT, ErrorStatus.GENERAL_FAILURE), result.status


# ---- CONCATENATION -------------------------------------------------------------------------

def _concat_scalar(q: int, in_scale: float, in_zp: int, out_scale: float, out_zp: int, lo: int) -> int:
    """One element of the reference requantization, written as its scalar C code reads
    (uint8 domain: int8 values and zero points are offset by 128)."""
    shift = -lo
    f32 = np.float32
    scale = f32(in_scale) * (f32(1) / f32(out_scale))
    bias = f32(-(in_zp + shift)) * scale
    v = float(f32(q + shift) * scale + bias)
    r = int(np.floor(abs(v) + 0.5)) * (1 if v >= 0 else -1)
    return min(255, max(0, r + out_zp + shift)) - shift


@pytest.mark.parametrize("qtype,lo", [(Q8, 0), (Q8S, -128)])
def test_concat_requantizes_and_saturates_on_axis_minus_one(qtype, lo):
    rng = np.random.default_rng(3)
    a = rng.integers(lo, lo + 256, size=(2, 3)).astype(np.uint8 if lo == 0 else np.int8)
    b = rng.integers(lo, lo + 256, size=(2, 2)).astype(a.dtype)
    a[0, 0], b[0, 0] = lo + 255, lo  # extremes: saturate at both ends of the output range
    params = [(0.37, lo + 100), (0.5, lo + 200)]
    out_scale, out_zp = 0.1, lo + 128
    (out,) = _ok(run_op(Op.CONCATENATION,
                        [tensor(qtype, a, *params[0]), tensor(qtype, b, *params[1]), scalar(T.INT32, -1)],
                        [output(qtype, [2, 5], out_scale, out_zp)], device=Device13()))
    for i, j in itertools.product(range(2), range(5)):
        src, (s, zp), jj = (a, params[0], j) if j < 3 else (b, params[1], j - 3)
        expect = _concat_scalar(int(src[i, jj]), s, zp, out_scale, out_zp, lo)
        assert int(out[i, j]) == expect
        ideal = np.clip(round((int(src[i, jj]) - zp) * s / out_scale) + out_zp, lo, lo + 255)
        assert abs(int(out[i, j]) - ideal) <= 1
    assert int(out[0, 0]) == lo + 255 and int(out[0, 3]) == lo


def _run_graph(op, inputs, outputs):
    """Run through the reference interpreter directly: the driver rejects zero-sized model inputs
    and constants, which only arise as temporaries inside real models."""
    model = single_op_model(op, inputs, outputs)
    return GraphRunner(as_model_1_3(model)).run([v.value for v in inputs if not v.const and not v.omitted])


def test_concat_zero_sized_input_and_shape_mismatch():
    a = np.ones((2, 3), dtype=np.float32)
    z = np.zeros((2, 0), dtype=np.float32)
    (out,) = _run_graph(Op.CONCATENATION, [tensor(F32, a), tensor(F32, z), scalar(T.INT32, 1)], [output(F32, [2, 3])])
    assert np.array_equal(out, a)
    _fails(run_op(Op.CONCATENATION, [tensor(F32, a), tensor(F32, np.ones((3, 3), np.float32)), scalar(T.INT32, 1)],
                  [output(F32, [0, 0])]))


def test_concat_signature_is_variadic():
    spec = lookup(Op.CONCATENATION)
    assert spec.match([F32] * 7 + [T.INT32], [F32]).version == HalVersion.V1_0
    assert spec.match([Q8S] * 2 + [T.INT32], [Q8S]).version == HalVersion.V1_3
    assert spec.match([F32, Q8, T.INT32], [F32]) is None
    assert spec.match([T.INT32], [F32]) is None


# ---- TRANSPOSE / PAD -----------------------------------------------------------------------

def test_transpose_omitted_perm_reverses_rank3():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    (out,) = _ok(run_op(Op.TRANSPOSE, [tensor(F32, x), omitted(I32, [0])], [output(F32, [4, 3, 2])]))
    assert all(out[k, j, i] == x[i, j, k] for i, j, k in itertools.product(range(2), range(3), range(4)))


def test_transpose_bad_perm_fails():
    x = np.ones((2, 3), dtype=np.float32)
    _fails(run_op(Op.TRANSPOSE, [tensor(F32, x), tensor(I32, [0, 0], const=True)], [output(F32, [0, 0])]))


def test_pad_v2_quant8_value_and_pad_zero_point():
    x = np.array([[1, 2], [3, 4]], dtype=np.uint8)
    pads = [[1, 0], [0, 2]]
    (out,) = _ok(run_op(Op.PAD_V2, [tensor(Q8, x, 0.5, 9), tensor(I32, pads, const=True), scalar(T.INT32, 200)],
                        [output(Q8, [3, 4], 0.5, 9)]))
    for i, j in itertools.product(range(3), range(4)):
        inside = 1 <= i and j < 2
        assert out[i, j] == (x[i - 1, j] if inside else 200)
    (out,) = _ok(run_op(Op.PAD, [tensor(Q8, x, 0.5, 9), tensor(I32, pads, const=True)], [output(Q8, [3, 4], 0.5, 9)]))
    assert out[0, 0] == 9 and out[1, 3] == 9  # the logical zero is the zero point


def test_pad_negative_fails():
    x = np.ones((2, 2), dtype=np.float32)
    _fails(run_op(Op.PAD, [tensor(F32, x), tensor(I32, [[0, -1], [0, 0]], const=True)], [output(F32, [0, 0])]))


# ---- SLICE / STRIDED_SLICE / SPLIT ---------------------------------------------------------

def test_slice_minus_one_size_and_out_of_range():
    x = np.arange(20, dtype=np.int32).reshape(4, 5)
    (out,) = _ok(run_op(Op.SLICE, [tensor(I32, x), tensor(I32, [1, 2], const=True), tensor(I32, [-1, 2], const=True)],
                        [output(I32, [3, 2])]))
    assert np.array_equal(out, x[1:, 2:4])
    _fails(run_op(Op.SLICE, [tensor(I32, x), tensor(I32, [3, 0], const=True), tensor(I32, [2, 1], const=True)],
                  [output(I32, [0, 0])]))


def _strided(x, begin, end, strides, masks=(0, 0, 0), out_dims=None):
    ins = [tensor(F32, x), tensor(I32, begin, const=True), tensor(I32, end, const=True),
           tensor(I32, strides, const=True), *(scalar(T.INT32, m) for m in masks)]
    return run_op(Op.STRIDED_SLICE, ins, [output(F32, out_dims or [0] * x.ndim)])


def test_strided_slice_negative_strides_and_masks_match_python_slicing():
    x = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    # begin mask on axis 0 (stride -1: from the end), end mask on axis 2, negative indices on axis 1
    r = _strided(x, [0, -1, 1], [-4, 0, 0], [-1, -2, 2], masks=(0b001, 0b100, 0))
    (out,) = _ok(r)
    assert np.array_equal(out, x[::-1, -1:0:-2, 1::2])
    # out-of-range begin / end clamp as Python slices do
    (out,) = _ok(_strided(x, [-10, 10, 0], [10, -10, 5], [1, -1, 3]))
    assert np.array_equal(out, x[-10:10, 10:-10:-1, 0:5:3])


def test_strided_slice_shrink_with_negative_begin():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    (out,) = _ok(_strided(x, [-2, 0], [-1, 4], [1, 1], masks=(0, 0, 0b01), out_dims=[4]))
    assert np.array_equal(out, x[-2])
    _fails(_strided(x, [0, 0], [2, 4], [1, 1], masks=(0, 0, 0b01), out_dims=[0]))  # slice of 2 cannot shrink


def test_strided_slice_zero_stride_fails():
    _fails(_strided(np.ones((2, 2), np.float32), [0, 0], [2, 2], [1, 0]))


def test_split_axis_minus_one_and_uneven_fails():
    x = np.arange(12, dtype=np.int32).reshape(2, 6)
    outs = _ok(run_op(Op.SPLIT, [tensor(I32, x), scalar(T.INT32, -1), scalar(T.INT32, 3)],
                      [output(I32, [2, 2]) for _ in range(3)]))
    for k, o in enumerate(outs):
        assert np.array_equal(o, x[:, 2 * k:2 * k + 2])
    _fails(run_op(Op.SPLIT, [tensor(I32, x), scalar(T.INT32, 1), scalar(T.INT32, 4)],
                  [output(I32, [0, 0]) for _ in range(4)]))


# ---- TILE / GATHER / CHANNEL_SHUFFLE -------------------------------------------------------

def test_tile_matches_modulo_indexing():
    x = np.arange(6, dtype=np.uint8).reshape(2, 3)
    (out,) = _ok(run_op(Op.TILE, [tensor(Q8, x, 1.0, 0), tensor(I32, [2, 3], const=True)], [output(Q8, [4, 9], 1.0, 0)]))
    assert all(out[i, j] == x[i % 2, j % 3] for i, j in itertools.product(range(4), range(9)))


def test_tile_wrong_multiples_length_fails():
    x = np.ones((2, 3), dtype=np.float32)
    _fails(run_op(Op.TILE, [tensor(F32, x), tensor(I32, [2], const=True)], [output(F32, [0, 0])]))


def test_gather_axis_minus_one_2d_indices():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    idx = np.array([[3, 0], [1, 1], [2, 0]], dtype=np.int32)
    (out,) = _ok(run_op(Op.GATHER, [tensor(F32, x), scalar(T.INT32, -1), tensor(I32, idx)], [output(F32, [2, 3, 3, 2])]))
    for a, b, i, j in itertools.product(range(2), range(3), range(3), range(2)):
        assert out[a, b, i, j] == x[a, b, idx[i, j]]


def test_gather_index_out_of_range_fails():
    x = np.ones((2, 3), dtype=np.float32)
    _fails(run_op(Op.GATHER, [tensor(F32, x), scalar(T.INT32, 0), tensor(I32, [2])], [output(F32, [1, 3])]))


def test_channel_shuffle_formula_on_axis_minus_one():
    x = np.arange(2 * 6, dtype=np.float32).reshape(2, 6)
    (out,) = _ok(run_op(Op.CHANNEL_SHUFFLE, [tensor(F32, x), scalar(T.INT32, 3), scalar(T.INT32, -1)],
                        [output(F32, [2, 6])]))
    group_size = 2
    for n, k, g in itertools.product(range(2), range(group_size), range(3)):
        assert out[n, k * 3 + g] == x[n, g * group_size + k]
    _fails(run_op(Op.CHANNEL_SHUFFLE, [tensor(F32, x), scalar(T.INT32, 4), scalar(T.INT32, -1)], [output(F32, [2, 6])]))


def test_zero_sized_batch_through_slice_tile_transpose_gather():
    x = np.zeros((0, 3), dtype=np.float32)
    (out,) = _run_graph(Op.TILE, [tensor(F32, x), tensor(I32, [2, 2])], [output(F32, [0, 6])])
    assert out.shape == (0, 6)
    (out,) = _run_graph(Op.TRANSPOSE, [tensor(F32, x), omitted(I32, [0])], [output(F32, [3, 0])])
    assert out.shape == (3, 0)
    (out,) = _run_graph(Op.GATHER, [tensor(F32, x), scalar(T.INT32, 1), tensor(I32, [2, 2])], [output(F32, [0, 2])])
    assert out.shape == (0, 2)
    (out,) = _run_graph(Op.SLICE, [tensor(F32, x), tensor(I32, [0, 1]), tensor(I32, [-1, 2])], [output(F32, [0, 2])])
    assert out.shape == (0, 2)


def test_quant8_offsets_and_mixed_scales_raise_the_model_version():
    from nngpu.validation.model import validate_model
    x = np.ones((1, 2, 2, 1), dtype=np.uint8)
    pads = tensor(I32, [[0, 0], [1, 1], [1, 1], [0, 0]], const=True)

    def version(op, inputs, outs):
        return validate_model(single_op_model(op, inputs, outs))

    assert version(Op.PAD, [tensor(Q8, x, 0.5, 0), pads], [output(Q8, [1, 4, 4, 1], 0.5, 0)]) == HalVersion.V1_1
    assert version(Op.PAD, [tensor(Q8, x, 0.5, 3), pads], [output(Q8, [1, 4, 4, 1], 0.5, 3)]) == HalVersion.V1_2
    same = [tensor(Q8, x, 0.5, 3), tensor(Q8, x, 0.5, 3), scalar(T.INT32, 0)]
    mixed = [tensor(Q8, x, 0.5, 3), tensor(Q8, x, 0.25, 3), scalar(T.INT32, 0)]
    assert version(Op.CONCATENATION, same, [output(Q8, [2, 2, 2, 1], 0.5, 3)]) == HalVersion.V1_0
    assert version(Op.CONCATENATION, mixed, [output(Q8, [2, 2, 2, 1], 0.5, 3)]) == HalVersion.V1_2
