"""The device plan's hot path on the five MediaPipe models, in one run.

OpenCL:
  - enqueue: the kernel launches of one execution issued back to back (the device drained
    before each round), bound (arguments set at prepare: what the plan does) against the
    per-launch-argument path of pyopencl's Kernel.__call__ (what the plan did before); µs per
    launch.
  - execution: launches per execution, and the host time per launch two ways: (the median
    execution time − the device time the profiling events report for it) / launches, which on
    a CPU device (PoCL) also counts the host's share of the cores the device work competes
    for; and the CPU time of the executing thread alone (time.thread_time: the enqueues, the
    transfers' host side, a driver's busy wait) / launches.
CUDA (skips without a GPU): graph replay against step-by-step launching (plan.execute), and the
end-to-end latency of a request through the prepared model with graphs.

    pytest bench/test_bench_device_plan.py       # prints the tables at the end
    NNGPU_BENCH_ROUNDS=50 pytest bench/...       # more rounds per measurement (default 20)

Inputs are the fixed-seed random images `nngpu run` uses. Models come from ci/fetch-models.sh."""
from __future__ import annotations

import os
import statistics
import time

import pytest

pytest.importorskip("tflite", reason="the `tflite` flatbuffer package is not installed")

from nngpu import profiling  # noqa: E402
from nngpu.backends import cuda, opencl  # noqa: E402
from nngpu.compiler.steps import GemmStep, KernelStep  # noqa: E402
from nngpu.session import Session, random_inputs  # noqa: E402
from nngpu.tflite import load_tflite  # noqa: E402
from nngpu.tflite.models import MODELS  # noqa: E402

from .common import mediapipe_model, show_summary  # noqa: E402

ROUNDS = int(os.environ.get("NNGPU_BENCH_ROUNDS", "20"))
PROFILED = 3                                  # executions recorded for the device time
RESULTS: dict[tuple[str, str], float] = {}    # (model, measure) -> seconds, or a count


@pytest.fixture(scope="module", autouse=True)
def tables(request):
    yield
    lines = []
    names = [n for n in sorted(MODELS) if (n, "enqueue-bound") in RESULTS]
    if names:
        lines += ["", "OpenCL kernel launches issued back to back (median µs per launch):",
                  f"  {'model':28s} {'kernels':>7s} {'bound':>8s} {'per-launch args':>15s} {'ratio':>6s}"]
        for n in names:
            k, bound, old = RESULTS[n, "kernels"], RESULTS[n, "enqueue-bound"], RESULTS.get((n, "enqueue-args"))
            ratio = f"{old / bound:6.2f}" if old else ""
            lines.append(f"  {n:28s} {k:7.0f} {bound / k * 1e6:8.2f} {(old or 0) / k * 1e6:15.2f} {ratio:>6s}")
    names = [n for n in sorted(MODELS) if (n, "opencl") in RESULTS]
    if names:
        lines += ["", "OpenCL plan.execute (median; host = execution - device time of the profiling events):",
                  f"  {'model':28s} {'launches':>8s} {'exec ms':>9s} {'device ms':>9s} {'host µs/launch':>14s} "
                  f"{'thread CPU µs/launch':>20s}"]
        for n in names:
            launches, t, dev = RESULTS[n, "launches"], RESULTS[n, "opencl"], RESULTS.get((n, "device"))
            host = "n/a" if dev is None else f"{(t - dev) / launches * 1e6:14.2f}"
            device = "n/a" if dev is None else f"{dev * 1e3:9.3f}"
            cpu = RESULTS[n, "thread"] / launches * 1e6
            lines.append(f"  {n:28s} {launches:8.0f} {t * 1e3:9.3f} {device:>9s} {host:>14s} {cpu:20.2f}")
    names = [n for n in sorted(MODELS) if (n, "cuda-graph") in RESULTS]
    if names:
        lines += ["", "CUDA plan (median ms): graph replay vs step by step, and a request end to end:"]
        for n in names:
            g, s, e = (RESULTS.get((n, f"cuda-{m}")) for m in ("graph", "step", "request"))
            ratio = f"step/graph {s / g:5.2f}x" if g and s else ""
            lines.append(f"  {n:28s} graph {g * 1e3:8.3f}  step {(s or 0) * 1e3:8.3f}  "
                         f"request {(e or 0) * 1e3:8.3f}  {ratio}")
    if lines:
        show_summary(request, lines)


@pytest.fixture(scope="module", params=sorted(MODELS))
def model(request):
    imported = load_tflite(mediapipe_model(request.param))
    return request.param, imported, random_inputs(imported.inputs, seed=0)


@pytest.fixture(scope="module")
def opencl_plan(model):
    if not opencl.available()[0]:
        pytest.skip("no OpenCL device")
    name, imported, inputs = model
    with Session(imported, "opencl") as session:
        plan = session.prepared.executor
        plan.execute(inputs)
        yield name, plan, inputs


def _median(benchmark) -> float | None:
    stats = getattr(benchmark, "stats", None)
    return None if stats is None or getattr(stats, "stats", None) is None else stats.stats.median


def _launches(plan) -> int:
    return sum(isinstance(s, (KernelStep, GemmStep)) for seg in plan._last for s in seg.spec.steps)


def _device_seconds(plan, inputs) -> float | None:
    """Mean device time per execution from the kernels' and GEMMs' profiling events (None when
    the backend reports none)."""
    with profiling.recording() as prof:
        for _ in range(PROFILED):
            plan.execute(inputs)
    times = [e.args.get("device_ns") for e in prof.events if e.cat in ("kernel", "gemm")]
    if not times or None in times:
        return None
    return sum(times) / PROFILED / 1e9


def _thread_seconds(plan, inputs) -> float:
    """The median CPU time of this thread per execution (the device's threads not counted)."""
    times = []
    for _ in range(ROUNDS):
        start = time.thread_time_ns()
        plan.execute(inputs)
        times.append(time.thread_time_ns() - start)
    return statistics.median(times) / 1e9


def _kernel_launches(plan, bound: bool) -> list:
    """The plan's kernel launches as calls: its bound steps, or pyopencl's Kernel.__call__ with
    the arguments passed at each launch (the same kernel objects and buffers)."""
    queue, calls = plan.backend.queue, []
    for seg in plan._last:
        for spec_step, step in zip(seg.spec.steps, seg.steps):
            if isinstance(spec_step, KernelStep) and spec_step.size > 0:
                args = [seg.buffers[t] for t in spec_step.args]
                kernel = seg.kernels[spec_step.name]
                calls.append(step[1] if bound else
                             lambda k=kernel, a=args, n=(spec_step.size,): k(queue, n, None, *a))
    return calls


@pytest.mark.parametrize("path", ["enqueue-bound", "enqueue-args"])
def test_opencl_enqueue(benchmark, opencl_plan, path):
    name, plan, _ = opencl_plan
    calls = _kernel_launches(plan, path == "enqueue-bound")

    def issue():
        for call in calls:
            call()

    benchmark.group = f"{name} enqueue"
    benchmark.pedantic(issue, setup=plan.backend.synchronize, rounds=ROUNDS, warmup_rounds=2)
    if path == "enqueue-args":   # leave the kernels bound as the plan set them
        for seg in plan._last:
            for spec_step, step in zip(seg.spec.steps, seg.steps):
                if isinstance(spec_step, KernelStep) and spec_step.size > 0:
                    seg.kernels[spec_step.name].set_args(*(seg.buffers[t] for t in spec_step.args))
    plan.backend.synchronize()
    RESULTS[name, "kernels"] = len(calls)
    if _median(benchmark) is not None:
        RESULTS[name, path] = _median(benchmark)


def test_opencl_plan(benchmark, opencl_plan):
    name, plan, inputs = opencl_plan
    benchmark.group = f"{name} plan"
    benchmark.pedantic(plan.execute, args=(inputs,), rounds=ROUNDS, warmup_rounds=2)
    RESULTS[name, "launches"] = _launches(plan)
    benchmark.extra_info["launches"] = RESULTS[name, "launches"]
    device = _device_seconds(plan, inputs)
    RESULTS[name, "thread"] = _thread_seconds(plan, inputs)
    median = _median(benchmark)
    if median is not None:
        RESULTS[name, "opencl"] = median
        if device is not None:
            RESULTS[name, "device"] = device
            benchmark.extra_info["host_us_per_launch"] = (median - device) / RESULTS[name, "launches"] * 1e6


@pytest.mark.skipif(not cuda.available(), reason="CuPy sees no GPU")
@pytest.mark.parametrize("mode", ["graph", "step", "request"])
def test_cuda_plan(benchmark, model, mode):
    name, imported, inputs = model
    with Session(imported, "cuda") as session:
        plan = session.prepared.executor
        plan.graphs = mode != "step"
        session.set_inputs(inputs)
        benchmark.group = f"{name} cuda"
        if mode == "request":
            benchmark.pedantic(session.execute, rounds=ROUNDS, warmup_rounds=2)
        else:
            benchmark.pedantic(plan.execute, args=(inputs,), rounds=ROUNDS, warmup_rounds=2)
    median = _median(benchmark)
    if median is not None:
        RESULTS[name, f"cuda-{mode}"] = median
