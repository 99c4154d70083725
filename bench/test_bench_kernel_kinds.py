"""Per kernel kind on OpenCL (issue 23): the achieved GFLOP/s and GB/s of the direct and depthwise
convolution kernels, the GEMM calls and softmax, from the backend's own device times (profiling
events) over the MediaPipe models, against the device's peak measured in the same run (a
multiply-add kernel, a copy kernel).

    pytest bench/test_bench_kernel_kinds.py

The table at the end gives, per kind: device time, GFLOP/s and GB/s, and each as a fraction of
the measured peak. Bytes are what each kernel must read and write at least (inputs, weights and
outputs once), so a fraction far below 1 means recomputation or poor locality."""
from __future__ import annotations

import time

import numpy as np
import pytest

from nngpu.backends import device_backends
from nngpu.hal.types import OperationType as Op
from nngpu.named_model import load_model
from nngpu.profiling import recording
from nngpu.session import Session, random_inputs

from .common import mediapipe_model, show_summary

pytestmark = pytest.mark.skipif("opencl" not in device_backends(), reason="no OpenCL device here")

MODELS = ("face_detection_short_range", "hand_landmark_lite", "palm_detection_lite", "pose_detection",
          "selfie_segmentation")
KINDS = ("conv (direct)", "depthwise", "gemm", "softmax")
TOTALS: dict[str, list[float]] = {k: [0.0, 0.0, 0.0] for k in KINDS}   # device s, flops, bytes
PEAK: dict[str, float] = {}

# The peak: independent multiply-add chains on 16-wide vectors (a CPU device's SIMD width at most;
# PoCL does not vectorise loops inside a work-item by itself), and a float4 copy.
LANES, CHAINS, STEPS = 16, 8, 1024
_PEAK = """__kernel void nn_peak_fma(__global float *out, float a, float b) {
    float16 x0 = (float16)(get_global_id(0)), x1 = x0 + 1, x2 = x0 + 2, x3 = x0 + 3, x4 = x0 + 4, x5 = x0 + 5,
            x6 = x0 + 6, x7 = x0 + 7;
    for (int k = 0; k < 1024; ++k) {
        x0 = fma(x0, a, b); x1 = fma(x1, a, b); x2 = fma(x2, a, b); x3 = fma(x3, a, b);
        x4 = fma(x4, a, b); x5 = fma(x5, a, b); x6 = fma(x6, a, b); x7 = fma(x7, a, b);
    }
    float16 s = x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7;
    out[get_global_id(0)] = s.s0 + s.sf;
}
__kernel void nn_peak_copy(__global const float4 *in, __global float4 *out) {
    out[get_global_id(0)] = in[get_global_id(0)];
}"""


@pytest.fixture(scope="module", autouse=True)
def kind_table(request):
    yield
    lines = ["", "OpenCL kernels by kind over the MediaPipe models (device time per run, each step alone):"]
    if PEAK:
        lines.append(f"  measured peak: {PEAK['gflops']:.1f} GFLOP/s, {PEAK['gbs']:.1f} GB/s")
    for kind, (seconds, flops, nbytes) in TOTALS.items():
        if seconds:
            gf, gb = flops / seconds / 1e9, nbytes / seconds / 1e9
            lines.append(f"  {kind:14s} {seconds * 1e3:8.2f} ms  {gf:7.2f} GFLOP/s ({gf / PEAK.get('gflops', np.inf):5.1%})"
                         f"  {gb:7.2f} GB/s ({gb / PEAK.get('gbs', np.inf):5.1%})")
    show_summary(request, lines)


def _best(run, repeat: int = 5) -> float:
    best = np.inf
    for _ in range(repeat):
        t = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - t)
    return best


def test_device_peak():
    import pyopencl as cl

    from nngpu.backends.opencl import OpenCLBackend

    backend = OpenCLBackend()
    ctx, queue = backend.context, backend.queue
    program = cl.Program(ctx, _PEAK).build()
    n = 1 << 14
    out = cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 4 * n)
    fma = program.nn_peak_fma
    fma.set_args(out, np.float32(0.999), np.float32(0.001))
    seconds = _best(lambda: (cl.enqueue_nd_range_kernel(queue, fma, (n,), None), queue.finish()))
    PEAK["gflops"] = 2 * LANES * CHAINS * STEPS * n / seconds / 1e9
    words = 1 << 22   # 64 MiB each way
    src, dst = (cl.Buffer(ctx, cl.mem_flags.READ_WRITE, 16 * words) for _ in range(2))
    cl.enqueue_fill_buffer(queue, src, np.float32(1), 0, 16 * words)
    copy = program.nn_peak_copy
    copy.set_args(src, dst)
    seconds = _best(lambda: (cl.enqueue_nd_range_kernel(queue, copy, (words,), None), queue.finish()))
    PEAK["gbs"] = 2 * 16 * words / seconds / 1e9


def _elements(dims) -> int:
    return int(np.prod(dims, dtype=np.int64))


def _kind_work(graph, op: int) -> tuple[str, float, float] | None:
    """(kind, flops, bytes) of a kernel computing operation `op`, when it is one of the kinds."""
    operation = graph.operations[op]
    operands = graph.operands
    out = operands[operation.outputs[0]].dimensions
    ins = [operands[i].dimensions for i in operation.inputs[:3]]
    moved = 4 * (sum(_elements(d) for d in ins) + _elements(out))
    if operation.type == Op.CONV_2D:
        _, kh, kw, cin = ins[1]
        return "conv (direct)", 2.0 * _elements(out) * kh * kw * cin, moved
    if operation.type == Op.DEPTHWISE_CONV_2D:
        _, kh, kw, _ = ins[1]
        return "depthwise", 2.0 * _elements(out) * kh * kw, moved
    if operation.type == Op.SOFTMAX:
        return "softmax", 4.0 * _elements(out), 4 * 2 * _elements(out)   # max, exp, sum, divide
    return None


@pytest.mark.parametrize("name", MODELS)
def test_kernel_kinds(name):
    named = load_model(mediapipe_model(name))
    runs = 10
    with Session(named, "opencl") as session:
        session.set_inputs(random_inputs(named.inputs, seed=0))
        session.execute()
        with recording() as prof:
            for _ in range(runs):
                session.execute()
    graph = named.model.main if hasattr(named.model, "main") else named.model
    by_gemm = {k for e in prof.events if e.cat == "gemm" for k in e.args["ops"]}
    for e in prof.events:
        seconds = e.args.get("device_ns", 0) / 1e9 / runs
        if not seconds:
            continue
        if e.cat == "gemm":
            m, n, k = e.args["m"], e.args["n"], e.args["k"]
            work = ("gemm", 2.0 * m * n * k, 4.0 * (m * k + k * n + m * n))
        elif e.cat == "kernel" and len(e.args["ops"]) >= 1 and "im2col" not in e.args["kernel"]:
            op = e.args["ops"][0]
            work = None if op in by_gemm else _kind_work(graph, op)   # a GEMM's epilogue: the GEMM's work
        else:
            work = None
        if work is not None:
            kind, flops, nbytes = work
            total = TOTALS[kind]
            total[0] += seconds
            total[1] += flops / runs
            total[2] += nbytes / runs
