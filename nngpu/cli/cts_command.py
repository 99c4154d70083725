"""`nngpu cts [DIR]`: run the NNAPI conformance corpus on a backend through the chosen paths and
print a per-operation table; the exit status is 0 only when something ran and nothing failed."""
from __future__ import annotations

import json
import sys
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

from .common import open_device, writable_file
from .errors import CLIError
from .interrupt import noted_interrupts

if TYPE_CHECKING:
    from ..hal.interfaces import IDevice

CORPUS_HELP = ("the corpus is the NNAPI generated conformance tests in the nngpu format: give its folder as DIR "
               "or in $NNGPU_CTS_DIR; a source checkout has it in tests/data/nnapi-cts (a wheel does not ship it)")


def add_parser(sub, common) -> None:
    from ..cts.aidl_face import PATHS as AIDL_PATHS
    from ..cts.runner import PATHS

    c = sub.add_parser("cts", parents=[common], help="run the NNAPI conformance corpus",
                       description=__doc__.split("\n\n")[0])
    c.add_argument("dir", nargs="?", help="corpus folder (default: $NNGPU_CTS_DIR, ../shared/nnapi-cts or the checkout's copy)")
    c.add_argument("--backend", default="numpy", help="numpy (default), opencl, cuda or auto")
    c.add_argument("--hal", choices=("hidl", "aidl"), default="hidl",
                   help="the HAL face the cases go through: hidl (1.0-1.3, default) or aidl (versions 1-4)")
    c.add_argument("--path", default="sync",
                   help=f"hidl: {', '.join(PATHS)} (fenced: each case as a chain of two executeFenced calls, the "
                        f"second waiting on the first's fence); aidl: {', '.join(AIDL_PATHS)} (reusable: each case "
                        "twice on one IExecution); comma-separated, or all")
    c.add_argument("--timing", action="store_true", help="measure timing (MeasureTiming::YES)")
    c.add_argument("-k", help="only cases whose name contains one of these comma-separated strings")
    c.add_argument("--version", help="only these corpus folders, e.g. V1_0,V1_1")
    c.add_argument("--json", metavar="FILE", help="write one JSON record per case and path, each as it is judged")
    c.add_argument("--service", action="store_true",
                   help="run the cases through a spawned `nngpu serve --backend B` (nngpu.connect) on a private socket")
    c.set_defaults(func=run)


def _corpus(arg: str | None) -> Path:
    from ..json_models import default_corpus_dir

    if arg:
        root = Path(arg)
        if not root.is_dir():
            raise CLIError(f"{arg}: no such folder; {CORPUS_HELP}")
        return root
    root = default_corpus_dir()
    if root is None:
        raise CLIError(f"no corpus found; {CORPUS_HELP}")
    return root


@contextmanager
def _device_source(args) -> Iterator[tuple[IDevice, str, Callable[[], str | None]]]:
    """(the device, its backend's name, why it can no longer serve or None): this process's
    Device, or with --service a spawned `nngpu serve`, stopped when the run ends however it ends."""
    if not args.service:
        device = open_device(args.backend)
        if args.hal == "aidl":
            from ..aidl import AidlDevice

            yield AidlDevice(device), device.backend_name, lambda: None
            return
        yield device, device.backend_name, lambda: None
        return
    from ..cts.served import ServiceError, served_device

    try:
        with served_device(args.backend) as served:
            if args.hal == "aidl":
                from ..aidl import AidlDevice

                yield AidlDevice(served.device), served.backend_name, served.gone
                return
            yield served.device, served.backend_name, served.gone
    except ServiceError as e:
        raise CLIError(str(e), 1) from e


def run(args) -> int:
    from .. import progress
    from ..cts.aidl_face import AidlFace
    from ..cts.runner import HidlFace, case_records, filter_cases, run_case, summarize
    from ..hal.types import MeasureTiming
    from ..json_models import load_cases

    face = AidlFace if args.hal == "aidl" else HidlFace
    paths = face.paths if args.path == "all" else tuple(p for p in args.path.split(",") if p)
    bad = [p for p in paths if p not in face.paths]
    if bad or not paths:
        raise CLIError(f"--path: unknown path {bad[0] if bad else args.path!r} for --hal {args.hal}; "
                       f"choose from {', '.join(face.paths)} or all")
    json_file = writable_file(args.json, "--json") if args.json else None
    root = _corpus(args.dir)
    versions = tuple(args.version.split(",")) if args.version else None
    try:
        cases = filter_cases(load_cases(root, versions), args.k)
    except (OSError, ValueError, KeyError) as e:
        raise CLIError(f"{root}: cannot read the corpus: {type(e).__name__}: {e}") from e
    if not cases:
        raise CLIError(f"no case in {root} matches" + (f" -k {args.k}" if args.k else "")
                       + (f" --version {args.version}" if args.version else ""))
    measure = MeasureTiming.YES if args.timing else MeasureTiming.NO
    records = []
    t0 = time.perf_counter()
    stream = open(json_file, "w") if json_file is not None else nullcontext()
    with stream as out, _device_source(args) as (device, backend, gone), noted_interrupts() as check_interrupt:
        with progress.bar(len(cases), f"cts {backend}" + (" (service)" if args.service else ""), "case") as bar:
            for case in cases:
                check_interrupt()
                reason = gone()  # a dead service fails the cases left at once, with why
                recs = case_records(case, backend, paths, "failed", reason) if reason else \
                    run_case(device, backend, case, paths, measure, face)
                for rec in recs:
                    records.append(rec)
                    if out is not None:   # a line per record as it comes: a run cut short keeps its results
                        out.write(json.dumps(rec.as_json()) + "\n")
                        out.flush()
                    if args.verbose or rec.result == "failed":
                        print(f"{rec.result.upper():7s} {rec.path:6s} {rec.version}/{rec.name}: {rec.detail}",
                              flush=True)
                bar.update(1)
    from ..ops.registry import REGISTRY

    table, totals = summarize(records, [] if args.k or args.version else [t.name for t in REGISTRY],
                              placement_known=not args.service)
    skipped = [r for r in records if r.result == "skipped"]
    print(table)
    if skipped:
        print(f"skipped ({len(skipped)}):")
        for r in skipped:
            print(f"  {r.path:6s} {r.version}/{r.name}: {r.detail}")
    print(f"wall time {time.perf_counter() - t0:.1f} s over {len(cases)} cases")
    print(f"{totals['passed']} passed, {totals['failed']} failed, {totals['skipped']} skipped")
    sys.stdout.flush()
    return 0 if totals["failed"] == 0 and totals["passed"] > 0 else 1
