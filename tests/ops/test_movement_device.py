"""Data-movement operations in device kernels (index maps, concatenation, padding, gather, split)
match the numpy reference in float32, float16, int32 and quant8, alone and fused into one
kernel; indices known only at run time stay on the host."""
from __future__ import annotations

import numpy as np
import pytest

from nngpu.backends import device_backends
from nngpu.runtime.interpreter import GraphRunner
from nngpu.compiler.lower import lower_model
from nngpu.driver.device import Device
from nngpu.hal import DataLocation, Model, Operand, Operation
from nngpu.hal import OperandLifeTime as L
from nngpu.hal import OperandType as T
from nngpu.hal import OperationType as Op
from nngpu.modelutil import as_model_1_3
from nngpu.ops.lib.index_map import axis_digits, fit
from nngpu.testing import output, run_model, run_op, single_op_model, tensor
from nngpu.backends.opencl import TARGET as OPENCL
from .device_check import (F16, F32, Q8, S8, _device, _has_cupy, _nvrtc_compiles, check_on_device, data, flag,
                           fscalar, i32, placement, segments, vec)

TYPES = [F32, F16]
I32 = T.TENSOR_INT32
ZP = {Q8: 128, S8: 0}


def x_in(shape, t):
    if t == I32:
        return tensor(t, np.arange(int(np.prod(shape)), dtype=np.int32).reshape(shape) * 7 - 11)
    return tensor(t, data(shape, t))


def q_in(shape, t, scale=0.5, zp=None, value=None):
    return tensor(t, data(shape, t) if value is None else value, scale=scale,
                  zero_point=ZP[t] - 3 if zp is None else zp)


def every_value(t, shape=(256,)):
    """All 256 stored values of t (as a column, row, ... by `shape`)."""
    lo = 0 if t == Q8 else -128
    return np.arange(lo, lo + 256).astype(np.uint8 if t == Q8 else np.int8).reshape(shape)


def consts(values):
    return tensor(I32, np.asarray(values, dtype=np.int32), const=True)


def check_exactly_on_device(op, inputs, outs):
    """check_on_device for several outputs, or int32 ones (the harness takes one output, of a
    type with a tolerance), compared exactly."""
    model = single_op_model(op, inputs, outs)
    assert placement(model, inputs) == (1, 0), placement(model, inputs)
    if _has_cupy():
        for seg in segments(model, inputs, "cuda"):
            for step in seg.kernels:
                log = _nvrtc_compiles(step.source)
                assert log is None, f"NVRTC: {log}\n{step.source}"
    ref = run_op(op, inputs, outs, version=13)
    assert ref.status == 0, ref.status
    for name in device_backends():
        got = run_op(op, inputs, outs, device=_device(name), version=13)
        assert got.status == 0 and got.shapes == ref.shapes, (name, got.status, got.shapes, ref.shapes)
        for a, b in zip(got.outputs, ref.outputs):
            np.testing.assert_array_equal(a, b, err_msg=name)
    return ref.outputs


INDEX_MAPS = [
    (Op.TRANSPOSE, [vec([0, 3, 1, 2])], (2, 3, 4, 5), 4),
    (Op.TRANSPOSE, [vec([2, 0, 1])], (3, 1, 7), 3),
    (Op.SLICE, [vec([1, 0, 2]), vec([1, -1, 2])], (3, 4, 5), 3),
    (Op.STRIDED_SLICE, [vec([0, 5, 1]), vec([2, 0, 4]), vec([1, -2, 2]), i32(0), i32(0), i32(0)], (2, 6, 5), 3),
    (Op.STRIDED_SLICE, [vec([1, 0, 0]), vec([2, 3, 5]), vec([1, 1, -1]), i32(4), i32(4), i32(1)], (2, 3, 5), 2),
    (Op.TILE, [vec([2, 1, 3])], (2, 3, 2), 3),
    (Op.DEPTH_TO_SPACE, [i32(2)], (1, 2, 3, 8), 4),
    (Op.DEPTH_TO_SPACE, [i32(2), flag(True)], (2, 12, 2, 3), 4),
    (Op.SPACE_TO_DEPTH, [i32(2)], (1, 4, 6, 3), 4),
    (Op.SPACE_TO_DEPTH, [i32(2), flag(True)], (1, 3, 4, 6), 4),
    (Op.CHANNEL_SHUFFLE, [i32(3), i32(-1)], (2, 3, 12), 3),
    (Op.CHANNEL_SHUFFLE, [i32(2), i32(1)], (1, 6, 2, 2), 4),
    (Op.BATCH_TO_SPACE_ND, [vec([2, 2])], (8, 1, 2, 3), 4),
    (Op.BATCH_TO_SPACE_ND, [vec([2, 1]), flag(True)], (4, 3, 2, 2), 4),
]


@pytest.mark.parametrize("t", TYPES)
@pytest.mark.parametrize("op, params, shape, rank", INDEX_MAPS)
def test_index_maps(op, params, shape, rank, t):
    check_on_device(op, [x_in(shape, t), *params], t, rank)


@pytest.mark.parametrize("op, params, shape, rank", [(Op.SLICE, [vec([0, 1]), vec([2, 2])], (2, 4), 2),
                                                     (Op.TILE, [vec([3, 2])], (2, 3), 2)])
def test_int32_index_maps(op, params, shape, rank):
    check_exactly_on_device(op, [x_in(shape, I32), *params], [output(I32, [0] * rank)])


def test_identity_maps():
    """A map reading input 0 in order (identity perm, multiples of 1) is a View: a copy kernel
    here, where the output is the model's."""
    check_on_device(Op.TRANSPOSE, [x_in((2, 3), F32), vec([0, 1])], F32, 2)
    check_on_device(Op.TILE, [x_in((2, 3), F32), vec([1, 1])], F32, 2)


def test_digits_of_tiled_and_block_split_axes():
    assert axis_digits(np.arange(6) * 3 + 0) == [(1, None, 3)]
    assert axis_digits(np.tile(np.arange(3), 4)) == [(1, 3, 1), (3, None, 0)]
    assert axis_digits(np.array([0, 2, 1, 3])) == [(1, 2, 2), (2, None, 1)]
    assert axis_digits(np.array([0, 2, 1])) == [(1, 2, 2), (2, None, 1)]
    assert axis_digits(np.array([0, 1, 0, 2])) is None
    src = np.array([[2, 0], [1, 1]])   # a gather: not separable
    assert fit(src, (3,)) is None


@pytest.mark.parametrize("t", TYPES + [I32, Q8])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("splits", [1, 2, 3])
def test_split_gives_every_output_on_the_device(t, axis, splits):
    x = q_in((6, 6, 6), t) if t == Q8 else x_in((6, 6, 6), t)
    outs = [output(t, [0, 0, 0], x.scale, x.zero_point) for _ in range(splits)]
    got = check_exactly_on_device(Op.SPLIT, [x, i32(axis), i32(splits)], outs)
    for part, expect in zip(got, np.split(x.value, splits, axis=axis)):
        np.testing.assert_array_equal(part, expect)


@pytest.mark.parametrize("t", TYPES)
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concatenation(t, axis):
    grown = [[2, 3, 4] for _ in range(3)]
    for k, s in enumerate(grown):
        s[axis] += k  # different extents along the axis
    check_on_device(Op.CONCATENATION, [x_in(s, t) for s in grown] + [i32(axis)], t, 3)


def test_concatenation_of_one_input_and_a_repeated_input():
    x = x_in((2, 3), F32)
    check_on_device(Op.CONCATENATION, [x, i32(0)], F32, 2)
    check_on_device(Op.CONCATENATION, [x, x, i32(1)], F32, 2)


@pytest.mark.parametrize("t", TYPES)
def test_pad(t):
    pads = consts([[0, 0], [1, 2], [0, 3], [2, 0]])
    check_on_device(Op.PAD, [x_in((1, 2, 3, 2), t), pads], t, 4)
    check_on_device(Op.PAD_V2, [x_in((1, 2, 3, 2), t), pads, fscalar(t, 1.3)], t, 4)


@pytest.mark.parametrize("t", TYPES + [I32])
@pytest.mark.parametrize("axis, indices", [(0, [[2, 0], [1, 1]]), (1, [3, 0, 0]), (-1, [1])])
def test_gather_with_constant_indices(t, axis, indices):
    rank = 3 + np.asarray(indices).ndim - 1
    inputs = [x_in((3, 4, 2), t), i32(axis), consts(indices)]
    if t == I32:
        check_exactly_on_device(Op.GATHER, inputs, [output(t, [0] * rank)])
    else:
        check_on_device(Op.GATHER, inputs, t, rank)


def test_run_time_parameters_stay_on_the_host():
    idx = tensor(I32, np.array([1, 0], np.int32))   # a model input, not a constant
    check_on_device(Op.GATHER, [x_in((2, 3), F32), i32(0), idx], F32, 2, device=False)


def test_out_of_range_constant_indices_fail_the_execution():
    inputs = [x_in((2, 3), F32), i32(0), consts([2])]
    for name in device_backends():
        assert run_op(Op.GATHER, inputs, [output(F32, [1, 3])], device=_device(name), version=13).status != 0


@pytest.mark.parametrize("t", TYPES)
@pytest.mark.parametrize("nchw", [False, True])
def test_space_to_batch(t, nchw):
    shape = (2, 3, 5, 3) if nchw else (2, 5, 3, 3)
    check_on_device(Op.SPACE_TO_BATCH_ND, [x_in(shape, t), vec([2, 3]), consts([[1, 0], [2, 1]]), flag(nchw)], t, 4)


# ---- quant8 --------------------------------------------------------------------------------

@pytest.mark.parametrize("t", [Q8, S8])
def test_quant8_copies(t):
    q = dict(scale=0.5, zero_point=ZP[t] - 3)
    check_on_device(Op.TRANSPOSE, [q_in((2, 3, 4), t), vec([2, 0, 1])], t, 3, **q)
    check_on_device(Op.STRIDED_SLICE, [q_in((4, 6), t), vec([3, 0]), vec([0, 6]), vec([-1, 2]), i32(0), i32(0),
                                       i32(0)], t, 2, **q)
    check_on_device(Op.CONCATENATION, [q_in((2, 3), t), q_in((2, 1), t), i32(1)], t, 2, **q)
    check_on_device(Op.GATHER, [q_in((2, 3), t), i32(0), consts([1, 1, 0])], t, 2, **q)
    pads = consts([[1, 0], [0, 2]])
    check_on_device(Op.PAD, [q_in((2, 3), t), pads], t, 2, **q)
    check_on_device(Op.PAD_V2, [q_in((2, 3), t), pads, i32(-3)], t, 2, **q)
    check_on_device(Op.SPACE_TO_BATCH_ND, [q_in((1, 4, 4, 2), t), vec([2, 2]), consts([[1, 1], [0, 2]])], t, 4, **q)


@pytest.mark.parametrize("t", [Q8, S8])
def test_concatenation_requantizes_every_value(t):
    ins = [q_in((2, 3), t, 0.5), q_in((2, 256), t, 0.13, zp=ZP[t] + 11, value=every_value(t, (1, 256)).repeat(2, 0)),
           q_in((2, 1), t, 0.25), i32(1)]
    check_on_device(Op.CONCATENATION, ins, t, 2, scale=0.25, zero_point=ZP[t] - 3)


def test_single_input_concatenation_requantizes():
    ins = [q_in((4, 64), Q8, 0.7, value=every_value(Q8, (4, 64))), i32(0)]
    check_on_device(Op.CONCATENATION, ins, Q8, 2, scale=0.25, zero_point=100)


# ---- fused into one kernel -----------------------------------------------------------------

def _chain_model(x: np.ndarray, out_shape: list[int]):
    """x → ADD(x, x) → TRANSPOSE [0, 2, 3, 1] → DEPTH_TO_SPACE 2 → CHANNEL_SHUFFLE 2 (all one size)."""
    consts = [(T.INT32, [], np.int32(0)), (T.TENSOR_INT32, [4], np.array([0, 2, 3, 1], np.int32)),
              (T.INT32, [], np.int32(2)), (T.INT32, [], np.int32(-1))]
    operands, blob = [Operand(F32, list(x.shape), 2, 0.0, 0, L.SUBGRAPH_INPUT, DataLocation())], b""
    for (t, dims, v), uses in zip(consts, (1, 1, 2, 1)):
        raw = np.asarray(v).tobytes()
        operands.append(Operand(t, dims, uses, 0.0, 0, L.CONSTANT_COPY, DataLocation(0, len(blob), len(raw))))
        blob += raw + b"\0" * (-len(raw) % 8)
    for life in (L.TEMPORARY_VARIABLE, L.TEMPORARY_VARIABLE, L.TEMPORARY_VARIABLE, L.SUBGRAPH_OUTPUT):
        operands.append(Operand(F32, [], 1 if life == L.TEMPORARY_VARIABLE else 0, 0.0, 0, life, DataLocation()))
    ops = [Operation(Op.ADD, [0, 0, 1], [5]), Operation(Op.TRANSPOSE, [5, 2], [6]),
           Operation(Op.DEPTH_TO_SPACE, [6, 3], [7]), Operation(Op.CHANNEL_SHUFFLE, [7, 3, 4], [8])]
    operands[8].dimensions = out_shape
    return Model(operands, ops, [0], [8], blob)


def test_a_chain_of_movements_is_one_kernel():
    x = data((2, 8, 3, 4))                   # NCHW-looking input, transposed to NHWC (2, 3, 4, 8)
    model = _chain_model(x, [2, 6, 8, 2])
    spec = lower_model(GraphRunner(as_model_1_3(model)), OPENCL)
    assert (spec.device_ops, spec.host_ops, len(spec.kernels)) == (4, 0, 1)
    ref = run_model(model, [x], [x.nbytes], Device("numpy"))
    for name in device_backends():
        got = run_model(model, [x], [x.nbytes], _device(name))
        np.testing.assert_allclose(got.outputs[0], ref.outputs[0], rtol=1e-6, err_msg=name)
