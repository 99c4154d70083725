"""`nngpu compare MODEL.tflite`: nngpu against TFLite on the same inputs, for bringing a model up.

TFLite runs with its default kernels (XNNPACK) and its reference kernels; nngpu on --backend.
Per output: nngpu's error against TFLite's default run, as a fraction of the output's range (float)
or in quantization steps, beside TFLite's own spread (default against reference kernels) and the
tolerance: 1e-4 of the range or that spread for floats, one step for quantized outputs.
--per-op compares every intermediate tensor both expose and names the first operator whose
output is past its tolerance, with the errors of its inputs. Exit 0 when every output is within
tolerance, 1 when one is not, 2 on bad input."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from .common import open_device, positive, writable_file
from .errors import CLIError, missing_extra
from .inputs import read_inputs


def add_parser(sub, common) -> None:
    c = sub.add_parser("compare", parents=[common], help="compare a .tflite model's outputs with TFLite's",
                       description=__doc__.split("\n\n")[0])
    c.add_argument("model", help="a .tflite model")
    c.add_argument("--backend", default="auto", help="numpy, opencl, cuda or auto (default)")
    c.add_argument("--input", action="append", default=[], metavar="FILE",
                   help="an input: X.npy (in model input order, repeat), NAME=X.npy, or an .npz by tensor name "
                        "(default: random inputs from --seed)")
    c.add_argument("--cast", action="store_true", help="cast --input arrays to the model's dtypes instead of refusing")
    c.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default 0)")
    c.add_argument("--per-op", action="store_true",
                   help="compare every intermediate tensor and name the first operator past its tolerance")
    c.add_argument("--threads", type=positive, help="threads for BLAS and host work (default: the libraries' own)")
    c.add_argument("--json", metavar="FILE", help="write the comparison as JSON ('-': standard output)")
    c.set_defaults(func=run)


def _measure(value: float, check) -> str:
    """`value` (an error, spread or tolerance of `check`) in the unit the output is judged in:
    quantization steps, a fraction of a float output's range, else as it is."""
    if check.quantized:
        return f"{value:g} step{'s' if value != 1 else ''}"
    return f"{value / check.span:.2e} of the range" if check.span else f"{value:g}"


def _error(check) -> str:
    return check.note or _measure(check.error, check)


def _as_dict(check) -> dict:
    return {"name": check.name, "ok": check.ok, "quantized": check.quantized, "error": check.error,
            "tflite_spread": check.spread, "tolerance": check.tolerance, "range": check.span or None,
            "note": check.note or None}


def _inputs(args, path: Path) -> tuple[list | None, str]:
    if not args.input:
        return None, f"random, seed {args.seed}"
    from ..tflite import load_tflite

    return read_inputs(args.input, load_tflite(path, validate=False), args.cast), "--input"


def run(args) -> int:
    try:
        from ..tflite import compare as cmp
        from ..tflite.errors import TFLiteImportError
    except ImportError as e:
        raise missing_extra("nngpu compare", "tflite") from e
    path = Path(args.model)
    if not path.is_file():
        raise CLIError(f"{args.model}: no such file")
    if path.suffix != ".tflite":
        raise CLIError(f"{args.model}: nngpu compare takes a .tflite model")
    json_path = None if args.json in (None, "-") else writable_file(args.json, "--json")
    device = open_device(args.backend)
    backend = device.backend_name
    from .run_command import thread_limit

    with thread_limit(args.threads):
        try:
            inputs, origin = _inputs(args, path)
            if inputs is None:
                inputs = cmp.make_inputs(path, args.seed)
            outcome = cmp.compare(path, backend, inputs=inputs, isolate=True)
        except TFLiteImportError as e:
            raise CLIError(f"{path.name}: {e}") from e
        except ValueError as e:   # TFLite cannot load the file
            raise CLIError(f"{path.name}: TFLite cannot run it: {e}") from e
        if outcome.import_error:
            raise CLIError(f"{path.name}: {outcome.import_error}", 1)
        if outcome.run_error:
            raise CLIError(f"{path.name} on {backend}: {outcome.run_error}", 1)
        ops = _per_op(path, backend, inputs) if args.per_op else None
    report = {"model": path.name, "backend": backend, "inputs": origin, "placement": outcome.placement,
              "note": outcome.note or None, "ok": outcome.ok, "outputs": [_as_dict(c) for c in outcome.checks]}
    if ops is not None:
        from ..tflite.compare_ops import first_failure

        bad = first_failure(ops)
        report["operators"] = [{"index": op.index, "op": op.name, "ok": op.ok,
                                "outputs": [_as_dict(c) for c in op.outputs],
                                "inputs": [_as_dict(c) for c in op.inputs]} for op in ops]
        report["first_failing_operator"] = None if bad is None else {"index": bad.index, "op": bad.name}
    if args.json == "-":
        json.dump(report, sys.stdout, indent=2)
        print()
    else:
        _print(report, outcome, ops)
        if json_path is not None:
            json_path.write_text(json.dumps(report, indent=2) + "\n")
    return 0 if outcome.ok else 1


def _per_op(path: Path, backend: str, inputs: list):
    from ..tflite import load_tflite
    from ..tflite.compare_ops import per_operator
    from ..tflite.errors import TFLiteImportError

    try:
        imported = load_tflite(path)
    except TFLiteImportError as e:
        raise CLIError(f"--per-op needs a model the driver runs whole, and {path.name} is not one: {e}") from e
    return per_operator(path, imported, backend, inputs)


def _print(report: dict, outcome, ops) -> None:
    print(f"model: {report['model']} on {report['backend']}; inputs: {report['inputs']}")
    if outcome.placement:
        print(f"placement: {outcome.placement}")
    if outcome.note:
        print(f"note: {outcome.note}")
    print("output                          nngpu error                  TFLite spread                tolerance")
    for c in outcome.checks:
        flag = "" if c.ok else "   FAIL"
        print(f"{c.name[:31]:31s} {_error(c):28s} {_measure(c.spread, c):28s} {_measure(c.tolerance, c)}{flag}")
    if ops is not None:
        from ..tflite.compare_ops import first_failure

        print(f"per operator: {len(ops)} operators compared, {sum(not op.ok for op in ops)} past their tolerance")
        bad = first_failure(ops)
        if bad is not None:
            worst = max(bad.outputs, key=lambda c: c.error)
            print(f"first past its tolerance: operator {bad.index} ({bad.name}), output {worst.name}: "
                  f"{_error(worst)} (tolerance {_measure(worst.tolerance, worst)})")
            for c in bad.inputs:
                print(f"  its input {c.name}: {_error(c)}")
    print("all outputs within tolerance" if outcome.ok else "some outputs past their tolerance")
