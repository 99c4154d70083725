"""Data-movement templates (copies, concatenation, padding, gather) in device kernels match the
numpy reference, in float32 and float16; parameters known only at run time stay on the host."""
from __future__ import annotations

import numpy as np
import pytest

from nngpu.hal import OperationType as Op
from nngpu.testing import tensor
from ..ops.device_check import F16, F32, Q8, S8, check_on_device, data, flag, fscalar, i32, vec

TYPES = [F32, F16]


def x_in(shape, t):
    return tensor(t, data(shape, t))


@pytest.mark.parametrize("t", TYPES)
@pytest.mark.parametrize("op, params, shape, rank", [
    (Op.RESHAPE, [vec([3, -1])], (2, 3, 4), 2),
    (Op.SQUEEZE, [vec([0, 2])], (1, 5, 1, 3), 2),
    (Op.EXPAND_DIMS, [i32(-1)], (2, 3), 3),
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
])
def test_copies(op, params, shape, rank, t):
    check_on_device(op, [x_in(shape, t), *params], t, rank, kind="copy")


@pytest.mark.parametrize("t", TYPES)
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concatenation(t, axis):
    shapes = [(2, 3, 4), (2, 3, 4), (2, 3, 4)]
    grown = [list(s) for s in shapes]
    for k, s in enumerate(grown):
        s[axis] += k  # different extents along the axis
    check_on_device(Op.CONCATENATION, [x_in(s, t) for s in grown] + [i32(axis)], t, 3, kind="concatenation")


def test_concatenation_of_one_input_and_a_repeated_input():
    x = x_in((2, 3), F32)
    check_on_device(Op.CONCATENATION, [x, i32(0)], F32, 2)
    check_on_device(Op.CONCATENATION, [x, x, i32(1)], F32, 2)


@pytest.mark.parametrize("t", TYPES)
def test_pad(t):
    pads = tensor(vec([[0, 0], [1, 2], [0, 3], [2, 0]]).type, np.array([[0, 0], [1, 2], [0, 3], [2, 0]], np.int32),
                  const=True)
    check_on_device(Op.PAD, [x_in((1, 2, 3, 2), t), pads], t, 4, kind="pad")
    check_on_device(Op.PAD_V2, [x_in((1, 2, 3, 2), t), pads, fscalar(t, 1.3)], t, 4, kind="pad")


@pytest.mark.parametrize("t", TYPES)
@pytest.mark.parametrize("axis, indices", [(0, [[2, 0], [1, 1]]), (1, [3, 0, 0]), (-1, [1])])
def test_gather_with_constant_indices(t, axis, indices):
    idx = tensor(vec(indices).type, np.asarray(indices, np.int32), const=True)
    rank = 3 + np.asarray(indices).ndim - 1
    check_on_device(Op.GATHER, [x_in((3, 4, 2), t), i32(axis), idx], t, rank, kind="gather")


def test_run_time_parameters_stay_on_the_host():
    idx = tensor(vec([0]).type, np.array([1, 0], np.int32))   # a model input, not a constant
    check_on_device(Op.GATHER, [x_in((2, 3), F32), i32(0), idx], F32, 2, device=False)


# ---- quant8 copies -------------------------------------------------------------------------

def q_in(shape, t):
    return tensor(t, data(shape, t), scale=0.5, zero_point=3 if t == Q8 else -7)


@pytest.mark.parametrize("t", [Q8, S8])
def test_quant8_copies(t):
    q = dict(scale=0.5, zero_point=3 if t == Q8 else -7)
    check_on_device(Op.TRANSPOSE, [q_in((2, 3, 4), t), vec([2, 0, 1])], t, 3, kind="copy", **q)
    check_on_device(Op.STRIDED_SLICE, [q_in((4, 6), t), vec([3, 0]), vec([0, 6]), vec([-1, 2]), i32(0), i32(0),
                                       i32(0)], t, 2, kind="copy", **q)
    check_on_device(Op.CONCATENATION, [q_in((2, 3), t), q_in((2, 1), t), i32(1)], t, 2, kind="concatenation", **q)
    idx = tensor(vec([0]).type, np.array([1, 1, 0], np.int32), const=True)
    check_on_device(Op.GATHER, [q_in((2, 3), t), i32(0), idx], t, 2, kind="gather", **q)
    pads = tensor(vec([0]).type, np.array([[1, 0], [0, 2]], np.int32), const=True)
    check_on_device(Op.PAD, [q_in((2, 3), t), pads], t, 2, kind="pad", **q)
    check_on_device(Op.PAD_V2, [q_in((2, 3), t), pads, i32(-3)], t, 2, kind="pad", **q)
    check_on_device(Op.RESIZE_NEAREST_NEIGHBOR, [q_in((1, 3, 3, 2), t), i32(5), i32(4), flag(False)], t, 4,
                    kind="resize_nearest", **q)


def test_quant8_with_another_scale_is_requantized_on_the_device():
    ins = [q_in((2, 3), Q8), q_in((2, 1), Q8), i32(1)]
    check_on_device(Op.CONCATENATION, ins, Q8, 2, device=True, kind="quant_concatenation", scale=0.25, zero_point=3)


def test_quant8_copies_run_on_the_device():
    check_on_device(Op.TRANSPOSE, [q_in((2, 3), Q8), vec([1, 0])], Q8, 2, device=True, scale=0.5, zero_point=3)


@pytest.mark.parametrize("t", TYPES)
@pytest.mark.parametrize("nchw", [False, True])
def test_space_to_batch(t, nchw):
    pads = tensor(vec([0]).type, np.array([[1, 0], [2, 1]], np.int32), const=True)
    shape = (2, 3, 5, 3) if nchw else (2, 5, 3, 3)
    check_on_device(Op.SPACE_TO_BATCH_ND, [x_in(shape, t), vec([2, 3]), pads, flag(nchw)], t, 4,
                    kind="space_to_batch")
