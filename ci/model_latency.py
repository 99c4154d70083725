"""Per model, as it is and relaxed (relaxComputationFloat32toFloat16 set): the median latency on
a backend, the device launches one execution makes (kernels and GEMM calls) and, relaxed, how far
the outputs move from float32's, as ci/gpu-check.sh reports them for CUDA. One line each, written
as soon as it is measured, so a timeout still leaves the models done; the last line says what the
backend computes in float16 when a model is relaxed.

    python ci/model_latency.py [--backend cuda] [--repeat 20]

The models are the MediaPipe ones ci/fetch-models.sh caches (missing ones are listed as such)."""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # run as a script from a checkout
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nngpu.cli.run_command import timed_runs  # noqa: E402
from nngpu.session import Session, random_inputs  # noqa: E402
from nngpu.tflite import load_tflite  # noqa: E402
from nngpu.tflite.models import MODELS, find_model  # noqa: E402


def largest_change(outputs: list[np.ndarray], reference: list[np.ndarray]) -> float:
    """The largest difference of any output from the reference's, in units of that output's
    largest magnitude."""
    worst = 0.0
    for got, want in zip(outputs, reference, strict=True):
        want64, scale = want.astype(np.float64), float(np.max(np.abs(want), initial=0)) or 1.0
        worst = max(worst, float(np.max(np.abs(got.astype(np.float64) - want64), initial=0)) / scale)
    return worst


def _failure(name: str, precision: str, e: Exception) -> str:
    return f"{name:30s} {precision:9s} {'FAIL':>8s} {'-':>13s}  {type(e).__name__}: {str(e).splitlines()[0][:80]}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="ci/model_latency.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--repeat", type=int, default=20, help="timed runs after the first and 2 warm-up runs (default 20)")
    args = ap.parse_args(argv)
    args.warmup = 2   # as `nngpu run --warmup 2`: the first run, then 2 more, untimed
    if args.repeat < 1:
        ap.error(f"--repeat: {args.repeat} is below 1")
    print(f"{'model':30s} {'precision':9s} {'p50 ms':>8s} {'launches/run':>13s}  {'change':>8s}")
    failed, relaxed_precision = 0, None
    for name in sorted(MODELS):
        path = find_model(name)
        if path is None:
            print(f"{name:30s} {'-':9s} {'-':>8s} {'-':>13s}  not cached: run ci/fetch-models.sh", flush=True)
            continue
        try:   # imported and its inputs made once: both precisions run the same model on the same inputs
            imported = load_tflite(path)
            inputs = random_inputs(imported.inputs, seed=0)
        except Exception as e:  # one model's failure is its line; the others still run
            failed = 1
            print(_failure(name, "-", e), flush=True)
            continue
        reference = None
        for precision in ("float32", "relaxed"):
            try:
                with Session(imported, args.backend, relaxed=precision == "relaxed") as session:
                    _, steady_us = timed_runs(session, inputs, args)
                    launches, outputs = session.device_launches(), session.output_arrays()
                    relaxed_precision = session.device.backend.relaxed_precision()
            except Exception as e:
                failed = 1
                print(_failure(name, precision, e), flush=True)
                continue
            change = "-" if reference is None else f"{largest_change(outputs, reference):8.1e}"
            if reference is None:
                reference = outputs
            print(f"{name:30s} {precision:9s} {statistics.median(steady_us) / 1e3:8.2f} {launches:13d}  {change:>8s}",
                  flush=True)
    if relaxed_precision is not None:
        print(f"relaxed on {args.backend}: {relaxed_precision}; change: the largest difference from float32's outputs, "
              "in units of the output's largest magnitude")
    return failed


if __name__ == "__main__":
    sys.exit(main())
