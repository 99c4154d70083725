"""The numpy reference's interpreter overhead: the numpy plan (compiler/numpy_plan.py, what the
numpy backend executes) against the GraphRunner interpreter it precompiles, in one run.

    pytest bench/test_bench_numpy_plan.py     # prints the per-op overhead and per-model tables
    NNGPU_BENCH_ROUNDS=20 pytest bench/...    # more rounds per model (default 10)

- per-op overhead: a chain of 64 elementwise operations on 1x4 float32 tensors (the kernels
  cost next to nothing), minus 64 bare `np.add(out=)` calls (the baseline): µs per operation
  spent outside numpy, on the bound path (ADD, MUL, SUB, DIV, RELU6, TANH, LOGISTIC) and on the
  reference path (MAXIMUM, MINIMUM, ABS: no bind);
- the five MediaPipe models: plan / runner latency, the plan's top op types by time, and the
  bytes of one execution's buffer set: the bound outputs' sizes summed (a buffer each) against
  the plan's shared layout (compiler/numpy_plan.py `layout`)."""
from __future__ import annotations

import os

import numpy as np
import pytest

from nngpu import profiling
from nngpu.runtime.interpreter import GraphRunner
from nngpu.compiler.numpy_bind import numpy_plan
from nngpu.hal import OperationType as Op
from nngpu.modelutil import as_model_1_3
from nngpu.session import random_inputs
from nngpu.tflite import load_tflite
from nngpu.tflite.models import MODELS

from tests.compiler.test_fusion import chain_model

from .common import mediapipe_model, show_summary

CHAIN = 64
CHAINS = {"bound": (Op.ADD, Op.MUL, Op.SUB, Op.DIV, Op.RELU6, Op.TANH, Op.LOGISTIC),
          "reference": (Op.MAXIMUM, Op.MINIMUM, Op.ABS)}
TOP = 6
ROUNDS = int(os.environ.get("NNGPU_BENCH_ROUNDS", "10"))
RESULTS: dict[tuple[str, str], float] = {}   # (what, executor) -> fastest round, seconds
TOP_OPS: dict[str, str] = {}                 # model -> its plan's op table
MEMORY: dict[str, tuple[int, int]] = {}      # model -> (a buffer per bound output, shared), bytes


def _fastest(benchmark) -> float | None:
    """The fastest round: on a shared machine the median carries the other processes' load."""
    stats = getattr(benchmark, "stats", None)
    return stats.stats.min if stats is not None and getattr(stats, "stats", None) is not None else None


@pytest.fixture(scope="module", autouse=True)
def summary(request):
    yield
    lines = ["", f"per-op overhead (µs per operation beyond a bare np.add(out=), {CHAIN}-op chains of 1x4 float32):"]
    bare = RESULTS.get(("chain", "bare"))
    for path in CHAINS:
        row = {e: RESULTS.get((f"chain-{path}", e)) for e in ("runner", "plan")}
        if bare and all(row.values()):
            lines.append(f"  {path:9s} runner {(row['runner'] - bare) / CHAIN * 1e6:6.2f}   "
                         f"plan {(row['plan'] - bare) / CHAIN * 1e6:6.2f}")
    lines.append("model latency (fastest round, ms): runner, plan, plan / runner")
    for name in sorted(MODELS):
        r, p = RESULTS.get((name, "runner")), RESULTS.get((name, "plan"))
        if r and p:
            lines.append(f"  {name:28s} {r * 1e3:8.2f} {p * 1e3:8.2f}  {p / r:5.2f}x")
    if MEMORY:
        lines.append("buffer set per execution (bytes): a buffer per bound output, shared, shared / each")
        for name, (each, shared) in sorted(MEMORY.items()):
            lines.append(f"  {name:28s} {each:10d} {shared:10d}  {shared / each:5.3f}")
    for name, table in sorted(TOP_OPS.items()):
        lines += [f"{name}: the plan's top op types", table]
    if len(lines) > 3:
        show_summary(request, lines)


def test_bare_numpy(benchmark):
    """The baseline: CHAIN np.add calls into a preallocated output."""
    x, y = np.ones((1, 4), np.float32), np.empty((1, 4), np.float32)

    def chain() -> None:
        for _ in range(CHAIN):
            np.add(x, x, out=y)

    benchmark.group = "per-op overhead"
    benchmark(chain)
    RESULTS["chain", "bare"] = _fastest(benchmark)


def _executor(kind: str, model):
    runner = GraphRunner(as_model_1_3(model))
    return runner if kind == "runner" else numpy_plan(runner)


@pytest.mark.parametrize("kind", ["runner", "plan"])
@pytest.mark.parametrize("path", sorted(CHAINS))
def test_chain(benchmark, path, kind):
    executor = _executor(kind, chain_model(CHAIN, [1, 4], CHAINS[path]))
    x = np.full((1, 4), 0.5, np.float32)
    benchmark.group = "per-op overhead"
    benchmark.extra_info.update(path=path, executor=kind)
    with np.errstate(all="ignore"):
        benchmark(executor.run, [x])
    RESULTS[f"chain-{path}", kind] = _fastest(benchmark)


@pytest.fixture(scope="module", params=sorted(MODELS))
def model(request):
    imported = load_tflite(mediapipe_model(request.param))
    return request.param, imported.model, random_inputs(imported.inputs, seed=0)


@pytest.mark.parametrize("kind", ["runner", "plan"])
def test_model(benchmark, model, kind):
    name, m, inputs = model
    executor = _executor(kind, m)
    benchmark.group = name
    benchmark.extra_info["executor"] = kind
    benchmark.pedantic(executor.run, (inputs,), rounds=ROUNDS, warmup_rounds=1)
    RESULTS[name, kind] = _fastest(benchmark)
    if kind == "plan":
        with profiling.recording() as prof:
            for _ in range(3):
                executor.execute(inputs)
        TOP_OPS[name] = "\n".join(prof.format_op_table().splitlines()[: TOP + 1])
        (bound,) = executor.bounds()
        MEMORY[name] = bound.unshared_nbytes(), bound.nbytes
