"""The operations of NNAPI feature levels 6 and 7 (AIDL HAL versions 2 and 3): BATCH_MATMUL,
PACK, MIRROR_PAD, REVERSE, RESHAPE of TENSOR_INT32 and RSQRT of quantized tensors. References
against hand-computed results, the model rules and the version a model needs, the shape
functions, the numpy plan's bound kernels bit for bit, and which entry points take them."""
from __future__ import annotations

import numpy as np
import pytest

from nngpu.driver.callbacks import PreparedModelCallback
from nngpu.driver.device import Device
from nngpu.hal.types import ErrorStatus, ExecutionPreference, OptionalTimePoint, Priority
from nngpu.hal.types import OperandType as T
from nngpu.hal.types import OperationType as Op
from nngpu.modelutil import as_model_1_3
from nngpu.ops.lib.dtypes import is_tensor
from nngpu.ops.mirror_pad import source_index
from nngpu.ops.node import NeedsValue, OpNode
from nngpu.ops.registry import HalVersion, OpContext, OpError, introduced_in, lookup
from nngpu.testing import omitted, output, run_op, scalar, single_op_model, tensor
from nngpu.validation import ValidationError, validate_model

from .device_check import check_on_device, data

F16, F32, I32 = T.TENSOR_FLOAT16, T.TENSOR_FLOAT32, T.TENSOR_INT32
Q8, S8 = T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED
FL6, FL7 = HalVersion.AIDL_V2, HalVersion.AIDL_V3
rng = np.random.default_rng(67)


def _ok(result) -> list[np.ndarray]:
    assert result.status == ErrorStatus.NONE, result.status
    return result.outputs


def _run(op, inputs, outputs) -> list[np.ndarray]:
    """Through the 1.3 entry points, which take these operations (nngpu's extension)."""
    return _ok(run_op(op, inputs, outputs, version=13))


def _invalid(op, inputs, outputs) -> None:
    with pytest.raises(ValidationError):
        validate_model(single_op_model(op, inputs, outputs))


def _node(op, inputs, outputs, known: bool = True) -> OpNode:
    """The operation as the compiler sees it: every value known, or only the constants."""
    m = single_op_model(op, inputs, outputs)
    values = [None if v.omitted or not (known or v.const or not is_tensor(v.type)) else v.value for v in inputs]
    shapes = {i: tuple(np.shape(v.value)) for i, v in enumerate(inputs) if not v.omitted}
    shapes.update({len(inputs) + k: tuple(o.dims) for k, o in enumerate(outputs)})
    return OpNode(lookup(op), 0, m.operations[0], m.operands, values, shapes)


def _reference(op, inputs, outputs) -> list[np.ndarray]:
    m = single_op_model(op, inputs, outputs)
    ctx = OpContext(m.operations[0], m.operands, [None if v.omitted else v.value for v in inputs])
    return lookup(op).reference(ctx)


def _bound_equals_reference(op, inputs, outputs) -> None:
    node = _node(op, inputs, outputs)
    kernel = lookup(op).bind(node)
    assert kernel is not None
    want = _reference(op, inputs, outputs)
    outs = [np.empty(w.shape, w.dtype) for w in want]
    got = kernel([None if v.omitted else v.value for v in inputs], outs)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype and g.tobytes() == w.tobytes()


# ---- versions --------------------------------------------------------------------------------

def test_the_new_operations_name_their_feature_levels():
    assert [introduced_in(t) for t in (Op.RANK, Op.BATCH_MATMUL, Op.PACK, Op.MIRROR_PAD, Op.REVERSE)] == \
        [HalVersion.V1_3, FL6, FL6, FL7, FL7]
    assert HalVersion.V1_3 < FL6 < FL7 and [int(t) for t in (Op.BATCH_MATMUL, Op.REVERSE)] == [102, 105]


@pytest.mark.parametrize("op,inputs,outputs,version", [
    (Op.BATCH_MATMUL, [tensor(F32, np.ones((2, 3))), tensor(F32, np.ones((3, 2)))], [output(F32, [2, 2])], FL6),
    (Op.PACK, [scalar(T.INT32, 0), tensor(I32, [1, 2])], [output(I32, [1, 2])], FL6),
    (Op.RESHAPE, [tensor(I32, np.ones((2, 2))), tensor(I32, [4], const=True)], [output(I32, [4])], FL6),
    (Op.RESHAPE, [tensor(F32, np.ones((2, 2))), tensor(I32, [4], const=True)], [output(F32, [4])], HalVersion.V1_0),
    (Op.MIRROR_PAD, [tensor(F32, [1, 2]), tensor(I32, [[1, 0]], const=True), scalar(T.INT32, 0)],
     [output(F32, [3])], FL7),
    (Op.REVERSE, [tensor(Q8, [1, 2], 0.5, 3), tensor(I32, [0], const=True)], [output(Q8, [2], 0.5, 3)], FL7),
    (Op.RSQRT, [tensor(S8, [1, 2], 0.5, -3)], [output(S8, [2], 0.25, 1)], FL7),
    (Op.RSQRT, [tensor(F32, [1.0, 4.0])], [output(F32, [2])], HalVersion.V1_2),
])
def test_the_validator_reports_the_version_a_model_needs(op, inputs, outputs, version):
    assert validate_model(single_op_model(op, inputs, outputs)) == version


def _prepare(device, model, v13: bool) -> ErrorStatus:
    cb = PreparedModelCallback()
    if v13:
        status = device.prepareModel_1_3(as_model_1_3(model), ExecutionPreference.FAST_SINGLE_ANSWER,
                                         Priority.MEDIUM, OptionalTimePoint(), [], [], bytes(32), cb)
    else:
        status = device.prepareModel_1_2(model, ExecutionPreference.FAST_SINGLE_ANSWER, [], [], bytes(32), cb)
    assert cb.wait(60)
    return ErrorStatus(status) if status != ErrorStatus.NONE else ErrorStatus(cb.status)


def test_only_the_1_3_entry_points_take_them():
    device = Device("numpy")
    model = single_op_model(Op.REVERSE, [tensor(F32, [1, 2]), tensor(I32, [0], const=True)], [output(F32, [2])])
    for query in (device.getSupportedOperations, device.getSupportedOperations_1_1,
                  device.getSupportedOperations_1_2):
        assert query(model) == (ErrorStatus.INVALID_ARGUMENT, [])
    assert device.getSupportedOperations_1_3(as_model_1_3(model)) == (ErrorStatus.NONE, [True])
    assert _prepare(device, model, False) == ErrorStatus.INVALID_ARGUMENT
    assert _prepare(device, model, True) == ErrorStatus.NONE


# ---- BATCH_MATMUL ----------------------------------------------------------------------------

def _bmm(x, y, t, out_dims, *flags, quant=((0.0, 0), (0.0, 0), (0.0, 0))):
    ins = [tensor(t, x, *quant[0]), tensor(t, y, *quant[1])] + [scalar(T.BOOL, f) for f in flags]
    return ins, [output(t, out_dims, *quant[2])]


@pytest.mark.parametrize("adj_x,adj_y", [(False, False), (True, False), (False, True), (True, True)])
def test_batch_matmul_float_with_each_adjoint(adj_x, adj_y):
    x = np.array([[[1, 2, 3], [4, 5, 6]], [[0, 1, 0], [1, 0, -1]]], np.float32)    # [2, 2, 3]
    y = np.array([[[1, 0], [0, 1], [1, 1]], [[2, 3], [4, 5], [6, 7]]], np.float32)  # [2, 3, 2]
    want = np.array([[[4, 5], [10, 11]], [[4, 5], [-4, -4]]], np.float32)
    xs, ys = (np.swapaxes(x, 1, 2).copy() if adj_x else x), (np.swapaxes(y, 1, 2).copy() if adj_y else y)
    (out,) = _run(Op.BATCH_MATMUL, *_bmm(xs, ys, F32, [2, 2, 2], adj_x, adj_y))
    assert out.tolist() == want.tolist()


def test_batch_matmul_flags_may_be_left_out_and_float16_rounds_once():
    x = np.array([[1.0, 2.0]], np.float16)
    y = np.array([[1000.0], [0.25]], np.float16)  # 1000.5 in float32, stored as float16 1000.5
    (out,) = _run(Op.BATCH_MATMUL, *_bmm(x, y, F16, [1, 1]))
    assert out.dtype == np.float16 and out.tolist() == [[1000.5]]
    ins, outs = _bmm(x, y, F16, [1, 1])
    (out,) = _run(Op.BATCH_MATMUL, ins + [omitted(T.BOOL), omitted(T.BOOL)], outs)
    assert out.tolist() == [[1000.5]]


def test_batch_matmul_int32_wraps_like_the_int32_accumulator():
    x = np.array([[2 ** 31 - 1, 1]], np.int32)
    y = np.array([[1], [1]], np.int32)
    (out,) = _run(Op.BATCH_MATMUL, *_bmm(x, y, I32, [1, 1]))
    assert out.tolist() == [[-2 ** 31]]


def test_batch_matmul_quant8_signed_requantizes_and_saturates():
    # real x = 0.5 (q - 1), real y = 0.25 (q + 2), out = q * 0.125 - 3: the multiplier is exactly 1.
    x = np.array([[3, 5], [1, 127]], np.int8)     # real [[1, 2], [0, 63]]
    y = np.array([[2], [6]], np.int8)             # real [[1], [2]]
    quant = ((0.5, 1), (0.25, -2), (0.125, -3))
    (out,) = _run(Op.BATCH_MATMUL, *_bmm(x, y, S8, [2, 1], quant=quant))
    # real [[5], [126]]: 5 / 0.125 - 3 = 37; 126 / 0.125 - 3 saturates at 127
    assert out.tolist() == [[37], [127]]


def test_batch_matmul_rules():
    f = np.ones((2, 3), np.float32)
    _invalid(Op.BATCH_MATMUL, [tensor(F32, f), tensor(I32, f.T)], [output(F32, [2, 2])])        # types
    _invalid(Op.BATCH_MATMUL, [tensor(Q8, f, 1.0, 0), tensor(Q8, f.T, 1.0, 0)], [output(Q8, [2, 2], 1.0, 0)])
    _invalid(Op.BATCH_MATMUL, [tensor(F32, f), tensor(F32, f)], [output(F32, [2, 3])])         # 3 != 2
    _invalid(Op.BATCH_MATMUL, [tensor(F32, f[None]), tensor(F32, f.T)], [output(F32, [1, 2, 2])])  # ranks
    five = np.ones((1, 1, 1, 2, 3), np.float32)
    _invalid(Op.BATCH_MATMUL, [tensor(F32, five), tensor(F32, five.swapaxes(3, 4))], [output(F32, [1, 1, 1, 2, 2])])
    _invalid(Op.BATCH_MATMUL, [tensor(F32, np.ones((2, 2, 3))), tensor(F32, np.ones((3, 3, 2)))],
             [output(F32, [2, 2, 2])])                                                            # batch
    ins, outs = _bmm(f, f, F32, [3, 3], True, False)                                              # adj_x fits
    assert validate_model(single_op_model(Op.BATCH_MATMUL, ins, outs)) == FL6


def test_batch_matmul_shapes_at_execution_are_checked():
    x, y = tensor(F32, np.ones((2, 3))), tensor(F32, np.ones((2, 3)))
    x.dims = y.dims = [0, 0]  # known only from the request: the product is refused then
    assert run_op(Op.BATCH_MATMUL, [x, y], [output(F32, [0, 0])], version=13).status == ErrorStatus.GENERAL_FAILURE
    y = tensor(F32, np.ones((3, 4)))
    y.dims = [0, 0]
    (out,) = _run(Op.BATCH_MATMUL, [x, y], [output(F32, [0, 0])])
    assert out.tolist() == [[3.0] * 4] * 2


def test_batch_matmul_shape_function_and_bound_kernel():
    x, y = rng.standard_normal((2, 4, 3)).astype(np.float32), rng.standard_normal((2, 5, 3)).astype(np.float32)
    ins, outs = _bmm(x, y, F32, [2, 4, 5], False, True)
    assert _node(Op.BATCH_MATMUL, ins, outs, known=False).output_shapes() == [(2, 4, 5)]
    _bound_equals_reference(Op.BATCH_MATMUL, ins, outs)
    with pytest.raises(OpError):
        _node(Op.BATCH_MATMUL, *_bmm(x, y, F32, [2, 4, 5])).output_shapes()
    assert lookup(Op.BATCH_MATMUL).bind(_node(Op.BATCH_MATMUL, *_bmm(x.astype(np.int32), y.astype(np.int32),
                                                                       I32, [2, 4, 5], False, True))) is None


# ---- PACK --------------------------------------------------------------------------------------

@pytest.mark.parametrize("axis,want", [(0, [[1, 2, 3], [4, 5, 6]]), (1, [[1, 4], [2, 5], [3, 6]])])
def test_pack_stacks_along_the_axis(axis, want):
    ins = [scalar(T.INT32, axis), tensor(I32, [1, 2, 3]), tensor(I32, [4, 5, 6])]
    (out,) = _run(Op.PACK, ins, [output(I32, np.shape(want))])
    assert out.tolist() == want
    _bound_equals_reference(Op.PACK, ins, [output(I32, np.shape(want))])


def test_pack_of_one_quantized_tensor_adds_a_unit_axis():
    (out,) = _run(Op.PACK, [scalar(T.INT32, 1), tensor(S8, [[-1, 2]], 0.5, -3)], [output(S8, [1, 1, 2], 0.5, -3)])
    assert out.tolist() == [[[-1, 2]]]


def test_pack_rules():
    a = tensor(Q8, [1, 2], 0.5, 3)
    _invalid(Op.PACK, [scalar(T.INT32, 0), a, tensor(Q8, [1, 2], 0.25, 3)], [output(Q8, [2, 2], 0.5, 3)])  # scale
    _invalid(Op.PACK, [scalar(T.INT32, 0), a], [output(Q8, [1, 2], 0.5, 4)])                                # zero point
    _invalid(Op.PACK, [scalar(T.INT32, 2), a], [output(Q8, [1, 2], 0.5, 3)])                                # axis
    _invalid(Op.PACK, [scalar(T.INT32, -1), a], [output(Q8, [2, 1], 0.5, 3)])
    _invalid(Op.PACK, [scalar(T.INT32, 0), a, tensor(F32, [1, 2])], [output(Q8, [2, 2], 0.5, 3)])           # types
    _invalid(Op.PACK, [scalar(T.INT32, 0), a], [output(Q8, [1, 1, 2], 0.5, 3)])                             # ranks
    _invalid(Op.PACK, [tensor(I32, [0]), a], [output(Q8, [1, 2], 0.5, 3)])                                  # axis type
    bad = [scalar(T.INT32, 0), tensor(F32, [1, 2]), tensor(F32, [1, 2, 3])]
    with pytest.raises(OpError):
        _node(Op.PACK, bad, [output(F32, [2, 2])]).output_shapes()


# ---- MIRROR_PAD --------------------------------------------------------------------------------

@pytest.mark.parametrize("mode,want", [(0, [1, 2, 3, 2, 1]), (1, [1, 2, 3, 3, 2])])
def test_mirror_pad_spec_examples(mode, want):
    ins = [tensor(F32, [1, 2, 3]), tensor(I32, [[0, 2]], const=True), scalar(T.INT32, mode)]
    (out,) = _run(Op.MIRROR_PAD, ins, [output(F32, [5])])
    assert out.tolist() == want


def test_mirror_pad_two_axes_at_their_widest():
    x = np.array([[1, 2, 3], [4, 5, 6]], np.int32)
    ins = [tensor(I32, x), tensor(I32, [[1, 1], [2, 2]], const=True), scalar(T.INT32, 0)]  # REFLECT: up to 1, 2
    (out,) = _run(Op.MIRROR_PAD, ins, [output(I32, [4, 7])])
    assert out.tolist() == [[6, 5, 4, 5, 6, 5, 4], [3, 2, 1, 2, 3, 2, 1], [6, 5, 4, 5, 6, 5, 4], [3, 2, 1, 2, 3, 2, 1]]
    ins = [tensor(S8, x, 0.5, -1), tensor(I32, [[2, 2], [3, 0]], const=True), scalar(T.INT32, 1)]  # SYMMETRIC: 2, 3
    (out,) = _run(Op.MIRROR_PAD, ins, [output(S8, [6, 6], 0.5, -1)])
    rows = [[3, 2, 1, 1, 2, 3], [6, 5, 4, 4, 5, 6]]
    assert out.tolist() == [rows[1], rows[0], rows[0], rows[1], rows[1], rows[0]]


def test_mirror_pad_source_index_is_numpys_pad():
    for _ in range(40):
        shape = tuple(int(d) for d in rng.integers(1, 5, size=rng.integers(1, 4)))
        mode = int(rng.integers(0, 2))
        pads = [[int(rng.integers(0, d - (mode == 0) + 1)) for _ in range(2)] for d in shape]
        x = rng.standard_normal(shape).astype(np.float32)
        ins = [tensor(F32, x), tensor(I32, pads, const=True), scalar(T.INT32, mode)]
        (want,) = _reference(Op.MIRROR_PAD, ins, [output(F32)])
        index = np.ix_(*[source_index(d, a, b, mode) for d, (a, b) in zip(shape, pads)])
        assert np.array_equal(x[index], want)
        _bound_equals_reference(Op.MIRROR_PAD, ins, [output(F32, list(want.shape))])


def test_mirror_pad_rules():
    x = tensor(F32, [[1, 2, 3], [4, 5, 6]])
    pads = tensor(I32, [[0, 0], [3, 0]], const=True)
    _invalid(Op.MIRROR_PAD, [x, pads, scalar(T.INT32, 0)], [output(F32, [2, 6])])    # REFLECT: at most 2
    assert validate_model(single_op_model(Op.MIRROR_PAD, [x, pads, scalar(T.INT32, 1)], [output(F32, [2, 6])])) == FL7
    _invalid(Op.MIRROR_PAD, [x, pads, scalar(T.INT32, 2)], [output(F32, [2, 6])])    # mode
    _invalid(Op.MIRROR_PAD, [x, tensor(I32, [[0, -1], [0, 0]], const=True), scalar(T.INT32, 1)], [output(F32, [2, 2])])
    _invalid(Op.MIRROR_PAD, [x, tensor(I32, [[0, 0, 0], [0, 0, 0]], const=True), scalar(T.INT32, 1)],
             [output(F32, [2, 3])])                                                  # paddings shape
    _invalid(Op.MIRROR_PAD, [x, tensor(I32, [[0, 0]], const=True), scalar(T.INT32, 1)], [output(F32, [2, 3])])
    _invalid(Op.MIRROR_PAD, [tensor(Q8, [1, 2], 0.5, 0), tensor(I32, [[0, 1]], const=True), scalar(T.INT32, 1)],
             [output(Q8, [3], 0.5, 1)])                                              # zero point
    for pads, status in (([[0, 2]], ErrorStatus.GENERAL_FAILURE), ([[0, 1]], ErrorStatus.NONE)):  # from the request
        assert run_op(Op.MIRROR_PAD, [tensor(F32, [1, 2]), tensor(I32, pads), scalar(T.INT32, 0)], [output(F32, [0])],
                      version=13).status == status


# ---- REVERSE -----------------------------------------------------------------------------------

@pytest.mark.parametrize("axis", [0, 1, 2])
def test_reverse_each_axis(axis):
    x = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    ins = [tensor(I32, x), tensor(I32, [axis], const=True)]
    (out,) = _run(Op.REVERSE, ins, [output(I32, [2, 3, 4])])
    n = x.shape[axis]
    want = np.empty_like(x)
    for i in range(n):
        src = [slice(None)] * 3
        src[axis] = i
        dst = list(src)
        dst[axis] = n - 1 - i
        want[tuple(dst)] = x[tuple(src)]
    assert np.array_equal(out, want)
    _bound_equals_reference(Op.REVERSE, ins, [output(I32, [2, 3, 4])])
    from_request = [tensor(I32, x), tensor(I32, [axis])]
    assert _node(Op.REVERSE, from_request, [output(I32, [2, 3, 4])]).output_shapes() == [(2, 3, 4)]
    with pytest.raises(NeedsValue):  # the axis only decides validity: it is asked for all the same
        _node(Op.REVERSE, from_request, [output(I32, [2, 3, 4])], known=False).output_shapes()


def test_reverse_rules():
    eight = np.zeros((1,) * 7 + (2,), np.float16)
    (out,) = _run(Op.REVERSE, [tensor(F16, eight + np.float16([1, 2])), tensor(I32, [7], const=True)],
                  [output(F16, list(eight.shape))])
    assert out.reshape(-1).tolist() == [2, 1]
    _invalid(Op.REVERSE, [tensor(F32, np.zeros((1,) * 9)), tensor(I32, [0], const=True)], [output(F32, [1] * 9)])
    _invalid(Op.REVERSE, [tensor(F32, [1, 2]), tensor(I32, [1], const=True)], [output(F32, [2])])      # axis
    _invalid(Op.REVERSE, [tensor(F32, [1, 2]), tensor(I32, [0, 0], const=True)], [output(F32, [2])])   # axis shape
    _invalid(Op.REVERSE, [tensor(Q8, [1, 2], 0.5, 1), tensor(I32, [0], const=True)], [output(Q8, [2], 0.25, 1)])
    _invalid(Op.REVERSE, [tensor(F32, [1, 2]), tensor(I32, [0], const=True)], [output(F32, [1, 2])])   # rank
    for axis, status in ((-1, ErrorStatus.GENERAL_FAILURE), (0, ErrorStatus.NONE)):  # from the request
        assert run_op(Op.REVERSE, [tensor(F32, [1, 2]), tensor(I32, [axis])], [output(F32, [2])],
                      version=13).status == status


# ---- RESHAPE of TENSOR_INT32, RSQRT of quantized tensors -----------------------------------------

def test_reshape_int32():
    x = np.arange(-3, 3, dtype=np.int32).reshape(1, 2, 3)
    (out,) = _run(Op.RESHAPE, [tensor(I32, x), tensor(I32, [3, -1], const=True)], [output(I32, [3, 2])])
    assert out.tolist() == [[-3, -2], [-1, 0], [1, 2]]
    _invalid(Op.RESHAPE, [tensor(I32, x), tensor(I32, [6], const=True)], [output(F32, [6])])
    assert run_op(Op.RESHAPE, [tensor(I32, x), tensor(I32, [4, -1], const=True)], [output(I32, [4, 0])],
                  version=13).status == ErrorStatus.GENERAL_FAILURE


def test_rsqrt_quantized_rounds_half_away_and_saturates():
    # real inputs 0.25, 1, 4, 16 (scale 0.25); 1 / sqrt: 2, 1, 0.5, 0.25; over 0.4: 5, 2.5 -> 3, 1.25, 0.625
    (out,) = _run(Op.RSQRT, [tensor(Q8, [1, 4, 16, 64], 0.25, 0)], [output(Q8, [4], 0.4, 0)])
    assert out.tolist() == [5, 3, 1, 1]
    # at the zero point (inf) and below it (NaN) the top of the range; 1 / sqrt(0.01) = 10 -> 200
    # saturates too; 1 / sqrt(1) -> 20
    (out,) = _run(Op.RSQRT, [tensor(S8, [-10, -11, -9, 90], 0.01, -10)], [output(S8, [4], 0.05, 0)])
    assert out.tolist() == [127, 127, 127, 20]


def test_rsqrt_quantized_rules_and_bound_table():
    _invalid(Op.RSQRT, [tensor(Q8, [4], 0.25, 0)], [output(S8, [1], 0.25, 0)])
    values = np.arange(-128, 128, dtype=np.int8)
    _bound_equals_reference(Op.RSQRT, [tensor(S8, values, 0.03, -7)], [output(S8, [256], 0.02, 5)])
    _bound_equals_reference(Op.RSQRT, [tensor(Q8, values.view(np.uint8), 0.5, 200)], [output(Q8, [256], 0.01, 3)])
    assert lookup(Op.RSQRT).bind(_node(Op.RSQRT, [tensor(F32, [1.0])], [output(F32, [1])])) is None


# ---- on every device backend, against the reference -----------------------------------------------

@pytest.mark.parametrize("t,adj", [(F32, (False, True)), (F16, (True, False)), (I32, (True, True)), (S8, (False, False))])
def test_batch_matmul_on_the_device(t, adj):
    x, y = data((3, 4, 5), t), data((3, 5, 2), t)
    if t == I32:
        x, y = (rng.integers(-2 ** 31, 2 ** 31, size=s, dtype=np.int64).astype(np.int32) for s in ((3, 4, 5), (3, 5, 2)))
    x, y = (np.swapaxes(x, 1, 2).copy() if adj[0] else x), (np.swapaxes(y, 1, 2).copy() if adj[1] else y)
    q = ((0.07, 5), (0.11, -9), (0.6, 3)) if t == S8 else ((0.0, 0),) * 3
    ins = [tensor(t, x, *q[0]), tensor(t, y, *q[1]), scalar(T.BOOL, adj[0]), scalar(T.BOOL, adj[1])]
    check_on_device(Op.BATCH_MATMUL, ins, t, 3, scale=q[2][0], zero_point=q[2][1])


def test_batch_matmul_quant8_signed_long_sums_on_the_device():
    k = 33_100  # k * 255 * 255 passes 2^31: the device sums in 64 bits, the reference wraps to int32
    x, y = np.full((1, k), 127, np.int8), np.full((k, 1), -128, np.int8)
    check_on_device(Op.BATCH_MATMUL, [tensor(S8, x, 1e-3, -128), tensor(S8, y, 1e-3, 127)], S8, 2, scale=2.0)


def test_pack_mirror_pad_reverse_rsqrt_on_the_device():
    parts = [tensor(S8, data((2, 3), S8), 0.5, -4) for _ in range(3)]
    check_on_device(Op.PACK, [scalar(T.INT32, 2), *parts], S8, 3, scale=0.5, zero_point=-4)
    for mode, pads in ((0, [[1, 2], [0, 3], [2, 0]]), (1, [[2, 2], [4, 1], [0, 3]])):
        check_on_device(Op.MIRROR_PAD, [tensor(Q8, data((3, 4, 3), Q8), 0.5, 9), tensor(I32, pads, const=True),
                                        scalar(T.INT32, mode)], Q8, 3, scale=0.5,
                        zero_point=9)
    check_on_device(Op.REVERSE, [tensor(F16, data((2, 3, 4, 5), F16)), tensor(I32, [3], const=True)], F16, 4)
    check_on_device(Op.RSQRT, [tensor(S8, np.arange(-128, 128, dtype=np.int8), 0.03, -7)], S8, 1, scale=0.02, zero_point=5)
