"""The hand-written OpenCL kernels read and write a relaxed model's float16 temporaries
(kernels/vectors.h VLOAD_AS, compiler/library.py ELEMENT_TYPES): the direct convolution of a
stem, the depthwise convolution (with a sibling max pool folded in), the max pool, the bilinear
resize and im2col take float16 inputs and outputs where a target stores temporaries so (forced
here on the CPU device's target; the GPU's stores them so itself), and a GPU's tiled GEMM reads
float16 A, B and scale and stores a float16 C (kernels/gemm.cl AB_T, SCALE_T, C_T). Each widens
what it reads and computes float32, the bits it computes from the same values stored float32,
and rounds what it stores to nearest even; kernels fold into them as for float32; a chain of them
matches float32 within float16's precision; a template buffer with no type of its own refuses
float16."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from nngpu.backends import create, device_backends
from nngpu.backends.opencl import CPU_TARGET, TARGET as GPU_TARGET
from nngpu.compiler.library import element_types
from nngpu.compiler.lower import device_plan, lower_model
from nngpu.compiler.steps import GemmStep, TemplateStep
from nngpu.hal import OperationType as Op
from nngpu.runtime.interpreter import GraphRunner

from .model_builder import ModelBuilder, T

pytestmark = pytest.mark.skipif("opencl" not in device_backends(), reason="no OpenCL device here")
HALF_CPU = dataclasses.replace(CPU_TARGET, relaxed_storage=True)
SAME = 1
EXACT = ("depthwise-out", "max_pool-then")   # what these store is float32


def _stem_to_head(relaxed: bool):
    """x [1, 16, 16, 3] -> a 3x3 convolution to 16 channels (RELU) -> t1; a 3x3 depthwise
    convolution at stride 2 of t1 and a 2x2 max pool of it -> ADD -> a bilinear resize to 16 x 16
    -> a 3x3 depthwise convolution (RELU6): the output."""
    rng = np.random.default_rng(7)
    b = ModelBuilder()
    ints = {v: b.constant(T.INT32, v) for v in (0, 1, 2, 3, 6, 16)}

    def weights(*shape):
        return b.constant(T.TENSOR_FLOAT32, (rng.standard_normal(shape) * 0.4).astype(np.float32))

    def depthwise(x, stride, act, side):
        return b.op(Op.DEPTHWISE_CONV_2D, [x, weights(1, 3, 3, 16), weights(16), ints[SAME], ints[stride],
                                           ints[stride], ints[1], ints[act]], T.TENSOR_FLOAT32, [1, side, side, 16])

    x = b.input(T.TENSOR_FLOAT32, [1, 16, 16, 3])
    t1 = b.op(Op.CONV_2D, [x, weights(16, 3, 3, 3), weights(16), ints[SAME], ints[1], ints[1], ints[1]],
              T.TENSOR_FLOAT32, [1, 16, 16, 16])
    t2 = depthwise(t1, 2, 0, 8)
    t3 = b.op(Op.MAX_POOL_2D, [t1, ints[2], ints[2], ints[2], ints[2], ints[2], ints[0]], T.TENSOR_FLOAT32,
              [1, 8, 8, 16])
    t4 = b.op(Op.ADD, [t2, t3, ints[0]], T.TENSOR_FLOAT32, [1, 8, 8, 16])
    t5 = b.op(Op.RESIZE_BILINEAR, [t4, ints[16], ints[16]], T.TENSOR_FLOAT32, [1, 16, 16, 16])
    b.output(depthwise(t5, 1, 3, 16))
    model = b.build()
    model.relaxComputationFloat32toFloat16 = relaxed
    return model, rng.standard_normal((1, 16, 16, 3)).astype(np.float32) * 4


def test_the_templates_take_float16_temporaries():
    spec = lower_model(GraphRunner(_stem_to_head(relaxed=True)[0]), HALF_CPU)
    templates = {s.kind: s for s in spec.steps if isinstance(s, TemplateStep)}
    assert set(templates) == {"conv", "depthwise", "max_pool", "resize_bilinear"}
    assert templates["conv"].defines["OUT_T"] == "half" and templates["conv"].defines["X_T"] == "float"
    # the strided depthwise convolution stores the ADD of its output and the pool's, folded in (THEN)
    strided = next(s for s in spec.steps
                   if isinstance(s, TemplateStep) and s.kind == "depthwise" and s.defines["SH"] == 2)
    assert "#define THEN\n" in strided.source
    assert (strided.defines["X_T"], strided.defines["OUT_T"]) == ("half",) * 2
    assert all(spec.tensors[t].storage == "half" for t in strided.args[:1] + strided.args[-2:])   # x, the pool's, out
    assert (templates["resize_bilinear"].defines["X_T"], templates["resize_bilinear"].defines["OUT_T"]) == ("half",) * 2
    last = [s for s in spec.steps if isinstance(s, TemplateStep)][-1]
    assert (last.kind, last.defines["X_T"], last.defines["OUT_T"]) == ("depthwise", "half", "float")
    float_spec = lower_model(GraphRunner(_stem_to_head(relaxed=False)[0]), HALF_CPU)
    assert {s.defines.get("OUT_T") for s in float_spec.steps if isinstance(s, TemplateStep)} == {"float"}
    assert len(float_spec.steps) == len(spec.steps)   # float16 storage folds what float32 does


def test_a_chain_of_them_matches_float32_within_float16():
    backend = create("opencl")
    got = {}
    for relaxed, target in ((True, HALF_CPU), (False, CPU_TARGET)):
        model, x = _stem_to_head(relaxed)
        backend.target = target
        got[relaxed] = np.asarray(device_plan(GraphRunner(model), backend).execute([x])[0])
    assert not np.array_equal(got[True], got[False])   # float16 storage rounds
    np.testing.assert_allclose(got[True], got[False], rtol=1e-2, atol=1e-2 * float(np.abs(got[False]).max()))


def _around(kind: str, relaxed: bool):
    """One template's use between float16 temporaries: x (float16 values) -> ADD 0 -> t, a
    temporary holding x exactly; the operation(s) of `kind` on t (the stem's convolution on x
    itself) -> each result read by two ADD 0 -> two outputs, so the results are temporaries the
    template stores. With "depthwise-out" the convolution's result is the output (float32); with
    "max_pool-then" one ADD 0 reads it, folded into the template (THEN), which stores its float32
    output; with "depthwise-then" one ADD 0 reads it too, folded, its result a temporary as above."""
    rng = np.random.default_rng(len(kind))
    b = ModelBuilder()
    ints = {v: b.constant(T.INT32, v) for v in (0, 1, 2, 3, 12)}
    c = 4 if kind == "conv" else 16   # a stem's few channels
    x = b.input(T.TENSOR_FLOAT32, [1, 9, 9, c])
    t = b.op(Op.ADD, [x, b.constant(T.TENSOR_FLOAT32, np.zeros(1, np.float32)), ints[0]], T.TENSOR_FLOAT32,
             [1, 9, 9, c])

    def weights(*shape):
        return b.constant(T.TENSOR_FLOAT32, (rng.standard_normal(shape) * 0.4).astype(np.float32))

    def depthwise(stride, side):
        return b.op(Op.DEPTHWISE_CONV_2D, [t, weights(1, 3, 3, 16), weights(16), ints[SAME], ints[stride],
                                           ints[stride], ints[1], ints[1]], T.TENSOR_FLOAT32, [1, side, side, 16])

    def max_pool():
        return b.op(Op.MAX_POOL_2D, [t, ints[SAME], ints[2], ints[2], ints[2], ints[2], ints[0]], T.TENSOR_FLOAT32,
                    [1, 5, 5, 16])

    results = {
        "conv": lambda: [b.op(Op.CONV_2D, [x, weights(8, 3, 3, c),
                                           weights(8), ints[SAME], ints[1], ints[1], ints[0]],
                              T.TENSOR_FLOAT32, [1, 9, 9, 8])],
        "depthwise+pool": lambda: [depthwise(2, 5), max_pool()],
        "max_pool": lambda: [max_pool()],
        "resize_bilinear": lambda: [b.op(Op.RESIZE_BILINEAR, [t, ints[12], ints[12]], T.TENSOR_FLOAT32,
                                         [1, 12, 12, 16])],
        "depthwise-out": lambda: [depthwise(1, 9)],
        "max_pool-then": lambda: [max_pool()],
        "depthwise-then": lambda: [depthwise(1, 9)],
    }[kind]()
    for r in results:
        if kind == "depthwise-out":
            b.output(r)
            continue
        if kind == "depthwise-then":
            r = b.op(Op.ADD, [r, b.constant(T.TENSOR_FLOAT32, np.zeros(1, np.float32)), ints[0]], T.TENSOR_FLOAT32,
                     b.operands[r].dimensions)
        for _ in range(1 if kind == "max_pool-then" else 2):
            b.output(b.op(Op.ADD, [r, b.constant(T.TENSOR_FLOAT32, np.zeros(1, np.float32)), ints[0]],
                          T.TENSOR_FLOAT32, b.operands[r].dimensions))
    model = b.build()
    model.relaxComputationFloat32toFloat16 = relaxed
    return model, (rng.standard_normal((1, 9, 9, c)) * 3).astype(np.float16).astype(np.float32)


@pytest.mark.parametrize("kind", ["conv", "depthwise+pool", "max_pool", "resize_bilinear", "depthwise-out",
                                  "max_pool-then", "depthwise-then"])
def test_each_widens_its_input_and_rounds_its_output_to_nearest_even(kind):
    """Read from float16 values (exact), a template computes what it does on float32 ones, and
    stores that rounded to float16 as numpy rounds it (to nearest even)."""
    backend = create("opencl")
    got = {}
    for relaxed, target in ((True, HALF_CPU), (False, CPU_TARGET)):
        model, x = _around(kind, relaxed)
        backend.target = target
        plan = device_plan(GraphRunner(model), backend)
        got[relaxed] = [np.asarray(o) for o in plan.execute([x])]
        steps = [s for seg in plan._last for s in seg.spec.steps if isinstance(s, TemplateStep)]
        assert len(steps) == 1, steps
        want_type = "half" if relaxed else "float"
        defines = steps[0].defines
        assert defines["X_T"] == ("float" if kind == "conv" else want_type)
        assert defines["OUT_T"] == ("float" if kind in EXACT else want_type)
        assert defines.get("POOLED_T", want_type) == want_type
        assert ("#define THEN\n" in steps[0].source) == kind.endswith("-then")
    for relaxed_out, float_out in zip(got[True], got[False]):
        want = float_out if kind in EXACT else float_out.astype(np.float16).astype(np.float32)
        np.testing.assert_array_equal(relaxed_out, want)


def _gemm_convolution(relaxed: bool, readers: int = 0):
    """x (float16 values) -> ADD 0 -> t, a temporary holding x exactly -> a 3x3 convolution of 16
    to 32 channels (a GEMM of its patch matrix; weights float16 values, RELU) -> the output; or,
    with `readers`, a temporary that so many ADD 0 read, each into an output."""
    rng = np.random.default_rng(3)
    b = ModelBuilder()
    ints = {v: b.constant(T.INT32, v) for v in (0, 1)}
    x = b.input(T.TENSOR_FLOAT32, [1, 12, 12, 16])
    t = b.op(Op.ADD, [x, b.constant(T.TENSOR_FLOAT32, np.zeros(1, np.float32)), ints[0]], T.TENSOR_FLOAT32,
             [1, 12, 12, 16])
    w = (rng.standard_normal((32, 3, 3, 16)) * 0.3).astype(np.float16).astype(np.float32)
    bias = rng.standard_normal(32).astype(np.float32)
    y = b.op(Op.CONV_2D, [t, b.constant(T.TENSOR_FLOAT32, w), b.constant(T.TENSOR_FLOAT32, bias), ints[SAME],
                          ints[1], ints[1], ints[1]], T.TENSOR_FLOAT32, [1, 12, 12, 32])
    if not readers:
        b.output(y)
    for _ in range(readers):
        b.output(b.op(Op.ADD, [y, b.constant(T.TENSOR_FLOAT32, np.zeros(1, np.float32)), ints[0]], T.TENSOR_FLOAT32,
                      [1, 12, 12, 32]))
    model = b.build()
    model.relaxComputationFloat32toFloat16 = relaxed
    return model, (rng.standard_normal((1, 12, 12, 16)) * 3).astype(np.float16).astype(np.float32)


@pytest.mark.parametrize("target", [GPU_TARGET, HALF_CPU], ids=["gpu", "cpu"])
def test_a_gemm_convolution_takes_its_float16_patch_matrix(target):
    """im2col writes the patch matrix of a float16 temporary as float16; a GPU's tiled GEMM reads it
    and the weights stored float16 as they are (AB_T half), a CPU device's GEMM a float32 copy. From
    float16 values either is the float32 plan's bits."""
    backend = create("opencl")
    got = {}
    for relaxed in (True, False):
        model, x = _gemm_convolution(relaxed)
        backend.target = target
        plan = device_plan(GraphRunner(model), backend)
        got[relaxed] = np.asarray(plan.execute([x])[0])
        steps = [s for seg in plan._last for s in seg.spec.steps]
        (im2col,) = [s for s in steps if isinstance(s, TemplateStep) and s.kind == "im2col"]
        (gemm,) = [s for s in steps if isinstance(s, GemmStep)]
        assert im2col.defines["X_T"] == im2col.defines["OUT_T"] == ("half" if relaxed else "float")
        assert gemm.half == (relaxed and target is GPU_TARGET)
    np.testing.assert_array_equal(got[True], got[False])


@pytest.mark.parametrize("target", [GPU_TARGET, HALF_CPU], ids=["gpu", "cpu"])
def test_a_gemm_convolution_stores_its_float16_output_once_on_a_gpu(target):
    """A GPU's GEMM epilogue adds the bias, clamps and stores the float16 output itself (C_T half);
    a CPU device's stores a float32 C that a kernel of its own rounds. Both store the float32
    plan's values rounded to nearest even."""
    backend = create("opencl")
    got = {}
    for relaxed in (True, False):
        model, x = _gemm_convolution(relaxed, readers=2)
        backend.target = target
        plan = device_plan(GraphRunner(model), backend)
        got[relaxed] = [np.asarray(o) for o in plan.execute([x])]
        spec = plan._last[0].spec
        (gemm,) = [s for s in spec.steps if isinstance(s, GemmStep)]
        epilogue = target is GPU_TARGET or not relaxed
        assert (gemm.bounds is not None) == epilogue
        assert spec.tensors[gemm.args[-1]].storage == ("half" if relaxed and epilogue else "float")
    for relaxed_out, float_out in zip(got[True], got[False]):
        np.testing.assert_array_equal(relaxed_out, float_out.astype(np.float16).astype(np.float32))


def test_a_buffer_without_a_type_of_its_own_refuses_float16():
    assert element_types("max_pool", ["half", "float"]) == {"X_T": "half", "OUT_T": "float"}
    assert element_types("depthwise", ["float", "float", "float", "half"]) == {"X_T": "float", "OUT_T": "half"}
    with pytest.raises(ValueError, match="depthwise"):
        element_types("depthwise", ["half", "half", "float", "float"])   # its filter
    with pytest.raises(ValueError, match="column_sum"):
        element_types("column_sum", ["half", "float"])
    assert element_types("column_sum", ["float", "float"]) == {}


def _excite_of_a_temporary(relaxed: bool):
    """x -> ADD 0 -> t (a float16 temporary where relaxed) -> MUL(t, LOGISTIC(MEAN(t))) -> a 1x1
    convolution (a GEMM reading the gated tensor: a squeeze-and-excite block's end)."""
    rng = np.random.default_rng(9)
    b = ModelBuilder()
    zero = b.constant(T.INT32, 0)
    x = b.input(T.TENSOR_FLOAT32, [1, 14, 14, 32])
    t = b.op(Op.ADD, [x, b.constant(T.TENSOR_FLOAT32, np.zeros(1, np.float32)), zero], T.TENSOR_FLOAT32,
             [1, 14, 14, 32])
    mean = b.op(Op.MEAN, [t, b.constant(T.TENSOR_INT32, [1, 2]), b.constant(T.INT32, 1)], T.TENSOR_FLOAT32,
                [1, 1, 1, 32])
    gate = b.op(Op.LOGISTIC, [mean], T.TENSOR_FLOAT32, [1, 1, 1, 32])
    gated = b.op(Op.MUL, [t, gate, zero], T.TENSOR_FLOAT32, [1, 14, 14, 32])
    w = (rng.standard_normal((48, 1, 1, 32)) * 0.3).astype(np.float32)
    b.output(b.op(Op.CONV_2D, [gated, b.constant(T.TENSOR_FLOAT32, w),
                               b.constant(T.TENSOR_FLOAT32, rng.standard_normal(48).astype(np.float32)),
                               *(b.constant(T.INT32, v) for v in (2, 1, 1, 1))], T.TENSOR_FLOAT32, [1, 14, 14, 48]))
    model = b.build()
    model.relaxComputationFloat32toFloat16 = relaxed
    return model, rng.standard_normal((1, 14, 14, 32)).astype(np.float32)


def test_a_gpus_gemm_scales_float16_columns_by_a_float16_gate():
    """The MUL by a squeeze-and-excite gate folds into the GEMM that reads it when relaxed too: the
    GEMM reads the float16 temporary as A and the float16 gate as its scale (SCALE_T half)."""
    backend = create("opencl")
    backend.target = GPU_TARGET
    got = {}
    for relaxed in (True, False):
        model, x = _excite_of_a_temporary(relaxed)
        plan = device_plan(GraphRunner(model), backend)
        got[relaxed] = np.asarray(plan.execute([x])[0])
        spec = plan._last[0].spec
        (gemm,) = [s for s in spec.steps if isinstance(s, GemmStep)]
        assert gemm.scale_a and gemm.half == relaxed
        assert [spec.tensors[t].storage for t in (gemm.args[0], gemm.args[-2])] == ["half" if relaxed else "float"] * 2
    assert not np.array_equal(got[True], got[False])
    np.testing.assert_allclose(got[True], got[False], rtol=5e-3, atol=5e-3 * float(np.abs(got[False]).max()))
