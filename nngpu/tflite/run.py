"""`nngpu run MODEL.tflite`: import, prepare, execute --repeat times (--burst: through a burst),
print outputs and latency, and with --save-outputs write each output as a .npy file."""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from ..hal.types import MeasureTiming
from . import TFLiteImportError, load_tflite
from .session import ExecutionError, Session, random_inputs


def summarize(arr: np.ndarray) -> str:
    flat = arr.reshape(-1)
    if flat.size == 0:
        return f"shape {list(arr.shape)} {arr.dtype}, empty"
    head = np.array2string(flat[:6], precision=5, separator=", ", max_line_width=10**6)
    num = flat.astype(np.float64)
    return (f"shape {list(arr.shape)} {arr.dtype}, min {num.min():.6g} max {num.max():.6g} "
            f"mean {num.mean():.6g}, first {head}")


def _inputs(args, imported) -> list[np.ndarray]:
    files = list(args.input or [])
    if not files:
        return random_inputs(imported, seed=0)
    if len(files) != len(imported.inputs):
        raise ValueError(f"the model has {len(imported.inputs)} inputs ({', '.join(imported.input_names)}), "
                         f"got {len(files)} --input files")
    arrays = []
    for f, t in zip(files, imported.inputs):
        a = np.load(f)
        if list(a.shape) != list(t.shape):
            raise ValueError(f"{f}: shape {list(a.shape)}, input {t.name} wants {t.shape}")
        if a.dtype != t.dtype:
            if not np.can_cast(a.dtype, t.dtype, "same_kind"):
                raise ValueError(f"{f}: dtype {a.dtype}, input {t.name} wants {t.dtype}")
            a = a.astype(t.dtype)
        arrays.append(a)
    return arrays


def run_tflite(args) -> int:
    path = Path(args.model)
    err = sys.stderr
    try:
        imported = load_tflite(path)
    except TFLiteImportError as e:  # includes UnsupportedOperatorError and format errors
        print(f"nngpu run: {path.name}: {e}", file=err)
        return 2
    ops = sum(imported.op_counts.values())
    print(f"model: {path.name}: {ops} TFLite operators ({imported.folded} folded into constants) -> "
          f"{len(_operations(imported.model))} NNAPI operations, HAL {imported.version // 10}.{imported.version % 10}")
    for w in imported.warnings:
        print(f"warning: {w}", file=err)
    try:
        inputs = _inputs(args, imported)
    except (OSError, ValueError) as e:
        print(f"nngpu run: {e}", file=err)
        return 2
    for t, a in zip(imported.inputs, inputs):
        print(f"input {t.name}: {summarize(a)}{'' if args.input else ' (random, seed 0)'}")
    try:
        session = Session(imported, args.backend, burst=bool(getattr(args, "burst", False)))
    except ValueError as e:  # unknown backend name
        print(f"nngpu run: {e}", file=err)
        return 2
    except ImportError as e:
        print(f"nngpu run: --burst needs nngpu.burst, which cannot be imported: {e}", file=err)
        return 2
    except ExecutionError as e:
        print(f"nngpu run: {e}", file=err)
        return 1
    except Exception as e:  # e.g. configureExecutionBurst refused (nngpu.burst.BurstError)
        print(f"nngpu run: cannot set up execution: {type(e).__name__}: {e}", file=err)
        return 1
    with session:
        print(f"device: {session.device.getVersionString()[1]}; prepared in {session.prepare_s * 1e3:.1f} ms"
              f"{'; burst' if session.burst is not None else ''}")
        latencies, timing = [], None
        try:
            session.set_inputs(inputs)
            for _ in range(max(int(args.repeat), 1)):
                t = time.perf_counter_ns()
                _, timing = session.execute(MeasureTiming.YES)
                latencies.append((time.perf_counter_ns() - t) / 1e3)
        except ExecutionError as e:
            print(f"nngpu run: {e}", file=err)
            return 1
        outputs = session.outputs()
    for k, (t, a) in enumerate(zip(imported.outputs, outputs)):
        print(f"output {k} {t.name}: {summarize(a)}")
    lat = np.asarray(latencies)
    p50, p90, p99 = np.percentile(lat, [50, 90, 99])
    print(f"latency over {len(lat)} runs (ms): p50 {p50 / 1e3:.3f}  p90 {p90 / 1e3:.3f}  p99 {p99 / 1e3:.3f}  "
          f"min {lat.min() / 1e3:.3f}")
    if timing is not None and timing.timeInDriver != 2**64 - 1:
        print(f"driver timing of the last run (µs): timeInDriver {timing.timeInDriver}, "
              f"timeOnDevice {timing.timeOnDevice}")
    if args.save_outputs:
        out_dir = Path(args.save_outputs)
        out_dir.mkdir(parents=True, exist_ok=True)
        for k, a in enumerate(outputs):
            np.save(out_dir / f"{k}.npy", a)
        print(f"saved {len(outputs)} outputs to {out_dir}/<index>.npy")
    return 0


def _operations(model):
    return model.main.operations if hasattr(model, "main") else model.operations
