"""Compare every .tflite model of a folder with TFLite and print one table per backend:

    python -m zoo.report DIR [--backend numpy,opencl] [--runs N]

model | import (ok, or the one-line reason) | partitions (where nngpu says) | max error | tolerance
| nngpu ms | TFLite ms. Errors and tolerances are absolute for float outputs and in quantization
steps for integer ones (compare.py has the rule); the worst output of each model is shown."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from nngpu.tflite.compare import Outcome, compare, one_line

COLUMNS = ("model", "import", "partitions", "max error", "tolerance", "nngpu ms", "TFLite ms")


def _num(v: float | None, steps: bool = False) -> str:
    if v is None:
        return ""
    if steps:
        return "inf" if v == float("inf") else f"{v:.0f} step" + ("" if v == 1 else "s")
    return f"{v:.2g}" if v < 1e-2 or v >= 1e3 else f"{v:.4g}"


def row(o: Outcome) -> list[str]:
    imported = o.import_error or ("ok" + (f" ({o.note})" if o.note else ""))
    worst = o.worst()
    if o.run_error:
        error, tol = f"run failed: {o.run_error}", ""
    elif worst is None:
        error, tol = "", ""
    elif worst.note:
        error, tol = f"FAIL {worst.name}: {worst.note}", ""
    else:
        error = _num(worst.error, worst.quantized) + ("" if o.ok else " FAIL")
        tol = _num(worst.tolerance, worst.quantized)
    return [o.model, imported, o.placement, error, tol, _num(o.nngpu_ms), _num(o.tflite_ms)]


def table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in [list(COLUMNS), *rows]) for i in range(len(COLUMNS))]
    lines = [" | ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in [list(COLUMNS), *rows]]
    lines.insert(1, "-|-".join("-" * w for w in widths))
    return "\n".join(lines)


def _unavailable(backend: str) -> str:
    """Why `backend` cannot run here ("" when it can)."""
    from nngpu.driver.device import Device

    try:
        Device(backend)
    except Exception as e:  # no such backend, no driver, no device
        return one_line(e)
    return ""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m zoo.report", description="Compare a folder of .tflite "
                                 "models on nngpu with the TFLite interpreter.")
    ap.add_argument("dir", type=Path)
    ap.add_argument("--backend", default="numpy", help="comma-separated backends (default numpy)")
    ap.add_argument("--runs", type=int, default=5, help="timed runs per model (0: no timing)")
    args = ap.parse_args(argv)
    models = sorted(args.dir.glob("*.tflite"))
    if not models:
        print(f"zoo.report: no .tflite files in {args.dir}", file=sys.stderr)
        return 2
    for backend in args.backend.split(","):
        reason = _unavailable(backend)
        if reason:
            print(f"\n## {backend}: unavailable ({reason})")
            continue
        rows, passed = [], 0
        for path in models:
            try:
                outcome = compare(path, backend, args.runs, isolate=True)
            except Exception as e:  # TFLite itself cannot run it: still one row
                outcome = Outcome(path.stem, backend, import_error=f"TFLite: {one_line(e)}")
            passed += outcome.ok
            rows.append(row(outcome))
            print(f"  {path.stem}: {'ok' if outcome.ok else 'not ok'}", file=sys.stderr, flush=True)
        print(f"\n## {backend}: {passed} of {len(models)} models match TFLite\n")
        print(table(rows), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
