"""The `nngpu` command: cts (conformance sweep), run (execute a model), kernels (write a model's
generated kernels), info (devices, capabilities and supported operations)."""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def _cmd_cts(args: argparse.Namespace) -> int:
    from .json_models import default_corpus_dir, load_cases
    from .cts.runner import PATHS, filter_cases, run_case, summarize
    from .driver.device import Device
    from .hal.types import MeasureTiming

    root = Path(args.dir) if args.dir else default_corpus_dir()
    if root is None or not root.is_dir():
        print("no corpus directory found (give DIR)", file=sys.stderr)
        return 2
    paths = PATHS if args.path == "all" else tuple(p for p in args.path.split(",") if p)
    bad = [p for p in paths if p not in PATHS]
    if bad:
        print(f"unknown path {bad[0]!r}; choose from {', '.join(PATHS)} or all", file=sys.stderr)
        return 2
    versions = tuple(args.version.split(",")) if args.version else None
    cases = filter_cases(load_cases(root, versions), args.k)
    device = Device(args.backend)
    measure = MeasureTiming.YES if args.timing else MeasureTiming.NO
    records = []
    t0 = time.perf_counter()
    for case in cases:
        for rec in run_case(device, args.backend, case, paths, measure):
            records.append(rec)
            if args.verbose or rec.result == "failed":
                print(f"{rec.result.upper():7s} {rec.path:5s} {rec.version}/{rec.name}: {rec.detail}")
    from .ops.registry import REGISTRY

    table, totals = summarize(records, [] if args.k or args.version else [t.name for t in REGISTRY])
    skipped = [r for r in records if r.result == "skipped"]
    print(table)
    if skipped:
        print(f"skipped ({len(skipped)}):")
        for r in skipped:
            print(f"  {r.path:5s} {r.version}/{r.name}: {r.detail}")
    if args.json:
        with open(args.json, "w") as f:
            for r in records:
                f.write(json.dumps(r.as_json()) + "\n")
    print(f"wall time {time.perf_counter() - t0:.1f} s over {len(cases)} cases")
    print(f"{totals['passed']} passed, {totals['failed']} failed, {totals['skipped']} skipped")
    return 0 if totals["failed"] == 0 else 1


def _cmd_run(args: argparse.Namespace) -> int:
    from .run_command import run_model

    return run_model(args)


def _cmd_kernels(args: argparse.Namespace) -> int:
    from .kernel_dump import dump_kernels

    return dump_kernels(args.model, args.out, args.dialect, not args.no_fusion)


def _cmd_info(args: argparse.Namespace) -> int:
    from . import backends
    from .driver.device import Device
    from .ops.registry import REGISTRY

    print("backends:")
    for name in backends.NAMES:
        try:
            dev = Device(name)
        except Exception as e:  # not installed, or no device here
            print(f"  {name:7s} unavailable ({type(e).__name__}: {e})")
            continue
        print(f"  {name:7s} {dev.getVersionString()[1]}, type {dev.getType()[1].name}")
    print(f"auto picks: {backends.resolve('auto')}")
    dev = Device(args.backend)
    caps = dev.getCapabilities_1_3()[1]
    perf = caps.operandPerformance[0].info
    print(f"capabilities ({dev.backend_name}): execTime {perf.execTime}, powerUsage {perf.powerUsage} "
          f"for {len(caps.operandPerformance)} operand types; if/while {caps.ifPerformance.execTime}")
    print(f"supported operations ({len(REGISTRY)}):")
    names = sorted(t.name for t in REGISTRY)
    for k in range(0, len(names), 4):
        print("  " + "".join(f"{n:32s}" for n in names[k : k + 4]))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="nngpu", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)

    c = sub.add_parser("cts", help="run the NNAPI conformance corpus")
    c.add_argument("dir", nargs="?", help="corpus directory (default: ../shared/nnapi-cts or the bundled copy)")
    c.add_argument("--backend", default="numpy")
    c.add_argument("--path", default="sync", help="sync, async, burst, comma-separated, or all")
    c.add_argument("--timing", action="store_true", help="measure timing (MeasureTiming::YES)")
    c.add_argument("-k", help="only cases whose name contains one of these comma-separated strings")
    c.add_argument("--version", help="only these corpus folders, e.g. V1_0,V1_1")
    c.add_argument("--json", help="write one JSON record per case and path")
    c.add_argument("-v", "--verbose", action="store_true")
    c.set_defaults(func=_cmd_cts)

    r = sub.add_parser("run", help="execute a model and print outputs and timing")
    r.add_argument("model", nargs="?", help="a .tflite or corpus-format .json model (default: the bundled demo)")
    r.add_argument("--backend", default="auto")
    r.add_argument("--repeat", type=int, default=10)
    r.add_argument("--input", action="append", default=[], help=".npy input, in the model's input order (repeat)")
    r.add_argument("--burst", action="store_true", help="execute through a burst")
    r.add_argument("--save-outputs", metavar="DIR", help="write each output as DIR/<index>.npy")
    r.set_defaults(func=_cmd_run)

    g = sub.add_parser("kernels", help="write a model's generated kernels and fusion groups")
    g.add_argument("model", help="a .tflite or corpus-format .json model")
    g.add_argument("--out", default="nngpu-kernels", help="output folder")
    g.add_argument("--dialect", choices=("opencl", "cuda"), default="opencl")
    g.add_argument("--no-fusion", action="store_true")
    g.set_defaults(func=_cmd_kernels)

    i = sub.add_parser("info", help="devices, capabilities and supported operations")
    i.add_argument("--backend", default="numpy")
    i.set_defaults(func=_cmd_info)

    args = p.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
