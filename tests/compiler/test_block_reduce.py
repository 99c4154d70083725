"""A slice's statistic on a GPU target takes a work-group (CUDA: block) per output: its threads
fold strided parts of the slice, then combine them as a tree in local (shared) memory behind
barriers (ir/schedule.py block_reduce). The CUDA kernels run on the host harness, whose blocks'
threads now run together; the OpenCL GPU target's run on PoCL. Both against the reference:
float within the corpus' tolerance, quantized bit for bit. A CPU target keeps one work-item a
slice."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from nngpu import backends
from nngpu.backends.cuda import TARGET as CUDA
from nngpu.backends.opencl import CPU_TARGET, TARGET as OPENCL_GPU
from nngpu.compiler.lower import device_plan, lower_model
from nngpu.hal import OperandType as T, OperationType as Op
from nngpu.modelutil import as_model_1_3
from nngpu.runtime.interpreter import GraphRunner
from nngpu.testing import output, scalar, single_op_model, tensor

from ..cuda_host.host_backend import HostCudaBackend
from ..cuda_host.run import kernel_ids, record

rng = np.random.default_rng(11)


def _softmax(shape, beta=1.0):
    x = (rng.standard_normal(shape) * 4).astype(np.float32)
    return single_op_model(Op.SOFTMAX, [tensor(T.TENSOR_FLOAT32, x), scalar(T.FLOAT32, beta)],
                           [output(T.TENSOR_FLOAT32, list(shape))]), [x]


def _log_softmax(shape, axis):
    x = (rng.standard_normal(shape) * 4).astype(np.float32)
    return single_op_model(Op.LOG_SOFTMAX, [tensor(T.TENSOR_FLOAT32, x), scalar(T.FLOAT32, 1.0), scalar(T.INT32, axis)],
                           [output(T.TENSOR_FLOAT32, list(shape))]), [x]


def _softmax_u8(shape):
    x = rng.integers(0, 256, shape).astype(np.uint8)
    return single_op_model(Op.SOFTMAX, [tensor(T.TENSOR_QUANT8_ASYMM, x, 0.1, 128), scalar(T.FLOAT32, 1.0)],
                           [output(T.TENSOR_QUANT8_ASYMM, list(shape), 1 / 256, 0)]), [x]


def _reduce(op, shape, axes, nan=False, inf=False):
    x = rng.standard_normal(shape).astype(np.float32)
    if nan:
        x.reshape(-1)[rng.integers(0, x.size, 3)] = np.nan
    if inf:  # slices holding inf, -inf and both: inf, -inf and NaN (a compensation would make NaN of all)
        x[0, 0], x[1, 5], x[2, 0], x[2, 600] = np.inf, -np.inf, np.inf, -np.inf
    out = [d for k, d in enumerate(shape) if k not in axes]
    axes_v = tensor(T.TENSOR_INT32, np.array(axes, np.int32), const=True)
    return single_op_model(op, [tensor(T.TENSOR_FLOAT32, x), axes_v, scalar(T.BOOL, False)],
                           [output(T.TENSOR_FLOAT32, out)]), [x]


def _mean(shape, axes):
    x = rng.standard_normal(shape).astype(np.float32) + 3
    out = [d for k, d in enumerate(shape) if k not in axes]
    return single_op_model(Op.MEAN, [tensor(T.TENSOR_FLOAT32, x), tensor(T.TENSOR_INT32, np.array(axes, np.int32),
                                                                         const=True), scalar(T.INT32, 0)],
                           [output(T.TENSOR_FLOAT32, out)]), [x]


def _instance_norm(shape):
    x = (rng.standard_normal(shape) * 3 + 1).astype(np.float32)
    ins = [tensor(T.TENSOR_FLOAT32, x), scalar(T.FLOAT32, 1.5), scalar(T.FLOAT32, 0.25), scalar(T.FLOAT32, 1e-3),
           scalar(T.BOOL, False)]
    return single_op_model(Op.INSTANCE_NORMALIZATION, ins, [output(T.TENSOR_FLOAT32, list(shape))]), [x]


CASES = {
    "softmax-1000": lambda: _softmax((2, 1000)),
    "softmax-ragged-3001": lambda: _softmax((1, 3001), beta=0.5),
    "softmax-u8-1000": lambda: _softmax_u8((3, 1000)),
    "log-softmax-axis-0": lambda: _log_softmax((2000, 3), 0),
    "reduce-max-nan": lambda: _reduce(Op.REDUCE_MAX, (3, 700), [1], nan=True),
    "reduce-sum-2-axes": lambda: _reduce(Op.REDUCE_SUM, (300, 2, 5), [0, 2]),
    "reduce-sum-inf": lambda: _reduce(Op.REDUCE_SUM, (3, 700), [1], inf=True),
    "mean-4096": lambda: _mean((2, 4096), [1]),
    # axes shorter than the group, 1,600 iterations together: one flattened range
    "reduce-sum-hw": lambda: _reduce(Op.REDUCE_SUM, (2, 40, 40, 3), [1, 2]),
    "instance-norm-40x40": lambda: _instance_norm((1, 40, 40, 8)),
}


def _check(got, want, model):
    """Float: within float32 summation error of thousands of terms (the reference's numpy sums
    pairwise, the kernels compensated, so either may be the closer); quantized: exact."""
    for g, w in zip(got, want):
        if np.issubdtype(w.dtype, np.floating):
            np.testing.assert_allclose(g, w, rtol=2e-5, atol=5e-5)
        else:
            np.testing.assert_array_equal(g, w)


def _run(backend, model, inputs):
    plan = device_plan(GraphRunner(model), backend)
    with np.errstate(all="ignore"):
        got = [np.asarray(o) for o in plan.execute(list(inputs))]
        want = [np.asarray(o) for o in plan.reference.run(list(inputs))]
    return got, want, plan


def _shared(plan) -> int:
    """Kernels of the plan that took a work-group per output."""
    return sum(s.target.schedule.block_reduce(s.kernel) is not None for seg in plan._last for s in seg.spec.kernels)


@pytest.mark.parametrize("name", CASES)
def test_gpu_targets_give_each_statistic_a_work_group(name):
    model, _ = CASES[name]()
    runner = GraphRunner(as_model_1_3(model))
    for target, marker in ((CUDA, "__syncthreads();"), (OPENCL_GPU, "barrier(CLK_LOCAL_MEM_FENCE);")):
        spec = lower_model(runner, target)
        shared = [s for s in spec.kernels if target.schedule.block_reduce(s.kernel) is not None]
        assert shared and all(marker in s.source and s.grid.group == (256,) for s in shared)
        assert all(s.grid.total == s.kernel.size * 256 for s in shared)
    assert not any("barrier(" in s.source for s in lower_model(runner, CPU_TARGET).kernels)


def test_the_cuda_block_reductions_compile_with_nvrtc():
    pytest.importorskip("cupy", reason="CuPy + NVRTC (extra 'cuda') are not installed")
    from nngpu.backends.cuda import compile_cubin

    for name in CASES:
        spec = lower_model(GraphRunner(as_model_1_3(CASES[name]()[0])), CUDA)
        for source, names in spec.units(None):
            assert compile_cubin(source, names[0])[:4] == b"\x7fELF"


@pytest.mark.parametrize("name", CASES)
def test_on_the_host_cuda_harness(name, request):
    model, inputs = CASES[name]()
    backend = HostCudaBackend()
    got, want, plan = _run(backend, as_model_1_3(model), inputs)
    assert _shared(plan)
    try:
        _check(got, want, model)
    except AssertionError:
        record(request, kernel_ids(backend.launched), "mismatched")
        raise
    record(request, kernel_ids(backend.launched), "matched")  # counted in the harness's summary


@pytest.mark.skipif("opencl" not in backends.device_backends(), reason="no OpenCL device here")
@pytest.mark.parametrize("name", CASES)
def test_the_opencl_gpu_target_on_pocl(name):
    model, inputs = CASES[name]()
    backend = backends.create("opencl")
    backend.target = OPENCL_GPU
    got, want, plan = _run(backend, as_model_1_3(model), inputs)
    assert _shared(plan)
    _check(got, want, model)


def test_short_slices_and_select_branches_keep_a_thread_an_output():
    """A slice shorter than the group, or a reduction only some outputs compute, stays one
    thread an output (every thread of a group must reach its barriers)."""
    model, _ = _softmax((4, 100))
    spec = lower_model(GraphRunner(as_model_1_3(model)), CUDA)
    assert not any(CUDA.schedule.block_reduce(s.kernel) for s in spec.kernels)
    looped = dataclasses.replace(CUDA.schedule, reduce_group=64)
    assert any(looped.block_reduce(s.kernel) for s in spec.kernels)
