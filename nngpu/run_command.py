"""`nngpu run`: prepare a model on a device, execute it --repeat times, print outputs and timing.

A .tflite model goes to nngpu.tflite.run. A corpus-format .json (or .json.gz) file runs its
first case; without a model argument that is the bundled demo CNN (CONV_2D → AVERAGE_POOL_2D →
RESHAPE → FULLY_CONNECTED → SOFTMAX)."""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from .json_models import build_model, build_request, load_file
from .driver.callbacks import PreparedModelCallback
from .driver.device import Device
from .hal.types import ErrorStatus, ExecutionPreference, MeasureTiming

DEMO_MODEL = Path(__file__).resolve().parent / "data" / "demo_cnn.json"


def _summary(arr: np.ndarray) -> str:
    flat = arr.reshape(-1)
    head = np.array2string(flat[:10], precision=5, separator=", ")
    return f"shape {list(arr.shape)} {arr.dtype}, min {flat.min():.6g} max {flat.max():.6g} mean {flat.mean():.6g}: {head}"


def run_model(args) -> int:
    """The `nngpu run` command on parsed `args`; the process exit status."""
    path = Path(args.model) if args.model else DEMO_MODEL
    if path.suffix == ".tflite":
        from .tflite.run import run_tflite

        return run_tflite(args)
    if path.suffix not in (".json", ".gz"):
        print(f"nngpu run: {path.name}: only corpus-format .json models are supported here", file=sys.stderr)
        return 2
    case = load_file(path)[0]
    device = Device(args.backend)
    print(f"device: {device.getVersionString()[1]}, type {device.getType()[1].name}")
    model = build_model(case, flat=True)
    t0 = time.perf_counter()
    cb = PreparedModelCallback()
    device.prepareModel_1_2(model, ExecutionPreference.FAST_SINGLE_ANSWER, [], [], bytes(32), cb)
    status, prepared = cb.get(120)
    print(f"model: {case.name} ({len(model.operations)} operations), prepared in {(time.perf_counter() - t0) * 1e3:.1f} ms")
    if status != ErrorStatus.NONE:
        print(f"prepareModel failed: {status.name}", file=sys.stderr)
        return 1
    ex = build_request(case)
    latencies, timings = [], []
    for _ in range(max(args.repeat, 1)):
        t = time.perf_counter_ns()
        status, shapes, timing = prepared.executeSynchronously(ex.request, MeasureTiming.YES)
        latencies.append((time.perf_counter_ns() - t) / 1e3)
        timings.append(timing)
        if status != ErrorStatus.NONE:
            print(f"execution failed: {ErrorStatus(status).name}", file=sys.stderr)
            return 1
    for k, shape in enumerate(shapes):
        print(f"output {k}: {_summary(ex.output_array(k, shape.dimensions).reshape(shape.dimensions))}")
    lat = np.array(latencies)
    print(f"latency over {len(lat)} runs (µs): p50 {np.percentile(lat, 50):.1f}  p90 {np.percentile(lat, 90):.1f}  "
          f"min {lat.min():.1f}")
    print(f"driver timing of the last run (µs): timeInDriver {timings[-1].timeInDriver}, "
          f"timeOnDevice {timings[-1].timeOnDevice}")
    return 0
