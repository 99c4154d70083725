"""The host harness itself: the CUDA float16 conversions bit for bit, the grid's edges, the
cached-binary path, shared memory and block barriers, and the refusal of kernels it cannot run. Like every test here, this checks
the CUDA rendering on the CPU, not the CuPy glue."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

from nngpu import backends
from nngpu.backends import device_backends
from nngpu.backends.cuda import BLOCK, TARGET as CUDA
from nngpu.hal import OperandType as T
from nngpu.hal.types import OperationType as Op
from nngpu.ir.schedule import Grid
from nngpu.testing import output, scalar, single_op_model, tensor

from .host_backend import HostCudaBackend, HostUnsupported
from .run import run_on_host_cuda
from .summary import summary_lines

pytestmark = pytest.mark.skipif(not shutil.which("g++"), reason="no g++ on this machine")


def _cast(values: np.ndarray, to: T) -> np.ndarray:
    src = T.TENSOR_FLOAT16 if values.dtype == np.float16 else T.TENSOR_FLOAT32
    model = single_op_model(Op.CAST, [tensor(src, values)], [output(to, list(values.shape))])
    run = run_on_host_cuda(model, [values])
    assert run.backend.launches == 1, "CAST should run as one CUDA kernel"
    return run.outputs[0]


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(np.uint16 if a.dtype == np.float16 else np.uint32)


def test_cuda_half_loads_match_numpy_for_every_float16_on_host():
    halves = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(np.float16)
    got = _cast(halves, T.TENSOR_FLOAT32)
    want = halves.astype(np.float32)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    assert np.array_equal(_bits(got)[~nan], _bits(want)[~nan])


def test_cuda_half_stores_round_like_numpy_on_host():
    """Every float16 value, the midpoints between neighbours (ties to even), one float32 step
    either side of them, and overflow, subnormal and underflow cases."""
    finite = np.arange(0x7c00, dtype=np.uint16).view(np.float16).astype(np.float32)
    mids = (finite[:-1].astype(np.float64) + finite[1:]) / 2
    mids32 = mids.astype(np.float32)
    edges = np.array([65504, 65519.99, 65520, 1e6, np.inf, 2.0**-25, 2.0**-26, 1e-30, 0.0], dtype=np.float32)
    pos = np.concatenate([finite, mids32, np.nextafter(mids32, np.float32(0)), np.nextafter(mids32, np.float32(1e9)),
                          edges])
    values = np.concatenate([pos, -pos, np.float32([np.nan])])
    got = _cast(values, T.TENSOR_FLOAT16)
    with np.errstate(over="ignore"):
        want = values.astype(np.float16)
    nan = np.isnan(want)
    assert np.array_equal(np.isnan(got), nan)
    np.testing.assert_array_equal(_bits(got)[~nan], _bits(want)[~nan])


@pytest.mark.parametrize("size", [1, BLOCK - 1, BLOCK, BLOCK + 1, 70001])
def test_cuda_grid_covers_every_element_on_host(size):
    a = np.arange(size, dtype=np.float32)
    b = np.full(size, 0.5, np.float32)
    model = single_op_model(Op.ADD, [tensor(T.TENSOR_FLOAT32, a), tensor(T.TENSOR_FLOAT32, b), scalar(T.INT32, 0)],
                            [output(T.TENSOR_FLOAT32, [size])])
    run = run_on_host_cuda(model, [a, b])
    assert run.backend.launches == 1
    np.testing.assert_array_equal(run.outputs[0], a + b)  # buffers start as NaN: a missed element shows


SOURCE = '''extern "C" __global__ void nn_twice(const float* __restrict__ in0, float* __restrict__ out) {
    long long i = (blockIdx.x * (long long)blockDim.x + threadIdx.x);
    if (i >= 300) return;
    out[i] = (in0[i] * 2.0f);
}
'''


def test_a_cached_binary_loads_and_runs_on_a_fresh_backend():
    binary, _ = HostCudaBackend().build(SOURCE)
    backend = HostCudaBackend()
    kernel = backend.kernel(backend.load(binary), "nn_twice")
    x = np.arange(300, dtype=np.float32)
    src, dst = backend.alloc(x.nbytes), backend.alloc(x.nbytes)
    backend.upload(src, x)
    backend.launch(kernel, CUDA.schedule.grid(300), [src, dst])
    got = np.empty_like(x)
    backend.download(dst, got)
    np.testing.assert_array_equal(got, 2 * x)


@pytest.mark.parametrize("feature,word", [("atomicAdd(out, 1.0f);", "atomic"),
                                          ("extern __shared__ float dynamic[];", "extern __shared__")])
def test_kernels_the_harness_cannot_run_are_refused_with_the_reason(feature, word):
    source = SOURCE.replace("    if (i >= 300)", f"    {feature}\n    if (i >= 300)")
    backend = HostCudaBackend()
    with pytest.raises(HostUnsupported, match=f"uses {word} ") as refusal:
        backend.compile(source, ["nn_twice"])
    assert backend.refused == {source.rstrip("\n"): str(refusal.value)}  # counted as skipped, with why


# A block's sum in shared memory, by halving: every thread meets the others at each step, and the
# threads past the data return first (a GPU counts them as arrived, and so does the harness).
BLOCK_SUM = {"cuda": '''extern "C" __global__ void nn_block_sum(const float* __restrict__ in0, float* __restrict__ out) {
    __shared__ float part[64];
    int t = threadIdx.x, i = blockIdx.x * 64 + t;
    part[t] = i < SIZE ? in0[i] : 0.0f;
    __syncthreads();
    if (i >= SIZE) return;
    for (int step = 32; step > 0; step >>= 1) {
        if (t < step) part[t] += part[t + step];
        __syncthreads();
    }
    if (t == 0) out[blockIdx.x] = part[0];
}
''', "opencl": '''__kernel void nn_block_sum(__global const float* restrict in0, __global float* restrict out) {
    __local float part[64];
    int t = get_local_id(0), i = get_group_id(0) * 64 + t;
    part[t] = i < SIZE ? in0[i] : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int step = 32; step > 0; step >>= 1) {
        if (t < step) part[t] += part[t + step];
        barrier(CLK_LOCAL_MEM_FENCE);
    }
    if (t == 0) out[get_group_id(0)] = part[0];
}
'''}


def _block_sums(x: np.ndarray) -> np.ndarray:
    """The same halving order in float32, per block of 64."""
    part = np.zeros((-(-x.size // 64), 64), np.float32)
    part.reshape(-1)[: x.size] = x
    half = 32
    while half:
        part[:, :half] += part[:, half: 2 * half]
        half //= 2
    return part[:, 0]


@pytest.mark.parametrize("dialect", ["cuda", "cuda-ucontext", "opencl"])
def test_shared_memory_and_barriers_run_a_block_together(dialect):
    """The same reduction in both dialects: the host harness runs a block's threads together for
    __shared__ and __syncthreads (threads past the data leaving early), its fibers switched by
    nnh_switch on x86-64 or by ucontext (NNH_UCONTEXT, the other machines' way); PoCL runs
    __local memory and barrier() as they are."""
    size = 1000   # 16 blocks, the last one ragged
    x = np.random.default_rng(7).standard_normal(size).astype(np.float32)
    source = f"#define SIZE {size}\n" + BLOCK_SUM[dialect.split("-")[0]]
    if dialect.startswith("cuda"):
        backend = HostCudaBackend(("NNH_UCONTEXT",) if dialect == "cuda-ucontext" else ())
    elif "opencl" in device_backends():
        backend = backends.create("opencl")
    else:
        pytest.skip("no OpenCL device here")
    kernel = backend.compile(source, ["nn_block_sum"])[0]
    blocks = -(-size // 64)
    src, dst = backend.alloc(x.nbytes), backend.alloc(blocks * 4)
    backend.upload(src, x)
    backend.bind(kernel, Grid((blocks * 64,), (64,)), [src, dst])()
    backend.synchronize()
    got = np.empty(blocks, np.float32)
    backend.download(dst, got)
    np.testing.assert_array_equal(got, _block_sums(x))


def test_the_summary_counts_distinct_kernels_and_never_a_mismatch_as_matched():
    m = "tests/cuda_host/test_x.py"
    records = [(m, {"kernels": ["a", "b"], "verdict": "matched", "reason": "", "idle": ["z"]}),
               (m, {"kernels": ["b", "c"], "verdict": "mismatched", "reason": "", "idle": []}),
               (m, {"kernels": ["d"], "verdict": "skipped", "reason": "uses __shared__", "idle": []})]
    assert summary_lines(records) == [
        f"{m}: distinct CUDA kernels run 3, matched 1, in mismatching runs 2, skipped 1, "
        "never launched (0 elements, as on CUDA) 1 (tests: 1 matched, 1 mismatched, 1 skipped)",
        "    skipped: 1 x uses __shared__"]
