"""A model's first execution on a machine: a fresh process with empty kernel caches (nngpu's and
PoCL's) opens the model, prepares it and runs it once, against TFLite's interpreter doing the
same in the same process (load, allocate, first invoke). PoCL compiles a kernel for its launch
size at its first launch, not at clBuildProgram, so on a CPU device most of the compile lands in
the first execution, not in prepareModel (test_bench_cache.py measures prepareModel alone).

    pytest bench/test_bench_cold_start.py        # prints the table at the end
    NNGPU_BENCH_ROUNDS=3 pytest bench/...        # cold processes per model (default 1)

Models are test_bench_tflite.py's."""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

import pytest

pytest.importorskip("tflite", reason="the `tflite` flatbuffer package is not installed")
pytest.importorskip("ai_edge_litert.interpreter", reason="ai-edge-litert is not installed")

from .common import show_summary  # noqa: E402
from .test_bench_tflite import BACKENDS, NAMES, model_path  # noqa: E402

ROUNDS = int(os.environ.get("NNGPU_BENCH_ROUNDS", "1"))
DEVICES = [b for b in BACKENDS if b != "numpy"]
RESULTS: dict[tuple[str, str], list[dict]] = {}   # (model, backend) -> each cold process's seconds

# Run in the fresh process: prints the seconds of each phase as JSON.
_COLD = r"""
import json, sys, time
t0 = time.perf_counter()
from ai_edge_litert.interpreter import Interpreter
import nngpu
from nngpu.session import random_inputs
path, backend = sys.argv[1], sys.argv[2]
t = time.perf_counter()
it = Interpreter(model_path=path, num_threads=1)
it.allocate_tensors()
it.invoke()
tflite = time.perf_counter() - t
t = time.perf_counter()
s = nngpu.Session(path, backend=backend)
prepare = time.perf_counter() - t
feeds = random_inputs(s.named.inputs, seed=0)
t = time.perf_counter(); s.run(feeds); first = time.perf_counter() - t
t = time.perf_counter(); s.run(feeds); second = time.perf_counter() - t
s.close()
print(json.dumps({"tflite": tflite, "prepare": prepare, "first": first, "second": second}))
"""


@pytest.fixture(scope="module", autouse=True)
def cold_table(request):
    yield
    if not RESULTS:
        return
    lines = ["", "A fresh process with empty kernel caches (median s over its rounds): TFLite's load + first "
             "invoke | nngpu's prepare, first and second execution, (prepare + first) / TFLite:"]
    for (name, backend), runs in sorted(RESULTS.items()):
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        lines.append(f"  {name:28s} {backend:7s} TFLite {med['tflite']:6.3f} | prepare {med['prepare']:6.2f}  "
                     f"first {med['first']:6.2f}  second {med['second']:7.4f}  = "
                     f"{(med['prepare'] + med['first']) / med['tflite']:7.0f}x")
    show_summary(request, lines)


@pytest.mark.parametrize("backend", DEVICES)
@pytest.mark.parametrize("name", NAMES)
def test_cold_start(benchmark, name, backend, tmp_path):
    path = model_path(name)
    runs: list[dict] = []

    def cold() -> None:
        fresh = tmp_path / f"round{len(runs)}"
        env = {**os.environ, "NNGPU_CACHE_DIR": str(fresh / "nngpu"), "POCL_CACHE_DIR": str(fresh / "pocl")}
        done = subprocess.run([sys.executable, "-c", _COLD, str(path), backend], env=env, capture_output=True,
                              text=True, timeout=900)
        assert done.returncode == 0, done.stderr[-2000:]
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))

    benchmark.group = f"cold start {backend}"
    benchmark.pedantic(cold, rounds=ROUNDS)
    RESULTS[name, backend] = runs
