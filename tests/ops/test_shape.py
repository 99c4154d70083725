"""RESHAPE, SQUEEZE, EXPAND_DIMS, RANK, FILL: edges the corpus leaves out, and error paths."""
import numpy as np
import pytest

from nngpu.driver.device import Device
from nngpu.hal.types import ErrorStatus
from nngpu.hal.types import OperandType as T
from nngpu.hal.types import OperationType as Op
from nngpu.modelutil import as_model_1_3
from nngpu.testing import omitted, output, run_op, scalar, tensor

F32, I32 = T.TENSOR_FLOAT32, T.TENSOR_INT32


class Device13(Device):
    """run_op prepares through prepareModel_1_2; route it to the 1.3 rules for RANK and FILL."""

    def prepareModel_1_2(self, model, preference, modelCache, dataCache, token, callback):
        return self.prepare(13, as_model_1_3(model), callback, preference)


def run13(op, inputs, outputs):
    return run_op(op, inputs, outputs, device=Device13())


def _ok(result):
    assert result.status == ErrorStatus.NONE, result.status
    return result.outputs[0]


def test_reshape_infers_minus_one_from_rank3_input():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    out = _ok(run_op(Op.RESHAPE, [tensor(F32, x), tensor(I32, [4, -1], const=True)], [output(F32, [4, 6])]))
    assert out.shape == (4, 6)
    # row-major order is preserved: element k of the flat input is element k of the output
    assert [out[k // 6, k % 6] for k in range(24)] == list(range(24))


def test_reshape_unknown_output_dims_reports_shape():
    x = np.ones((3, 2), dtype=np.float32)
    result = run_op(Op.RESHAPE, [tensor(F32, x), tensor(I32, [-1], const=True)], [output(F32, [0])])
    assert result.status == ErrorStatus.NONE and result.shapes[0] == [6]


@pytest.mark.parametrize("shape", [[-1, -1], [5, -1], [7], [-2, 3]])
def test_reshape_bad_shape_fails(shape):
    x = np.ones((2, 3), dtype=np.float32)
    result = run_op(Op.RESHAPE, [tensor(F32, x), tensor(I32, shape, const=True)], [output(F32, [0, 0])])
    assert result.status != ErrorStatus.NONE


def test_squeeze_negative_axis_and_omitted_axes():
    x = np.arange(6, dtype=np.float32).reshape(1, 2, 1, 3)
    out = _ok(run_op(Op.SQUEEZE, [tensor(F32, x), tensor(I32, [-2], const=True)], [output(F32, [1, 2, 3])]))
    assert out.shape == (1, 2, 3) and np.array_equal(out.ravel(), x.ravel())
    out = _ok(run_op(Op.SQUEEZE, [tensor(F32, x), omitted(I32, [0])], [output(F32, [2, 3])]))
    assert out.shape == (2, 3)


def test_squeeze_all_ones_gives_shape_1():
    x = np.full((1, 1), 5, dtype=np.float32)
    result = run_op(Op.SQUEEZE, [tensor(F32, x), omitted(I32, [0])], [output(F32, [0])])
    assert result.status == ErrorStatus.NONE and result.shapes[0] == [1]


def test_squeeze_non_unit_axis_fails():
    x = np.ones((1, 2), dtype=np.float32)
    result = run_op(Op.SQUEEZE, [tensor(F32, x), tensor(I32, [1], const=True)], [output(F32, [0])])
    assert result.status != ErrorStatus.NONE


def test_expand_dims_axis_minus_one_int32():
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    out = _ok(run_op(Op.EXPAND_DIMS, [tensor(I32, x), scalar(T.INT32, -1)], [output(I32, [2, 3, 1])]))
    assert out.shape == (2, 3, 1) and all(out[i, j, 0] == x[i, j] for i in range(2) for j in range(3))


def test_expand_dims_axis_out_of_range_fails():
    x = np.ones((2, 3), dtype=np.float32)
    result = run_op(Op.EXPAND_DIMS, [tensor(F32, x), scalar(T.INT32, 3)], [output(F32, [0, 0, 0])])
    assert result.status != ErrorStatus.NONE


def test_rank_of_bool_tensor():
    x = np.zeros((2, 1, 3), dtype=bool)
    out = _ok(run13(Op.RANK, [tensor(T.TENSOR_BOOL8, x)], [output(T.INT32, [])]))
    assert int(out) == 3


def test_fill_zero_extent_and_value():
    out = _ok(run13(Op.FILL, [tensor(I32, [2, 3]), scalar(T.INT32, -7)], [output(I32, [2, 3])]))
    assert out.tolist() == [[-7] * 3] * 2
    result = run13(Op.FILL, [tensor(I32, [2, 0]), scalar(T.FLOAT32, 1.5)],
                    [output(F32, [2, 0], capacity=1)])
    assert result.status == ErrorStatus.NONE and result.shapes[0] == [2, 0]


def test_fill_negative_extent_fails():
    result = run13(Op.FILL, [tensor(I32, [2, -1]), scalar(T.FLOAT32, 1.5)], [output(F32, [0, 0])])
    assert result.status != ErrorStatus.NONE


def test_fill_value_type_must_match_output():
    result = run13(Op.FILL, [tensor(I32, [2]), scalar(T.INT32, 1)], [output(F32, [2])])
    assert result.status == ErrorStatus.INVALID_ARGUMENT
