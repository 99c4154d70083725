"""A relaxed model's float32 temporaries stored as float16 (Target.relaxed_storage): which
operands, what the lowering makes of them (no template or GEMM reads float16 as float32, the
buffers are half the size), and the corpus' relaxed models with float32 temporaries passing their
relaxed tolerances so on every device backend, transfers to and from host steps included."""
from __future__ import annotations

import dataclasses
import zlib

import numpy as np
import pytest

from nngpu.backends import create, device_backends
from nngpu.backends.cuda import TARGET as CUDA
from nngpu.backends.opencl import CPU_TARGET as OPENCL_CPU, TARGET as OPENCL
from nngpu.compiler.lower import device_plan, lower_model
from nngpu.compiler.relaxed_storage import READS_BITS, float16_temporaries
from nngpu.compiler.steps import GemmStep, KernelStep, Known, TemplateStep, Transfer
from nngpu.hal import OperandType as T, OperationType as Op
from nngpu.json_models import build_model, load_cases
from nngpu.modelutil import as_model_1_3
from nngpu.runtime.interpreter import GraphRunner
from nngpu.runtime.state import ExecutionState

from ..cts.test_corpus import BUNDLED_CORPUS
from ..cuda_host.test_corpus_host import corpus_problems
from ..ops.test_shape_functions import case_inputs
from .model_builder import ModelBuilder

SAMPLE_EVERY = 20   # of the corpus' 530 relaxed cases with float32 temporaries (52 cases by default, 539 in all)


def half_temporaries(backend_name: str):
    """The device backend with its target storing relaxed temporaries as float16 (on CUDA and an
    OpenCL GPU it does anyway; forced on a CPU device, PoCL here, where `vload_half` is core too)."""
    backend = create(backend_name)
    backend.target = dataclasses.replace(backend.target, relaxed_storage=True)
    return backend


def _chain(relaxed: bool):
    """x -> ADD c -> t1 -> RESHAPE -> t2; x -> RESHAPE -> t3 (a view of the input);
    ARGMAX t1 -> an int32 temporary; out = ADD(t2, t3)."""
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, [2, 8])
    c = b.constant(T.TENSOR_FLOAT32, np.arange(8, dtype=np.float32))
    none, shape = b.constant(T.INT32, 0), b.constant(T.TENSOR_INT32, [16])
    t1 = b.op(Op.ADD, [x, c, none], T.TENSOR_FLOAT32, [2, 8])
    t2 = b.op(Op.RESHAPE, [t1, shape], T.TENSOR_FLOAT32, [16])
    t3 = b.op(Op.RESHAPE, [x, shape], T.TENSOR_FLOAT32, [16])
    index = b.op(Op.ARGMAX, [t1, none], T.TENSOR_INT32, [8])
    out = b.output(b.op(Op.ADD, [t2, t3, none], T.TENSOR_FLOAT32, [16]))
    b.output(index)
    model = b.build()
    model.relaxComputationFloat32toFloat16 = relaxed
    return model, dict(x=x, c=c, t1=t1, t2=t2, t3=t3, out=out, index=index)


def test_an_opencl_gpu_stores_them_and_a_cpu_device_keeps_float32():
    assert OPENCL.relaxed_storage and OPENCL.gemm_half_inputs   # an OpenCL GPU
    assert not (OPENCL_CPU.relaxed_storage or OPENCL_CPU.gemm_half_inputs)


def test_only_a_relaxed_models_float32_temporaries_are_float16():
    model, ids = _chain(relaxed=True)
    # t3 views the model's input, which stays float32; the int32 result and the output are no float16
    assert float16_temporaries(model.main, True, OPENCL) == {ids["t1"], ids["t2"]}
    assert float16_temporaries(model.main, False, OPENCL) == frozenset()
    assert float16_temporaries(model.main, True, OPENCL_CPU) == frozenset()   # a target that keeps float32


def _hashed_view(relaxed: bool):
    """t = x + 1/3 (a value float16 rounds), its view as [3, 2], hashed by LSH_PROJECTION; and
    t * 2 as a second output."""
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, [6])
    none = b.constant(T.INT32, 0)
    t = b.op(Op.ADD, [x, b.constant(T.TENSOR_FLOAT32, np.float32([1 / 3])), none], T.TENSOR_FLOAT32, [6])
    hashed = b.op(Op.RESHAPE, [t, b.constant(T.TENSOR_INT32, [3, 2])], T.TENSOR_FLOAT32, [3, 2])
    seeds = b.constant(T.TENSOR_FLOAT32, np.array([[0.123, 0.456], [-0.321, 0.654]], np.float32))
    b.output(b.op(Op.LSH_PROJECTION, [seeds, hashed, b.omitted(T.TENSOR_FLOAT32), b.constant(T.INT32, 1)],
                  T.TENSOR_INT32, [2]))   # SPARSE: a bucket a hash function
    b.output(b.op(Op.MUL, [t, b.constant(T.TENSOR_FLOAT32, np.float32([2])), none], T.TENSOR_FLOAT32, [6]))
    model = b.build()
    model.relaxComputationFloat32toFloat16 = relaxed
    return model


def test_what_is_hashed_as_bytes_stays_float32():
    """LSH_PROJECTION hashes the bytes of its input, a view of t: neither is float16."""
    assert Op.LSH_PROJECTION in READS_BITS
    assert float16_temporaries(_hashed_view(True).main, True, OPENCL) == frozenset()


@pytest.mark.parametrize("backend_name", device_backends())
def test_a_hash_of_a_relaxed_models_values_is_the_float32_hash(backend_name):
    backend = half_temporaries(backend_name)
    x = np.linspace(-2, 2, 6, dtype=np.float32)
    got = [np.asarray(o) for o in device_plan(GraphRunner(_hashed_view(True)), backend).execute([x])]
    want = GraphRunner(_hashed_view(False)).run([x])
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


def conv_chain(relaxed: bool, side: int = 40):
    """Three 3x3 convolutions of 32 channels on side x side (each a GEMM on OpenCL and CUDA at 40),
    a max pool and a mean over the pixels."""
    rng = np.random.default_rng(11)
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, [1, side, side, 8])
    one, relu = b.constant(T.INT32, 1), b.constant(T.INT32, 1)
    t, cin = x, 8
    for _ in range(3):
        f = b.constant(T.TENSOR_FLOAT32, rng.standard_normal((32, 3, 3, cin), dtype=np.float32) * 0.2)
        bias = b.constant(T.TENSOR_FLOAT32, rng.standard_normal(32, dtype=np.float32))
        t, cin = b.op(Op.CONV_2D, [t, f, bias, one, one, one, relu], T.TENSOR_FLOAT32, [1, side, side, 32]), 32
    two = b.constant(T.INT32, 2)
    pooled = b.op(Op.MAX_POOL_2D, [t, b.constant(T.INT32, 2), two, two, two, two, b.constant(T.INT32, 0)],
                  T.TENSOR_FLOAT32, [1, side // 2, side // 2, 32])
    b.output(b.op(Op.MEAN, [pooled, b.constant(T.TENSOR_INT32, [1, 2]), b.constant(T.INT32, 0)],
                  T.TENSOR_FLOAT32, [1, 32]))
    model = b.build()
    model.relaxComputationFloat32toFloat16 = relaxed
    return model, rng.standard_normal((1, side, side, 8), dtype=np.float32)


def test_the_lowering_stores_them_as_float16_and_reads_them_as_such():
    model, _ = conv_chain(relaxed=True)
    spec = lower_model(GraphRunner(model), OPENCL)
    half = spec.known.half
    assert len(half) == 4
    for t in half:
        assert spec.tensors[t].storage == "half"
    for step in spec.steps:   # a template reads float16 where its type #defines say so, a GEMM where `half`
        storages = [spec.tensors[t].storage for t in getattr(step, "args", []) if t in spec.tensors]
        if isinstance(step, TemplateStep):
            assert storages.count("half") == list(step.defines.values()).count("half"), step
        if isinstance(step, GemmStep):   # its epilogue stores a float16 C (the convolution's output)
            assert storages[:2] == ["half" if step.half else "float"] * 2 and set(storages[2:-1]) == {"float"}, step
            assert storages[-1] == ("half" if step.bounds is not None else "float"), step
    assert any(isinstance(s, TemplateStep) and s.kind == "max_pool" and s.defines["X_T"] == "half" for s in spec.steps)
    assert any(isinstance(s, GemmStep) for s in spec.steps)
    float_spec = lower_model(GraphRunner(conv_chain(relaxed=False)[0]), OPENCL)
    assert not float_spec.known.half
    assert all(2 * spec.tensors[t].nbytes == float_spec.tensors[t].nbytes for t in half)


def test_on_cuda_the_gemms_multiply_float16_matrices():
    """The CUDA target stores relaxed temporaries as float16 and its GEMM takes them as they are:
    each convolution's patch matrix is float16, its weights are stored so, and its epilogue
    stores the convolution's output, a float16 temporary, once (kernels/gemm.cu C_T)."""
    assert CUDA.relaxed_storage and CUDA.gemm_half_inputs and CUDA.gemm_half_output
    model, _ = conv_chain(relaxed=True)
    spec = lower_model(GraphRunner(model), CUDA)
    gemms = [s for s in spec.steps if isinstance(s, GemmStep)]
    assert len(gemms) == 3 and all(g.half and g.relaxed and g.bounds for g in gemms)
    for g in gemms:
        a, b, bias, c = (spec.tensors[t].storage for t in g.args)
        assert (a, b, bias, c) == ("half", "half", "float", "half")
        assert spec.constants[g.args[1]].dtype == np.float16
    assert not any(isinstance(s, KernelStep) and "gemm_a" in s.name for s in spec.steps)   # no float32 copies
    float_gemms = [s for s in lower_model(GraphRunner(conv_chain(relaxed=False)[0]), CUDA).steps
                   if isinstance(s, GemmStep)]
    assert len(float_gemms) == 3 and not any(g.half or g.relaxed for g in float_gemms)


@pytest.mark.parametrize("backend_name", device_backends())
def test_a_relaxed_plan_with_float16_temporaries_matches_within_float16(backend_name):
    backend = half_temporaries(backend_name)
    outputs = {}
    for relaxed in (False, True):
        model, x = conv_chain(relaxed)
        outputs[relaxed] = np.asarray(device_plan(GraphRunner(model), backend).execute([x])[0])
    want = outputs[False]
    assert not np.array_equal(outputs[True], want)   # float16 storage rounds
    np.testing.assert_allclose(outputs[True], want, rtol=5e-3, atol=5e-3 * float(np.abs(want).max()))


def _host_step_between(relaxed: bool):
    """t1 = x + c on the device; IF(cond) RELU(t1) else ABS(t1), on the host (the branch taken
    decides the outputs); out = that + c on the device: t1 goes down and the IF's result up."""
    branches = []
    for op in (Op.RELU, Op.ABS):
        g = ModelBuilder()
        a = g.input(T.TENSOR_FLOAT32, [4, 8])
        g.output(g.op(op, [a], T.TENSOR_FLOAT32, [4, 8]))
        branches.append(g.graph())
    b = ModelBuilder()
    x, cond = b.input(T.TENSOR_FLOAT32, [4, 8]), b.input(T.TENSOR_BOOL8, [1])
    c, none = b.constant(T.TENSOR_FLOAT32, np.linspace(-1, 1, 8, dtype=np.float32)), b.constant(T.INT32, 0)
    t1 = b.op(Op.ADD, [x, c, none], T.TENSOR_FLOAT32, [4, 8])
    t2 = b.op(Op.IF, [cond, b.subgraph(0), b.subgraph(1), t1], T.TENSOR_FLOAT32, [4, 8])
    b.output(b.op(Op.ADD, [t2, c, none], T.TENSOR_FLOAT32, [4, 8]))
    model = b.build(branches)
    model.relaxComputationFloat32toFloat16 = relaxed
    return model, t1, t2


@pytest.mark.parametrize("backend_name", device_backends())
@pytest.mark.parametrize("taken", [True, False])
def test_float16_temporaries_to_and_from_a_host_step(backend_name, taken):
    backend = half_temporaries(backend_name)
    x = np.random.default_rng(2).standard_normal((4, 8), dtype=np.float32) * 100
    inputs = [x, np.array([taken])]
    model, t1_id, t2_id = _host_step_between(relaxed=True)
    plan = device_plan(GraphRunner(model), backend)
    got = np.asarray(plan.execute(inputs)[0])
    c = np.linspace(-1, 1, 8, dtype=np.float32)
    t1 = (x + c).astype(np.float16).astype(np.float32)
    t2 = (np.maximum(t1, 0) if taken else np.abs(t1)).astype(np.float16).astype(np.float32)
    np.testing.assert_allclose(got, t2 + c, rtol=1e-6)
    transfers = {(s.tensor, s.to_device) for seg in plan._last for s in seg.spec.steps if isinstance(s, Transfer)}
    assert {(t1_id, False), (t2_id, True)} <= transfers   # t1 down to the IF, its result up
    assert all(seg.spec.known.half >= {t1_id, t2_id} for seg in plan._last)


def test_a_host_step_reads_a_float16_temporary_as_float32():
    model, t1, _ = _host_step_between(relaxed=True)
    state = ExecutionState(model.main, [None, None], None)
    known = Known({}, {}, half=frozenset({t1}))
    state.host[t1] = np.array([1.5, 65504], np.float16)   # as a Download leaves it
    value = state.lookup(t1, known)
    assert value.dtype == np.float32 and value.tolist() == [1.5, 65504.0]
    assert state.lookup(t1, known) is value   # widened once


def relaxed_cases_with_temporaries(full: bool, every: int = SAMPLE_EVERY) -> list:
    """The corpus' relaxed cases with a float32 temporary (one in `every`; all with --full-cts),
    and every case with an operation reading its input's bits."""
    def chosen(case) -> bool:
        ops = {o["type"] for o in case.raw["main"]["operations"]}
        if ops & {op.name for op in READS_BITS}:
            return True
        temps = any(o["lifetime"] == "TEMPORARY_VARIABLE" and o["type"] == "TENSOR_FLOAT32"
                    for o in case.raw["main"]["operands"])
        return temps and (full or zlib.crc32(case.name.encode()) % every == 0)
    return [c for c in load_cases(BUNDLED_CORPUS) if c.relaxed and not c.expect_failure and chosen(c)]


@pytest.mark.parametrize("backend_name", device_backends())
def test_the_corpus_relaxed_models_with_float16_temporaries(backend_name, request):
    backend = half_temporaries(backend_name)
    problems, with_half, moved = [], 0, 0
    cases = relaxed_cases_with_temporaries(request.config.getoption("--full-cts"))
    for case in cases:
        model = as_model_1_3(build_model(case))
        plan = device_plan(GraphRunner(model), backend)
        with np.errstate(all="ignore"):
            outputs = [np.asarray(o) for o in plan.execute(case_inputs(case, model))]
        problems += [f"{case.name}: {p}" for p in corpus_problems(case, outputs)]
        specs = [s.spec for s in plan._last]
        with_half += any(s.known.half for s in specs)
        moved += any(isinstance(step, Transfer) and step.tensor in s.known.half for s in specs for step in s.steps)
    assert not problems, "; ".join(problems)
    assert with_half >= len(cases) // 2, f"{with_half} of {len(cases)} cases stored float16 temporaries"
    assert moved, "no case moved a float16 temporary between the host and the device"
