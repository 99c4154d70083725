"""Per model: the median latency on a backend and the device launches one execution makes
(kernels and GEMM calls), as ci/gpu-check.sh reports them for CUDA. One line per model, written
as soon as it is measured, so a timeout still leaves the models done.

    python ci/model_latency.py [--backend cuda] [--repeat 20]

The models are the MediaPipe ones ci/fetch-models.sh caches (missing ones are listed as such).
Relaxed float16 (relaxComputationFloat32toFloat16) is not yet computed in float16 on any
backend: every figure is float32, and the line gives the backend's reason (the one a relaxed
model's prepare logs)."""
from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

if __package__ in (None, ""):  # run as a script from a checkout
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from nngpu.cli.run_command import timed_runs  # noqa: E402
from nngpu.session import Session, random_inputs  # noqa: E402
from nngpu.tflite import load_tflite  # noqa: E402
from nngpu.tflite.models import MODELS, find_model  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="ci/model_latency.py", description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--repeat", type=int, default=20, help="timed runs after the first and 2 warm-up runs (default 20)")
    args = ap.parse_args(argv)
    args.warmup = 2   # as `nngpu run --warmup 2`: the first run, then 2 more, untimed
    if args.repeat < 1:
        ap.error(f"--repeat: {args.repeat} is below 1")
    print(f"{'model':30s} {'p50 ms':>8s} {'launches/run':>13s}  precision")
    failed = 0
    for name in sorted(MODELS):
        path = find_model(name)
        if path is None:
            print(f"{name:30s} {'-':>8s} {'-':>13s}  not cached: run ci/fetch-models.sh", flush=True)
            continue
        try:
            imported = load_tflite(path)
            with Session(imported, args.backend) as session:
                _, steady_us = timed_runs(session, random_inputs(imported.inputs, seed=0), args)
                launches = session.device_launches()
                why = session.device.backend.relaxed_float32_reason()
        except Exception as e:  # one model's failure is its line; the others still run
            failed = 1
            print(f"{name:30s} {'FAIL':>8s} {'-':>13s}  {type(e).__name__}: {str(e).splitlines()[0][:80]}", flush=True)
            continue
        print(f"{name:30s} {statistics.median(steady_us) / 1e3:8.2f} {launches:13d}  float32 (relaxed too: {why})",
              flush=True)
    return failed


if __name__ == "__main__":
    sys.exit(main())
