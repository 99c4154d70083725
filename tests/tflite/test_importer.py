"""Unit tests of the TFLite -> NNAPI mapping on tiny models built in the test."""
from __future__ import annotations

import struct
import zlib

import numpy as np
import pytest

pytest.importorskip("tflite", reason="the `tflite` flatbuffer package is not installed")

from .tfl_util import assert_close, run_nngpu, run_reference  # noqa: E402
from .tflbuild import FLOAT16, FLOAT32, INT8, INT32, UINT8, TFLModel, opt, opt_vec  # noqa: E402

from nngpu.hal.types import Model, Model_1_3, OperandType, OperationType  # noqa: E402
from nngpu.tflite import (  # noqa: E402
    TFLiteFormatError,
    TFLiteImportError,
    UnsupportedOperatorError,
    import_tflite,
)
from nngpu.tflite.fold import densify  # noqa: E402
from nngpu.tflite.reader import DimMeta, Sparsity, Tensor  # noqa: E402

T = OperandType
Op = OperationType
RNG = np.random.default_rng(7)


@pytest.fixture(autouse=True)
def _own_seed(request):
    """Each test draws from a generator seeded by its own name: the same data whatever ran before
    it in this process (test order and xdist's split change that)."""
    global RNG
    RNG = np.random.default_rng(zlib.crc32(request.node.name.encode()))


def _ops(model) -> list[OperationType]:
    g = model.main if isinstance(model, Model_1_3) else model
    return [o.type for o in g.operations]


def _operands(model):
    return (model.main if isinstance(model, Model_1_3) else model).operands


def _check(data: bytes, inputs: list[np.ndarray], rel: float = 1e-5, quant_tol: int = 0, xnnpack: bool = False,
           reference_kernels: bool = False):
    """Import, run on nngpu, compare with TFLite's builtin kernels (or its default XNNPACK path,
    or its reference kernels); returns the import."""
    imported = import_tflite(data)
    got = run_nngpu(imported, inputs)
    assert_close(run_reference(data, inputs, xnnpack=xnnpack, reference_kernels=reference_kernels), got, rel,
                 quant_tol)
    return imported


def _f32(*shape) -> np.ndarray:
    return RNG.uniform(-1, 1, shape).astype(np.float32)


def _conv_opts(padding=0, stride=1, act=0, dil=1):
    return lambda b: opt(b, "Conv2DOptions", Padding=padding, StrideW=stride, StrideH=stride,
                         FusedActivationFunction=act, DilationWFactor=dil, DilationHFactor=dil)


# ---- float ops -------------------------------------------------------------------------------
def test_add_with_fused_relu_and_constant():
    m = TFLModel()
    x, y = m.tensor("x", [1, 4]), m.tensor("y", [1, 4])
    c = m.const("c", np.array([[1, -2, 3, -4]], np.float32))
    m.op("ADD", [x, c], [y], "AddOptions", lambda b: opt(b, "AddOptions", FusedActivationFunction=1))
    imported = _check(m.build([x], [y]), [_f32(1, 4)])
    assert isinstance(imported.model, Model) and imported.version == 12
    assert _ops(imported.model) == [Op.ADD]
    assert imported.input_names == ["x"] and imported.output_names == ["y"]


def test_fused_tanh_is_ignored_like_the_interpreter_with_a_warning():
    # TFLite kernels clamp only for RELU/RELU6/RELU_N1_TO_1: a fused TANH is a no-op there.
    m = TFLModel()
    a, b_, y = m.tensor("a", [2, 3]), m.tensor("b", [2, 3]), m.tensor("y", [2, 3])
    m.op("MUL", [a, b_], [y], "MulOptions", lambda b: opt(b, "MulOptions", FusedActivationFunction=4))
    imported = _check(m.build([a, b_], [y]), [_f32(2, 3) * 3, _f32(2, 3)])
    assert _ops(imported.model) == [Op.MUL]
    assert len(imported.warnings) == 1 and "#0 MUL" in imported.warnings[0] and "TANH" in imported.warnings[0]


@pytest.mark.parametrize("padding,stride,act,dil", [(0, 2, 3, 1), (1, 1, 1, 2), (0, 1, 0, 1)])
def test_conv_2d_padding_stride_dilation_activation(padding, stride, act, dil):
    m = TFLModel()
    x, y = m.tensor("x", [1, 9, 8, 3]), None
    w = m.const("w", _f32(4, 3, 3, 3))
    bias = m.const("b", _f32(4))
    xs = 9 if padding == 0 else 9 - 2 * dil
    out_h = -(-xs // stride) if padding == 0 else -(-(9 - 2 * dil) // stride)
    out_w = -(-8 // stride) if padding == 0 else -(-(8 - 2 * dil) // stride)
    y = m.tensor("y", [1, out_h, out_w, 4])
    m.op("CONV_2D", [x, w, bias], [y], "Conv2DOptions", _conv_opts(padding, stride, act, dil))
    imported = _check(m.build([x], [y]), [_f32(1, 9, 8, 3) * 4])
    assert _ops(imported.model) == [Op.CONV_2D]
    conv = (imported.model.operations[0])
    assert len(conv.inputs) == (10 if dil != 1 else 7)


def test_depthwise_conv_with_multiplier_and_float16_weights_folded():
    m = TFLModel()
    x, y = m.tensor("x", [1, 6, 6, 2]), m.tensor("y", [1, 4, 4, 4])
    w16 = m.const("w16", _f32(1, 3, 3, 4).astype(np.float16), FLOAT16)
    w = m.tensor("w", [1, 3, 3, 4])
    bias = m.const("b", _f32(4))
    m.op("DEQUANTIZE", [w16], [w])
    m.op("DEPTHWISE_CONV_2D", [x, w, bias], [y], "DepthwiseConv2DOptions",
         lambda b: opt(b, "DepthwiseConv2DOptions", Padding=1, StrideW=1, StrideH=1, DepthMultiplier=2,
                       DilationWFactor=1, DilationHFactor=1))
    imported = _check(m.build([x], [y]), [_f32(1, 6, 6, 2)])
    assert imported.folded == 1
    assert _ops(imported.model) == [Op.DEPTHWISE_CONV_2D]  # the DEQUANTIZE is gone


def test_fully_connected_keep_num_dims_without_bias():
    m = TFLModel()
    x, y = m.tensor("x", [2, 3, 4]), m.tensor("y", [2, 3, 5])
    w = m.const("w", _f32(5, 4))
    m.op("FULLY_CONNECTED", [x, w, -1], [y], "FullyConnectedOptions",
         lambda b: opt(b, "FullyConnectedOptions", FusedActivationFunction=1, KeepNumDims=True))
    imported = _check(m.build([x], [y]), [_f32(2, 3, 4)])
    assert _ops(imported.model) == [Op.FULLY_CONNECTED, Op.RESHAPE]


def test_densify_of_sparse_weights_is_folded():
    dense = np.array([[0, 1.5, 0, 0], [2, 0, 0, -3], [0, 0, 0, 0], [0, 0, 4, 0.5]], np.float32)
    rows, cols = np.nonzero(dense)
    segments = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=4))])
    m = TFLModel()
    x, y = m.tensor("x", [1, 4]), m.tensor("y", [1, 4])
    ws = m.tensor("ws", [4, 4], FLOAT32, dense[rows, cols], csr=(segments, cols))
    w = m.tensor("w", [4, 4])
    m.op("DENSIFY", [ws], [w])
    m.op("FULLY_CONNECTED", [x, w, -1], [y], "FullyConnectedOptions",
         lambda b: opt(b, "FullyConnectedOptions", FusedActivationFunction=0))
    data = m.build([x], [y])
    imported = import_tflite(data)
    assert imported.folded == 1 and _ops(imported.model) == [Op.FULLY_CONNECTED]
    inp = [_f32(1, 4)]
    np.testing.assert_allclose(run_nngpu(imported, inp)[0], inp[0] @ dense.T, rtol=1e-6, atol=1e-6)
    assert_close(run_reference(data, inp), run_nngpu(imported, inp), 1e-6)


def test_densify_block_sparse_matrix():
    # 4x4 in 2x2 blocks; only blocks (0, 0) and (1, 1) are stored.
    dense = np.zeros((4, 4), np.float32)
    dense[:2, :2] = [[1, 2], [3, 4]]
    dense[2:, 2:] = [[5, 6], [7, 8]]
    sp = Sparsity([0, 1, 2, 3], [0, 1], [DimMeta(True, 2), DimMeta(False, 0, np.array([0, 1, 2]), np.array([0, 1])),
                                          DimMeta(True, 2), DimMeta(True, 2)])
    t = Tensor(0, "w", [4, 4], 0, None, np.arange(1, 9, dtype=np.float32), sp)
    np.testing.assert_array_equal(densify(t), dense)


def test_concatenation_negative_axis_fused_relu_ignored_like_the_interpreter():
    m = TFLModel()
    a, b_, y = m.tensor("a", [1, 2, 3]), m.tensor("b", [1, 2, 2]), m.tensor("y", [1, 2, 5])
    m.op("CONCATENATION", [a, b_], [y], "ConcatenationOptions",
         lambda b: opt(b, "ConcatenationOptions", Axis=-1, FusedActivationFunction=1))
    # TFLite's builtin kernel refuses the activation; its default (XNNPACK) path ignores it.
    imported = _check(m.build([a, b_], [y]), [_f32(1, 2, 3), _f32(1, 2, 2)], xnnpack=True)
    assert _ops(imported.model) == [Op.CONCATENATION] and "CONCATENATION" in imported.warnings[0]


def test_reshape_new_shape_from_options():
    m = TFLModel()
    x, y = m.tensor("x", [1, 2, 6]), m.tensor("y", [3, 4])
    m.op("RESHAPE", [x], [y], "ReshapeOptions",
         lambda b: opt_vec(b, "ReshapeOptions", {"NewShape": np.array([3, -1], np.int32)}))
    imported = _check(m.build([x], [y]), [_f32(1, 2, 6)])
    assert _ops(imported.model) == [Op.RESHAPE]


def test_pad_pool_mean_softmax_chain():
    m = TFLModel()
    x = m.tensor("x", [1, 6, 6, 3])
    pads = m.const("pads", np.array([[0, 0], [1, 1], [1, 1], [0, 0]], np.int32), INT32)
    p = m.tensor("p", [1, 8, 8, 3])
    mp = m.tensor("mp", [1, 4, 4, 3])
    ap = m.tensor("ap", [1, 4, 4, 3])
    axes = m.const("axes", np.array([1, 2], np.int32), INT32)
    mean = m.tensor("mean", [1, 1, 1, 3])
    flat = m.tensor("flat", [1, 3])
    y = m.tensor("y", [1, 3])
    pool = lambda b: opt(b, "Pool2DOptions", Padding=1, StrideW=2, StrideH=2, FilterWidth=2, FilterHeight=2)  # noqa
    m.op("PAD", [x, pads], [p])
    m.op("MAX_POOL_2D", [p], [mp], "Pool2DOptions", pool)
    m.op("AVERAGE_POOL_2D", [mp], [ap], "Pool2DOptions",
         lambda b: opt(b, "Pool2DOptions", Padding=0, StrideW=1, StrideH=1, FilterWidth=3, FilterHeight=3))
    m.op("MEAN", [ap, axes], [mean], "ReducerOptions", lambda b: opt(b, "ReducerOptions", KeepDims=True))
    m.op("RESHAPE", [mean, m.const("s", np.array([1, 3], np.int32), INT32)], [flat])
    m.op("SOFTMAX", [flat], [y], "SoftmaxOptions", lambda b: opt(b, "SoftmaxOptions", Beta=2.0))
    imported = _check(m.build([x], [y]), [_f32(1, 6, 6, 3) * 3])
    assert _ops(imported.model) == [Op.PAD, Op.MAX_POOL_2D, Op.AVERAGE_POOL_2D, Op.MEAN, Op.RESHAPE, Op.SOFTMAX]


def test_movement_and_activation_ops():
    m = TFLModel()
    x = m.tensor("x", [1, 4, 4, 8])
    d2s = m.tensor("d2s", [1, 8, 8, 2])
    perm = m.const("perm", np.array([0, 3, 1, 2], np.int32), INT32)
    tr = m.tensor("tr", [1, 2, 8, 8])
    begin = m.const("begin", np.array([0, 0, 1, 0], np.int32), INT32)
    end = m.const("end", np.array([1, 2, 7, 8], np.int32), INT32)
    strides = m.const("strides", np.array([1, 1, 2, 3], np.int32), INT32)
    sl = m.tensor("sl", [1, 2, 3, 3])
    alpha = m.const("alpha", np.array([[[0.25, -0.5, 2.0]]], np.float32))
    pr = m.tensor("pr", [1, 2, 3, 3])
    y1, y2, y3 = m.tensor("lg", [1, 2, 3, 3]), m.tensor("hs", [1, 2, 3, 3]), m.tensor("r6", [1, 2, 3, 3])
    m.op("DEPTH_TO_SPACE", [x], [d2s], "DepthToSpaceOptions", lambda b: opt(b, "DepthToSpaceOptions", BlockSize=2))
    m.op("TRANSPOSE", [d2s, perm], [tr])
    m.op("STRIDED_SLICE", [tr, begin, end, strides], [sl], "StridedSliceOptions",
         lambda b: opt(b, "StridedSliceOptions", BeginMask=0, EndMask=0))
    m.op("PRELU", [sl, alpha], [pr])
    m.op("LOGISTIC", [pr], [y1])
    m.op("HARD_SWISH", [pr], [y2])
    m.op("RELU6", [pr], [y3])
    imported = _check(m.build([x], [y1, y2, y3]), [_f32(1, 4, 4, 8) * 8])
    assert isinstance(imported.model, Model_1_3) and imported.version == 13  # HARD_SWISH is 1.3


@pytest.mark.parametrize("align,half", [(False, False), (True, False), (False, True)])
def test_resize_bilinear_and_nearest(align, half):
    m = TFLModel()
    x = m.tensor("x", [1, 3, 4, 2])
    size = m.const("size", np.array([7, 5], np.int32), INT32)
    y1, y2 = m.tensor("bl", [1, 7, 5, 2]), m.tensor("nn", [1, 7, 5, 2])
    m.op("RESIZE_BILINEAR", [x, size], [y1], "ResizeBilinearOptions",
         lambda b: opt(b, "ResizeBilinearOptions", AlignCorners=align, HalfPixelCenters=half))
    m.op("RESIZE_NEAREST_NEIGHBOR", [x, size], [y2], "ResizeNearestNeighborOptions",
         lambda b: opt(b, "ResizeNearestNeighborOptions", AlignCorners=align, HalfPixelCenters=half))
    imported = _check(m.build([x], [y1, y2]), [_f32(1, 3, 4, 2)])
    assert imported.version == (13 if (align or half) else 12)


def _transpose_conv_model(custom: bool) -> bytes:
    m = TFLModel()
    x, y = m.tensor("x", [1, 4, 4, 3]), m.tensor("y", [1, 8, 8, 2])
    w = m.const("w", np.random.default_rng(3).uniform(-1, 1, (2, 3, 3, 3)).astype(np.float32))
    bias = m.const("b", np.array([0.5, -1.0], np.float32))
    if custom:
        m.op("Convolution2DTransposeBias", [x, w, bias], [y], custom=True,
             custom_options=struct.pack("<3i", 1, 2, 2))
    else:
        shape = m.const("shape", np.array([1, 8, 8, 2], np.int32), INT32)
        m.op("TRANSPOSE_CONV", [shape, w, x, bias], [y], "TransposeConvOptions",
             lambda b: opt(b, "TransposeConvOptions", Padding=0, StrideW=2, StrideH=2))
    return m.build([x], [y])


def test_transpose_conv_input_order():
    imported = _check(_transpose_conv_model(False), [_f32(1, 4, 4, 3)])
    assert _ops(imported.model) == [Op.TRANSPOSE_CONV_2D]


def test_mediapipe_convolution2d_transpose_bias_matches_builtin():
    inp = [_f32(1, 4, 4, 3)]
    imported = import_tflite(_transpose_conv_model(True))
    assert _ops(imported.model) == [Op.TRANSPOSE_CONV_2D]
    assert_close(run_reference(_transpose_conv_model(False), inp), run_nngpu(imported, inp), 1e-5)


# ---- quantized -------------------------------------------------------------------------------
def test_uint8_conv_and_add():
    m = TFLModel()
    x = m.tensor("x", [1, 5, 5, 2], UINT8, scale=0.05, zero_point=128)
    w = m.const("w", RNG.integers(0, 255, (3, 3, 3, 2)), UINT8, scale=0.01, zero_point=120)
    bias = m.const("b", RNG.integers(-500, 500, 3), INT32, scale=0.05 * 0.01, zero_point=0)
    c = m.tensor("c", [1, 5, 5, 3], UINT8, scale=0.1, zero_point=100)
    y = m.tensor("y", [1, 5, 5, 3], UINT8, scale=0.15, zero_point=90)
    m.op("CONV_2D", [x, w, bias], [c], "Conv2DOptions", _conv_opts(0, 1, 1))
    m.op("ADD", [c, c], [y], "AddOptions", lambda b: opt(b, "AddOptions", FusedActivationFunction=0))
    imported = _check(m.build([x], [y]), [RNG.integers(0, 255, (1, 5, 5, 2)).astype(np.uint8)], )
    assert imported.version == 12
    assert {o.type for o in _operands(imported.model)} >= {T.TENSOR_QUANT8_ASYMM, T.TENSOR_INT32}


def test_int8_per_channel_conv_needs_1_3():
    m = TFLModel()
    x = m.tensor("x", [1, 4, 4, 2], INT8, scale=0.05, zero_point=-3)
    wscales = [0.01, 0.02, 0.015]
    w = m.const("w", RNG.integers(-127, 127, (3, 2, 2, 2)), INT8, scale=wscales, zero_point=[0, 0, 0], qdim=0)
    bias = m.const("b", RNG.integers(-300, 300, 3), INT32, scale=[0.05 * s for s in wscales],
                   zero_point=[0, 0, 0])
    y = m.tensor("y", [1, 3, 3, 3], INT8, scale=0.08, zero_point=5)
    m.op("CONV_2D", [x, w, bias], [y], "Conv2DOptions", _conv_opts(1, 1, 0))
    imported = _check(m.build([x], [y]), [RNG.integers(-128, 127, (1, 4, 4, 2)).astype(np.int8)],
                      reference_kernels=True)
    assert isinstance(imported.model, Model_1_3)
    types = {o.type for o in _operands(imported.model)}
    assert {T.TENSOR_QUANT8_ASYMM_SIGNED, T.TENSOR_QUANT8_SYMM_PER_CHANNEL} <= types


# ---- errors ----------------------------------------------------------------------------------
def _unsupported_model(code: str, custom: bool = False) -> bytes:
    m = TFLModel()
    x, h, y = m.tensor("x", [2, 2]), m.tensor("h", [2, 2]), m.tensor("y", [2, 2])
    m.op("RELU", [x], [h])
    m.op(code, [h, h], [y], custom=custom)
    return m.build([x], [y])


def test_unsupported_builtin_is_reported_by_name_and_index():
    with pytest.raises(UnsupportedOperatorError) as e:
        import_tflite(_unsupported_model("CUMSUM"))
    assert e.value.op_name == "CUMSUM" and e.value.index == 1
    assert isinstance(e.value, ImportError) and "CUMSUM" in str(e.value) and "#1" in str(e.value)


def test_unsupported_custom_op_is_reported():
    with pytest.raises(UnsupportedOperatorError, match="MyCustomOp"):
        import_tflite(_unsupported_model("MyCustomOp", custom=True))


def test_unsupported_options_are_reported():
    m = TFLModel()
    x, y = m.tensor("x", [2, 3]), m.tensor("y", [2, 3])
    b_ = m.const("b", np.array([0, 0], np.int32), INT32)
    m.op("STRIDED_SLICE", [x, b_, m.const("e", np.array([2, 3], np.int32), INT32),
                           m.const("s", np.array([1, 1], np.int32), INT32)], [y], "StridedSliceOptions",
         lambda b: opt(b, "StridedSliceOptions", EllipsisMask=1))
    with pytest.raises(UnsupportedOperatorError, match="STRIDED_SLICE.*ellipsis"):
        import_tflite(m.build([x], [y]))


def test_not_a_tflite_file():
    with pytest.raises(TFLiteFormatError):
        import_tflite(b"definitely not a flatbuffer")
    assert issubclass(TFLiteFormatError, ImportError)
    with pytest.raises(TFLiteImportError):
        import_tflite(b"\x00\x00\x00\x00TFL3" + b"\xff" * 16)


def test_dequantize_of_int8_per_channel_weights_is_folded():
    m = TFLModel()
    x, y = m.tensor("x", [1, 5, 5, 2]), m.tensor("y", [1, 5, 5, 3])
    wq = m.const("wq", RNG.integers(-127, 127, (3, 3, 3, 2)), INT8, scale=[0.01, 0.02, 0.03],
                 zero_point=[0, 0, 0], qdim=0)
    w = m.tensor("w", [3, 3, 3, 2])
    m.op("DEQUANTIZE", [wq], [w])
    m.op("CONV_2D", [x, w, m.const("b", _f32(3))], [y], "Conv2DOptions", _conv_opts(0, 1, 0))
    imported = _check(m.build([x], [y]), [_f32(1, 5, 5, 2)])
    assert imported.folded == 1 and _ops(imported.model) == [Op.CONV_2D]


def test_load_tflite_unpacks_to_model_and_names(tmp_path):
    from nngpu.tflite import load_tflite

    path = tmp_path / "m.tflite"
    path.write_bytes(_transpose_conv_model(False))
    model, input_names, output_names = load_tflite(path)
    assert isinstance(model, Model) and input_names == ["x"] and output_names == ["y"]
    with pytest.raises(TFLiteFormatError):
        load_tflite(tmp_path / "missing.tflite")


# ---- one-op models for the rest of the mapping table -------------------------------------------
def _i32(m, name, v):
    return m.const(name, np.asarray(v, np.int32), INT32)


def _one_op(code, in_shapes, out_shapes, consts=(), options_type=None, options=None, out_types=None):
    """inputs: float32 model inputs of in_shapes, then `consts` (callables m -> tensor index)."""
    m = TFLModel()
    ins = [m.tensor(f"x{k}", s) for k, s in enumerate(in_shapes)]
    extra = [c(m) for c in consts]
    outs = [m.tensor(f"y{k}", s, (out_types or [FLOAT32] * len(out_shapes))[k]) for k, s in enumerate(out_shapes)]
    m.op(code, ins + extra if code not in ("SPLIT",) else extra + ins, outs, options_type, options)
    return m.build(ins, outs), [_f32(*s) * 2 for s in in_shapes]


ONE_OP_CASES = {
    "SUB": lambda: _one_op("SUB", [[2, 3], [1, 3]], [[2, 3]], (), "SubOptions",
                           lambda b: opt(b, "SubOptions", FusedActivationFunction=3)),
    "DIV": lambda: _one_op("DIV", [[2, 3], [2, 3]], [[2, 3]], (), "DivOptions",
                           lambda b: opt(b, "DivOptions", FusedActivationFunction=0)),
    "MAXIMUM": lambda: _one_op("MAXIMUM", [[2, 3], [2, 3]], [[2, 3]]),
    "SQUARED_DIFFERENCE": lambda: _one_op("SQUARED_DIFFERENCE", [[2, 3], [2, 3]], [[2, 3]]),
    "EXP": lambda: _one_op("EXP", [[2, 3]], [[2, 3]]),
    "TANH": lambda: _one_op("TANH", [[2, 3]], [[2, 3]]),
    "LEAKY_RELU": lambda: _one_op("LEAKY_RELU", [[2, 3]], [[2, 3]], (), "LeakyReluOptions",
                                  lambda b: opt(b, "LeakyReluOptions", Alpha=0.2)),
    "LOG_SOFTMAX": lambda: _one_op("LOG_SOFTMAX", [[2, 5]], [[2, 5]]),
    "L2_NORMALIZATION": lambda: _one_op("L2_NORMALIZATION", [[2, 5]], [[2, 5]]),
    "SLICE": lambda: _one_op("SLICE", [[3, 4]], [[2, 2]],
                             (lambda m: _i32(m, "b", [1, 1]), lambda m: _i32(m, "s", [2, 2]))),
    "TILE": lambda: _one_op("TILE", [[2, 3]], [[4, 3]], (lambda m: _i32(m, "mul", [2, 1]),)),
    "SQUEEZE": lambda: _one_op("SQUEEZE", [[1, 3, 1, 2]], [[3, 2]]),
    "EXPAND_DIMS": lambda: _one_op("EXPAND_DIMS", [[3, 2]], [[3, 1, 2]], (lambda m: _i32(m, "axis", [1]),)),
    "GATHER": lambda: _one_op("GATHER", [[4, 3]], [[2, 3]], (lambda m: _i32(m, "idx", [3, 1]),), "GatherOptions",
                              lambda b: opt(b, "GatherOptions", Axis=0)),
    "SPLIT": lambda: _one_op("SPLIT", [[2, 6]], [[2, 3], [2, 3]], (lambda m: _i32(m, "axis", [1]),), "SplitOptions",
                             lambda b: opt(b, "SplitOptions", NumSplits=2)),
    "PACK": lambda: _one_op("PACK", [[2, 3], [2, 3]], [[2, 2, 3]], (), "PackOptions",
                            lambda b: opt(b, "PackOptions", ValuesCount=2, Axis=1)),
    "UNPACK": lambda: _one_op("UNPACK", [[2, 3]], [[2], [2], [2]], (), "UnpackOptions",
                              lambda b: opt(b, "UnpackOptions", Num=3, Axis=1)),
    "SUM": lambda: _one_op("SUM", [[2, 3, 4]], [[2, 4]], (lambda m: _i32(m, "ax", [-2]),), "ReducerOptions",
                           lambda b: opt(b, "ReducerOptions", KeepDims=False)),
    "REDUCE_MAX": lambda: _one_op("REDUCE_MAX", [[2, 3, 4]], [[1, 3, 1]], (lambda m: _i32(m, "ax", [0, 2]),),
                                  "ReducerOptions", lambda b: opt(b, "ReducerOptions", KeepDims=True)),
    "ARG_MAX": lambda: _one_op("ARG_MAX", [[2, 5]], [[2]], (lambda m: _i32(m, "ax", [1]),), "ArgMaxOptions",
                               lambda b: opt(b, "ArgMaxOptions", OutputType=INT32), out_types=[INT32]),
    "SPACE_TO_DEPTH": lambda: _one_op("SPACE_TO_DEPTH", [[1, 4, 4, 2]], [[1, 2, 2, 8]], (), "SpaceToDepthOptions",
                                      lambda b: opt(b, "SpaceToDepthOptions", BlockSize=2)),
    "SPACE_TO_BATCH_ND": lambda: _one_op("SPACE_TO_BATCH_ND", [[1, 4, 4, 1]], [[4, 2, 2, 1]],
                                         (lambda m: _i32(m, "bs", [2, 2]), lambda m: _i32(m, "p", [[0, 0], [0, 0]]))),
    "BATCH_TO_SPACE_ND": lambda: _one_op("BATCH_TO_SPACE_ND", [[4, 2, 2, 1]], [[1, 4, 4, 1]],
                                         (lambda m: _i32(m, "bs", [2, 2]), lambda m: _i32(m, "c", [[0, 0], [0, 0]]))),
    "PADV2": lambda: _one_op("PADV2", [[1, 2, 2, 1]], [[1, 4, 3, 1]],
                             (lambda m: _i32(m, "p", [[0, 0], [1, 1], [0, 1], [0, 0]]),
                              lambda m: m.const("v", np.array([-7.0], np.float32)))),
    "FULLY_CONNECTED": lambda: _one_op("FULLY_CONNECTED", [[3, 4]], [[3, 2]],
                                       (lambda m: m.const("w", _f32(2, 4)), lambda m: m.const("b", _f32(2))),
                                       "FullyConnectedOptions",
                                       lambda b: opt(b, "FullyConnectedOptions", FusedActivationFunction=2)),
    "LOCAL_RESPONSE_NORMALIZATION": lambda: _one_op(
        "LOCAL_RESPONSE_NORMALIZATION", [[1, 2, 2, 6]], [[1, 2, 2, 6]], (), "LocalResponseNormalizationOptions",
        lambda b: opt(b, "LocalResponseNormalizationOptions", Radius=2, Bias=1.0, Alpha=0.5, Beta=0.75)),
    "L2_POOL_2D": lambda: _one_op("L2_POOL_2D", [[1, 4, 4, 2]], [[1, 2, 2, 2]], (), "Pool2DOptions",
                                  lambda b: opt(b, "Pool2DOptions", Padding=1, StrideW=2, StrideH=2,
                                                FilterWidth=2, FilterHeight=2)),
}


@pytest.mark.parametrize("code", sorted(ONE_OP_CASES))
def test_one_op_mapping_matches_reference(code):
    data, inputs = ONE_OP_CASES[code]()
    imported = _check(data, inputs, rel=1e-5)
    assert not imported.warnings


@pytest.mark.parametrize("qtype", [UINT8, INT8])
def test_quantized_chain(qtype):
    """depthwise -> concat (different scales) -> avg pool -> reshape -> FC -> logistic / softmax."""
    lo, zp = (0, 128) if qtype == UINT8 else (-128, 0)
    q = lambda name, shape, scale, z: m.tensor(name, shape, qtype, scale=scale, zero_point=z)  # noqa: E731
    m = TFLModel()
    x = q("x", [1, 6, 6, 2], 0.04, zp)
    wd = m.const("wd", RNG.integers(lo, lo + 255, (1, 3, 3, 4)), qtype, scale=0.02, zero_point=zp)
    bd = m.const("bd", RNG.integers(-200, 200, 4), INT32, scale=0.04 * 0.02)
    # int8 CONCATENATION needs one scale for all inputs and the output; uint8 requantizes.
    d = q("d", [1, 6, 6, 4], 0.1, zp + 3) if qtype == UINT8 else q("d", [1, 6, 6, 4], 0.04, zp)
    cs, cz = (0.12, zp - 2) if qtype == UINT8 else (0.04, zp)
    cat = q("cat", [1, 6, 6, 6], cs, cz)
    ap = q("ap", [1, 3, 3, 6], cs, cz)
    flat = q("flat", [1, 54], cs, cz)
    wf = m.const("wf", RNG.integers(lo, lo + 255, (5, 54)), qtype, scale=0.01, zero_point=zp)
    bf = m.const("bf", RNG.integers(-500, 500, 5), INT32, scale=cs * 0.01)
    fc = q("fc", [1, 5], 0.02, zp)
    y1 = q("sig", [1, 5], 1 / 256, lo)
    y2 = q("smax", [1, 5], 1 / 256, lo)
    m.op("DEPTHWISE_CONV_2D", [x, wd, bd], [d], "DepthwiseConv2DOptions",
         lambda b: opt(b, "DepthwiseConv2DOptions", Padding=0, StrideW=1, StrideH=1, DepthMultiplier=2,
                       FusedActivationFunction=1, DilationWFactor=1, DilationHFactor=1))
    m.op("CONCATENATION", [d, x], [cat], "ConcatenationOptions", lambda b: opt(b, "ConcatenationOptions", Axis=3))
    m.op("AVERAGE_POOL_2D", [cat], [ap], "Pool2DOptions",
         lambda b: opt(b, "Pool2DOptions", Padding=1, StrideW=2, StrideH=2, FilterWidth=2, FilterHeight=2))
    m.op("RESHAPE", [ap, _i32(m, "shape", [1, 54])], [flat])
    m.op("FULLY_CONNECTED", [flat, wf, bf], [fc], "FullyConnectedOptions",
         lambda b: opt(b, "FullyConnectedOptions", FusedActivationFunction=0))
    m.op("LOGISTIC", [fc], [y1])
    m.op("SOFTMAX", [fc], [y2], "SoftmaxOptions", lambda b: opt(b, "SoftmaxOptions", Beta=1.0))
    dtype = np.uint8 if qtype == UINT8 else np.int8
    inp = [RNG.integers(lo, lo + 256, (1, 6, 6, 2)).astype(dtype)]
    data = m.build([x], [d, cat, ap, fc, y1, y2])
    imported = _check(data, inp)  # bit-exact with TFLite's builtin kernels
    assert imported.version == (12 if qtype == UINT8 else 13)
