"""BATCH_TO_SPACE_ND, SPACE_TO_BATCH_ND, DEPTH_TO_SPACE, SPACE_TO_DEPTH against index loops."""
import itertools

import numpy as np
import pytest

from nngpu.hal.types import ErrorStatus
from nngpu.hal.types import OperandType as T
from nngpu.hal.types import OperationType as Op
from nngpu.testing import output, run_op, scalar, tensor

F32, I32, Q8 = T.TENSOR_FLOAT32, T.TENSOR_INT32, T.TENSOR_QUANT8_ASYMM


def _ok(result):
    assert result.status == ErrorStatus.NONE, result.status
    return result.outputs[0]


def _fails(result):
    assert result.status in (ErrorStatus.INVALID_ARGUMENT, ErrorStatus.GENERAL_FAILURE), result.status


def _nchw(x):
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2))


@pytest.mark.parametrize("nchw", [False, True])
def test_depth_to_space_loop_and_inverse(nchw):
    b = 2
    x = np.arange(2 * 2 * 3 * 8, dtype=np.float32).reshape(2, 2, 3, 8)  # NHWC, depth 8 -> 2
    inp = _nchw(x) if nchw else x
    out_dims = [2, 2, 4, 6] if nchw else [2, 4, 6, 2]
    out = _ok(run_op(Op.DEPTH_TO_SPACE, [tensor(F32, inp), scalar(T.INT32, b), scalar(T.BOOL, nchw)],
                     [output(F32, out_dims)]))
    nhwc = out.transpose(0, 2, 3, 1) if nchw else out
    for n, h, w, c in itertools.product(range(2), range(4), range(6), range(2)):
        assert nhwc[n, h, w, c] == x[n, h // b, w // b, ((h % b) * b + w % b) * 2 + c]
    back = _ok(run_op(Op.SPACE_TO_DEPTH, [tensor(F32, out), scalar(T.INT32, b), scalar(T.BOOL, nchw)],
                      [output(F32, list(inp.shape))]))
    assert np.array_equal(back, inp)


def test_batch_to_space_matches_reference_loop():
    bh, bw = 2, 3
    x = np.arange(12 * 2 * 2 * 1, dtype=np.float32).reshape(12, 2, 2, 1)
    out = _ok(run_op(Op.BATCH_TO_SPACE_ND, [tensor(F32, x), tensor(I32, [bh, bw], const=True)],
                     [output(F32, [2, 4, 6, 1])]))
    for in_b, h, w in itertools.product(range(12), range(2), range(2)):
        ob, off = in_b % 2, in_b // 2
        assert out[ob, h * bh + off // bw, w * bw + off % bw, 0] == x[in_b, h, w, 0]


def test_space_to_batch_quant8_pads_with_zero_point_and_round_trips():
    x = np.arange(1, 1 + 1 * 3 * 3 * 2, dtype=np.uint8).reshape(1, 3, 3, 2)
    pads = [[1, 0], [0, 1]]
    out = _ok(run_op(Op.SPACE_TO_BATCH_ND, [tensor(Q8, x, 0.5, 77), tensor(I32, [2, 2], const=True),
                                            tensor(I32, pads, const=True)], [output(Q8, [4, 2, 2, 2], 0.5, 77)]))
    padded = np.full((1, 4, 4, 2), 77, dtype=np.uint8)
    padded[:, 1:, :3] = x
    for ob, h, w, c in itertools.product(range(4), range(2), range(2), range(2)):
        i, j = divmod(ob, 2)
        assert out[ob, h, w, c] == padded[0, h * 2 + i, w * 2 + j, c]
    back = _ok(run_op(Op.BATCH_TO_SPACE_ND, [tensor(Q8, out, 0.5, 77), tensor(I32, [2, 2], const=True)],
                      [output(Q8, [1, 4, 4, 2], 0.5, 77)]))
    assert np.array_equal(back, padded)


def test_bad_blocks_fail():
    x = np.ones((1, 4, 4, 4), dtype=np.float32)
    _fails(run_op(Op.DEPTH_TO_SPACE, [tensor(F32, x), scalar(T.INT32, 0)], [output(F32, [0, 0, 0, 0])]))
    _fails(run_op(Op.DEPTH_TO_SPACE, [tensor(F32, x), scalar(T.INT32, 3)], [output(F32, [0, 0, 0, 0])]))
    _fails(run_op(Op.SPACE_TO_DEPTH, [tensor(F32, x), scalar(T.INT32, 3)], [output(F32, [0, 0, 0, 0])]))
    _fails(run_op(Op.BATCH_TO_SPACE_ND, [tensor(F32, x), tensor(I32, [2, 1], const=True)], [output(F32, [0, 0, 0, 0])]))
    _fails(run_op(Op.SPACE_TO_BATCH_ND, [tensor(F32, x), tensor(I32, [3, 3], const=True),
                                         tensor(I32, [[0, 0], [0, 0]], const=True)], [output(F32, [0, 0, 0, 0])]))


def test_layout_flag_needs_v1_2():
    from nngpu.ops.registry import HalVersion, lookup
    spec = lookup(Op.DEPTH_TO_SPACE)
    assert spec.match([F32, T.INT32], [F32]).version == HalVersion.V1_0
    assert spec.match([F32, T.INT32, T.BOOL], [F32]).version == HalVersion.V1_2
