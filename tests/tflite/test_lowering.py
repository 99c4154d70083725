"""The lowerings of TFLite operators NNAPI cannot express as written, on models built in the
test: requantization, same-scale NNAPI ops, int8 ops NNAPI has only for float (lookup tables),
folded SHAPE arithmetic, the rank-5 UpSampling2D pattern, int64 ARG_MAX. Every quantized case
feeds all 256 input values and compares with TFLite's builtin kernels."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tflite", reason="the `tflite` flatbuffer package is not installed")

from nngpu.hal.types import Model_1_3, OperationType
from nngpu.session import Session
from nngpu.tflite import import_tflite
from nngpu.tflite.mappers import MAPPERS

from .tfl_util import assert_close, run_nngpu, run_reference
from .tflbuild import BOOL, INT8, INT32, INT64, UINT8, TFLModel, opt

Op = OperationType
_NP = {UINT8: np.uint8, INT8: np.int8}


def _ops(model) -> list[OperationType]:
    return [o.type for o in (model.main if isinstance(model, Model_1_3) else model).operations]


def _all_values(qtype: int, shape=(4, 64)) -> np.ndarray:
    lo = 0 if qtype == UINT8 else -128
    return (np.arange(256) + lo).reshape(shape).astype(_NP[qtype])


def _check(data: bytes, inputs, quant_tol: int = 0, rel: float = 1e-5, reference_kernels: bool = False):
    imported = import_tflite(data)
    assert_close(run_reference(data, inputs, xnnpack=False, reference_kernels=reference_kernels),
                 run_nngpu(imported, inputs), rel, quant_tol)
    return imported


def _unary(code: str, ti: int, si: float, zi: int, to: int, so: float, zo: int, options=None) -> bytes:
    m = TFLModel()
    x = m.tensor("x", [4, 64], ti, scale=si, zero_point=zi)
    y = m.tensor("y", [4, 64], to, scale=so, zero_point=zo)
    m.op(code, [x], [y], *(options or ()))
    return m.build([x], [y])


# ---- requantization (QUANTIZE of a quantized tensor) ------------------------------------------
REQUANT = {
    "uint8->int8 same scale": (UINT8, 0.05, 128, INT8, 0.05, 0),
    "int8->uint8 same scale": (INT8, 0.05, -3, UINT8, 0.05, 125),
    "uint8->int8 finer": (UINT8, 0.05, 120, INT8, 0.031, -7),
    "int8->uint8 coarser": (INT8, 0.02, 5, UINT8, 0.0625, 131),
    "int8->int8 upscale": (INT8, 0.1, 0, INT8, 0.0123, 9),
    "uint8->uint8 downscale": (UINT8, 0.0101, 77, UINT8, 0.0333, 12),
}


@pytest.mark.parametrize("case", REQUANT)
def test_requantize_is_bit_exact(case):
    ti, si, zi, to, so, zo = REQUANT[case]
    imported = _check(_unary("QUANTIZE", ti, si, zi, to, so, zo), [_all_values(ti)], reference_kernels=True)
    same_scale = si == so
    assert (Op.GATHER in _ops(imported.model)) != same_scale  # a table only where scales differ


# ---- int8 / uint8 operations NNAPI has only for float: lookup tables ----------------------------
FLOAT_ONLY = {
    "EXP": (INT8, 0.03, -20, INT8, 0.2, -128),
    "LOG": (INT8, 0.02, -128, INT8, 0.05, 60),
    "RSQRT": (INT8, 0.02, -128, INT8, 0.08, -128),
    "ABS": (INT8, 0.05, 10, INT8, 0.03, -128),
    "NEG": (INT8, 0.05, 3, INT8, 0.05, -3),  # TFLite negates raw values: -(-128) wraps
    "ELU": (INT8, 0.04, 20, INT8, 0.03, -10),
}


@pytest.mark.parametrize("code", FLOAT_ONLY)
def test_quantized_float_only_op_by_table(code):
    ti, si, zi, to, so, zo = FLOAT_ONLY[code]
    # TFLite's int8 RSQRT is fixed-point arithmetic, not a table: within one step of it.
    imported = _check(_unary(code, ti, si, zi, to, so, zo), [_all_values(ti)], quant_tol=int(code == "RSQRT"))
    assert _ops(imported.model)[-2:] == [Op.CAST, Op.GATHER]


def test_quantized_leaky_relu_by_table():
    data = _unary("LEAKY_RELU", INT8, 0.05, 4, INT8, 0.04, -20,
                  ("LeakyReluOptions", lambda b: opt(b, "LeakyReluOptions", Alpha=0.3)))
    _check(data, [_all_values(INT8)], quant_tol=0)


# ---- NNAPI operations that keep the input's scale: a requantize after ------------------------------
@pytest.mark.parametrize("qtype", [UINT8, INT8])
def test_mean_and_relu_with_another_output_scale(qtype):
    zp = 0 if qtype == UINT8 else -128
    m = TFLModel()
    x = m.tensor("x", [1, 4, 64, 1], qtype, scale=0.05, zero_point=zp + 100)
    axes = m.const("axes", np.array([1], np.int32), INT32)
    mean = m.tensor("mean", [1, 1, 64, 1], qtype, scale=0.021, zero_point=zp + 90)
    relu = m.tensor("relu", [1, 4, 64, 1], qtype, scale=0.03, zero_point=zp + 5)
    m.op("MEAN", [x, axes], [mean], "ReducerOptions", lambda b: opt(b, "ReducerOptions", KeepDims=True))
    m.op("RELU", [x], [relu])
    inp = [_all_values(qtype, (1, 4, 64, 1))]
    imported = _check(m.build([x], [mean, relu]), inp, quant_tol=0)
    ops = _ops(imported.model)
    assert ops[:3] == [Op.DEQUANTIZE, Op.MEAN, Op.QUANTIZE] and ops.count(Op.GATHER) == 1  # RELU's table


# ---- values known at import ----------------------------------------------------------------------
def test_shape_arithmetic_is_folded():
    # y = reshape(x, [shape(x)[0], -1]) * 2, as a dynamic batch converts (SHAPE, STRIDED_SLICE, PACK).
    m = TFLModel()
    x = m.tensor("x", [2, 3, 4])
    shape = m.tensor("shape", [3], INT32)
    n = m.tensor("n", [], INT32)
    new_shape = m.tensor("new_shape", [2], INT32)
    flat = m.tensor("flat", [2, 12])
    y = m.tensor("y", [2, 12])
    i32 = lambda name, v: m.const(name, np.asarray(v, np.int32), INT32)
    m.op("SHAPE", [x], [shape], "ShapeOptions", lambda b: opt(b, "ShapeOptions", OutType=INT32))
    m.op("STRIDED_SLICE", [shape, i32("b", [0]), i32("e", [1]), i32("s", [1])], [n], "StridedSliceOptions",
         lambda b: opt(b, "StridedSliceOptions", ShrinkAxisMask=1))
    m.op("PACK", [n, i32("m1", -1)], [new_shape], "PackOptions", lambda b: opt(b, "PackOptions", ValuesCount=2, Axis=0))
    m.op("RESHAPE", [x, new_shape], [flat])
    m.op("MUL", [flat, m.const("two", np.array(2.0, np.float32))], [y], "MulOptions",
         lambda b: opt(b, "MulOptions", FusedActivationFunction=0))
    imported = _check(m.build([x], [y]), [np.random.default_rng(1).uniform(-1, 1, (2, 3, 4)).astype(np.float32)])
    assert _ops(imported.model) == [Op.RESHAPE, Op.MUL] and imported.folded == 3


@pytest.mark.parametrize("k", [2, 3])
def test_rank5_repeat_becomes_resize_nearest(k):
    # Keras 3 UpSampling2D: EXPAND_DIMS to rank 5, TILE the new axis, RESHAPE back.
    m = TFLModel()
    x = m.tensor("x", [1, 5, 4, 2])
    e = m.tensor("e", [1, 5, 1, 4, 2])
    t = m.tensor("t", [1, 5, k, 4, 2])
    y = m.tensor("y", [1, 5 * k, 4, 2])
    m.op("EXPAND_DIMS", [x, m.const("ax", np.array(2, np.int32), INT32)], [e])
    m.op("TILE", [e, m.const("mult", np.array([1, 1, k, 1, 1], np.int32), INT32)], [t])
    m.op("RESHAPE", [t, m.const("s", np.array([1, 5 * k, 4, 2], np.int32), INT32)], [y])
    imported = _check(m.build([x], [y]), [np.random.default_rng(2).uniform(-1, 1, (1, 5, 4, 2)).astype(np.float32)])
    assert _ops(imported.model) == [Op.RESIZE_NEAREST_NEIGHBOR]


def test_int64_argmax_is_computed_as_int32_and_read_as_int64():
    m = TFLModel()
    x = m.tensor("x", [3, 7])
    y = m.tensor("y", [3], INT64)
    m.op("ARG_MAX", [x, m.const("ax", np.array([1], np.int32), INT32)], [y], "ArgMaxOptions",
         lambda b: opt(b, "ArgMaxOptions", OutputType=INT64))
    imported = _check(m.build([x], [y]), [np.random.default_rng(3).uniform(-1, 1, (3, 7)).astype(np.float32)])
    assert imported.outputs[0].dtype == np.int64 and imported.outputs[0].computed == np.int32


def test_graph_output_that_is_an_input_gets_a_copy():
    m = TFLModel()
    x, y = m.tensor("x", [2, 3]), m.tensor("y", [2, 3])
    m.op("RELU", [x], [y])
    imported = _check(m.build([x], [y, x]), [np.random.default_rng(4).uniform(-1, 1, (2, 3)).astype(np.float32)])
    assert _ops(imported.model) == [Op.RELU, Op.RESHAPE]


# ---- the mapping table ---------------------------------------------------------------------------
def test_every_builtin_with_an_nnapi_counterpart_is_mapped():
    names = {"BATCH_MATMUL", "REVERSE_V2", "MIRROR_PAD", "WHILE", "IF", "UNIDIRECTIONAL_SEQUENCE_LSTM",
             "BIDIRECTIONAL_SEQUENCE_LSTM", "UNIDIRECTIONAL_SEQUENCE_RNN", "BIDIRECTIONAL_SEQUENCE_RNN",
             "LSTM", "RNN", "SVDF", "SPLIT_V", "BROADCAST_TO", "HASHTABLE_LOOKUP", "REDUCE_ALL", "SQRT",
             "SIN", "ELU", "QUANTIZE", "GATHER", "STRIDED_SLICE"}
    assert names <= MAPPERS.keys()


def test_bool_reduce_all():
    m = TFLModel()
    x, y = m.tensor("x", [2, 3], BOOL), m.tensor("y", [2], BOOL)
    m.op("REDUCE_ALL", [x, m.const("ax", np.array([1], np.int32), INT32)], [y], "ReducerOptions",
         lambda b: opt(b, "ReducerOptions", KeepDims=False))
    _check(m.build([x], [y]), [np.array([[True, True, False], [True, True, True]])])


def test_mirror_pad_reverse_batch_matmul():
    rng = np.random.default_rng(5)
    m = TFLModel()
    x, a = m.tensor("x", [2, 3, 4]), m.tensor("a", [2, 4, 5])
    p, r, mm = m.tensor("p", [2, 5, 6]), m.tensor("r", [2, 3, 4]), m.tensor("mm", [2, 3, 5])
    pads = m.const("pads", np.array([[0, 0], [1, 1], [2, 0]], np.int32), INT32)
    m.op("MIRROR_PAD", [x, pads], [p], "MirrorPadOptions", lambda b: opt(b, "MirrorPadOptions", Mode=1))
    m.op("REVERSE_V2", [x, m.const("axes", np.array([1, 2], np.int32), INT32)], [r])
    m.op("BATCH_MATMUL", [x, a], [mm], "BatchMatMulOptions", lambda b: opt(b, "BatchMatMulOptions", AdjX=False))
    inputs = [rng.uniform(-1, 1, s).astype(np.float32) for s in ((2, 3, 4), (2, 4, 5))]
    imported = _check(m.build([x, a], [p, r, mm]), inputs)
    assert {Op.MIRROR_PAD, Op.REVERSE, Op.BATCH_MATMUL} <= set(_ops(imported.model))




# ---- exact compositions for builtins with no single NNAPI operation -------------------------------
def _float_op(code: str, n_in: int = 1, type_=None, options=None, shape=(3, 5)):
    from .tflbuild import FLOAT32
    t = FLOAT32 if type_ is None else type_
    m = TFLModel()
    xs = [m.tensor(f"x{k}", list(shape), t) for k in range(n_in)]
    y = m.tensor("y", list(shape), t)
    m.op(code, xs, [y], *(options or ()))
    rng = np.random.default_rng(6)
    if t == INT32:
        ins = [rng.integers(-20, 20, shape).astype(np.int32) for _ in xs]
        ins[-1][ins[-1] == 0] = 3
    else:
        ins = [rng.uniform(-3, 3, shape).astype(np.float32) for _ in xs]
    return m.build(xs, [y]), ins


COMPOSED = {
    "CEIL": lambda: _float_op("CEIL"),
    "SQUARE": lambda: _float_op("SQUARE"),
    "RELU_0_TO_1": lambda: _float_op("RELU_0_TO_1"),
    "ADD_N": lambda: _float_op("ADD_N", 3),
    "FLOOR_DIV": lambda: _float_op("FLOOR_DIV", 2),
    "FLOOR_DIV int32": lambda: _float_op("FLOOR_DIV", 2, INT32),
    "ZEROS_LIKE": lambda: _float_op("ZEROS_LIKE"),
    "FLOOR_MOD int32": lambda: _float_op("FLOOR_MOD", 2, INT32),
}


@pytest.mark.parametrize("case", COMPOSED)
def test_composed_builtin_matches_reference(case):
    data, ins = COMPOSED[case]()
    _check(data, ins, rel=1e-6)


@pytest.mark.parametrize("approximate", [False, True])
def test_int8_gelu_by_table(approximate):
    opts = ("GeluOptions", lambda b: opt(b, "GeluOptions", Approximate=approximate))
    _check(_unary("GELU", INT8, 0.03, 0, INT8, 0.05, -100, opts), [_all_values(INT8)], quant_tol=0)


def test_batch_to_space_with_crops_slices_after():
    m = TFLModel()
    x, y = m.tensor("x", [4, 2, 3, 2]), m.tensor("y", [1, 3, 4, 2])
    block = m.const("block", np.array([2, 2], np.int32), INT32)
    crops = m.const("crops", np.array([[1, 0], [0, 2]], np.int32), INT32)
    m.op("BATCH_TO_SPACE_ND", [x, block, crops], [y])
    imported = _check(m.build([x], [y]), [np.random.default_rng(7).uniform(-1, 1, (4, 2, 3, 2)).astype(np.float32)])
    assert _ops(imported.model) == [Op.BATCH_TO_SPACE_ND, Op.SLICE]


def _two_step_upsampling(kh: int, kw: int, second: str = "TILE") -> bytes:
    """Nearest upsampling as TensorFlow 2.21 writes Keras 3's UpSampling2D: rows, then columns,
    each an axis of 1 inserted by RESHAPE, repeated, and merged by the next RESHAPE."""
    m = TFLModel()
    n, h, w, c = 1, 3, 4, 2
    x = m.tensor("x", [n, h, w, c])
    a = m.tensor("a", [n, h, 1, w, c])
    b = m.tensor("b", [n, h, kh, w, c])
    d = m.tensor("d", [n, h * kh, w, 1, c])
    e = m.tensor("e", [n, h * kh, w, kw, c])
    y = m.tensor("y", [n, h * kh, w * kw, c])
    m.op("RESHAPE", [x, m.const("s1", np.array([n, h, 1, w, c], np.int32), INT32)], [a])
    m.op("TILE", [a, m.const("m1", np.array([1, 1, kh, 1, 1], np.int32), INT32)], [b])
    m.op("RESHAPE", [b, m.const("s2", np.array([n, h * kh, w, 1, c], np.int32), INT32)], [d])
    if second == "TILE":
        m.op("TILE", [d, m.const("m2", np.array([1, 1, 1, kw, 1], np.int32), INT32)], [e])
    else:
        m.op("BROADCAST_TO", [d, m.const("to", np.array([n, h * kh, w, kw, c], np.int32), INT32)], [e])
    m.op("RESHAPE", [e, m.const("s3", np.array([n, h * kh, w * kw, c], np.int32), INT32)], [y])
    return m.build([x], [y])


@pytest.mark.parametrize("kh, kw, second", [(2, 2, "TILE"), (3, 2, "TILE"), (2, 2, "BROADCAST_TO")])
def test_two_step_upsampling_becomes_one_resize(kh, kw, second):
    x = np.random.default_rng(5).uniform(-1, 1, (1, 3, 4, 2)).astype(np.float32)
    imported = _check(_two_step_upsampling(kh, kw, second), [x])
    assert _ops(imported.model) == [Op.RESIZE_NEAREST_NEIGHBOR]


def test_a_chain_that_is_not_a_repeat_stays_as_written(tmp_path):
    """Tiling the inserted axis but merging it with W (a reshape that interleaves whole rows) is
    not nearest upsampling: no RESIZE; the rank-5 operators run on the host, and it matches."""
    m = TFLModel()
    x, a, b, y = m.tensor("x", [1, 3, 4, 2]), m.tensor("a", [1, 3, 1, 4, 2]), m.tensor("b", [1, 3, 2, 4, 2]), \
        m.tensor("y", [1, 3, 8, 2])
    m.op("RESHAPE", [x, m.const("s1", np.array([1, 3, 1, 4, 2], np.int32), INT32)], [a])
    m.op("TILE", [a, m.const("m1", np.array([1, 1, 2, 1, 1], np.int32), INT32)], [b])
    m.op("RESHAPE", [b, m.const("s2", np.array([1, 3, 8, 2], np.int32), INT32)], [y])
    path = tmp_path / "interleave.tflite"
    path.write_bytes(m.build([x], [y]))
    value = np.random.default_rng(6).uniform(-1, 1, (1, 3, 4, 2)).astype(np.float32)
    with Session(str(path), "numpy") as s:
        assert s.placement.endswith("on the host (2: RESHAPE ×2)")   # the rank-5 RESHAPEs
        assert_close(run_reference(path.read_bytes(), [value], xnnpack=False), list(s.run([value]).values()))
