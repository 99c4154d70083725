"""Peak resident memory of `nngpu run` (numpy, opencl) against a Python process that runs the
model on TFLite's interpreter, each in a fresh process, on the zoo's large float models.

    bash zoo/run.sh                     # makes the zoo (tensorflow), once
    pytest bench/test_bench_peak_memory.py   # NNGPU_ZOO_DIR: where the models are

A model the zoo folder lacks is skipped; the ratio table prints at the end. `nngpu run` runs
twice: the first fills the kernel cache (a cold OpenCL build holds the compiler's memory), the
second, measured, is what every later run of the model costs."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("ai_edge_litert.interpreter", reason="ai-edge-litert is not installed")

from .common import show_summary, zoo_model  # noqa: E402

MODELS = ("resnet50", "mobilenet_v2", "efficientnet_b0")
RESULTS: dict[tuple[str, str], float] = {}

_TFLITE = """
import resource, sys, numpy as np
from ai_edge_litert.interpreter import Interpreter
it = Interpreter(model_path=sys.argv[1], num_threads=1)
it.allocate_tensors()
for d in it.get_input_details():
    it.set_tensor(d["index"], np.zeros(d["shape"], d["dtype"]))
it.invoke()
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""
# The runtime alone: nngpu with the backend's device open (on PoCL, its LLVM), no model.
_DEVICE = """
import resource, sys
from nngpu.driver.device import Device
Device(sys.argv[1])
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""


@pytest.fixture(scope="module", autouse=True)
def ratio_table(request):
    yield
    lines = ["", "peak RSS, MiB (ratio to TFLite's):"]
    lines += [f"  the {backend} device alone, no model: {RESULTS[('device', backend)]:.0f}"
              for backend in ("numpy", "opencl") if ("device", backend) in RESULTS]
    for name in MODELS:
        t = RESULTS.get((name, "tflite"))
        for backend in ("numpy", "opencl"):
            n = RESULTS.get((name, backend))
            if t and n:
                lines.append(f"  {name:16s} {backend:7s} {n:7.0f}  TFLite {t:6.0f}  = {n / t:.2f}x")
    show_summary(request, lines)


@pytest.mark.parametrize("name", MODELS)
def test_tflite_peak(name):
    path = zoo_model(name)
    out = subprocess.run([sys.executable, "-c", _TFLITE, str(path)], capture_output=True, text=True, check=True)
    RESULTS[(name, "tflite")] = float(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("backend", ["numpy", "opencl"])
def test_device_alone_peak(backend):
    out = subprocess.run([sys.executable, "-c", _DEVICE, backend], capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip(f"{backend}: {out.stderr.strip().splitlines()[-1] if out.stderr.strip() else out.returncode}")
    RESULTS[("device", backend)] = float(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("backend", ["numpy", "opencl"])
@pytest.mark.parametrize("name", MODELS)
def test_nngpu_run_peak(name, backend, tmp_path):
    path = zoo_model(name)
    report = tmp_path / "run.json"
    for _ in range(2):
        done = subprocess.run([sys.executable, "-m", "nngpu", "run", str(path), "--backend", backend, "--repeat", "2",
                               "--json", str(report)], capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"{backend}: {done.stderr.strip().splitlines()[-1] if done.stderr.strip() else done.returncode}")
    RESULTS[(name, backend)] = json.loads(report.read_text())["peak_rss_mb"]
