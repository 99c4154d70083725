"""`nngpu run [MODEL]`: prepare a model, execute it, print its outputs and timings the way
TFLite's benchmark_model reports them: prepare, the first run, then --repeat steady-state runs
after --warmup discarded ones.

MODEL is a .tflite file or a corpus-format .json / .json.gz file (its first case, whose inputs
are the default); without one, the bundled demo CNN. Other models get random inputs (seed 0)
unless --input gives them. Operators of a .tflite model the driver cannot run run on TFLite's own
kernels between driver partitions (the placement line says where each ran) unless --no-fallback."""
from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
import time
from pathlib import Path

from .common import non_negative, open_device, open_model, positive, writable_dir, writable_file
from .errors import CLIError
from .inputs import read_inputs


def add_parser(sub, common) -> None:
    r = sub.add_parser("run", parents=[common], help="execute a model: outputs and timing",
                       description=__doc__.split("\n\n")[0])
    r.add_argument("model", nargs="?", help="a .tflite or corpus-format .json model (default: the bundled demo)")
    add_execution_options(r)
    r.add_argument("--burst", action="store_true", help="execute through a burst (fast message queues)")
    r.add_argument("--save-outputs", metavar="DIR", help="write each output as DIR/<tensor name>.npy")
    r.add_argument("--json", metavar="FILE",
                   help="write prepare time, first run, percentiles, placement and peak memory as JSON")
    r.add_argument("--profile", metavar="TRACE", help="write a Chrome / Perfetto trace (chrome://tracing, ui.perfetto.dev)")
    r.set_defaults(func=run)


def add_execution_options(p: argparse.ArgumentParser) -> None:
    """The options `run` and `profile` share."""
    p.add_argument("--backend", default="auto", help="numpy, opencl, cuda or auto (default)")
    p.add_argument("--repeat", type=positive, default=10, help="timed steady-state runs (default 10)")
    p.add_argument("--warmup", type=non_negative, default=1, help="runs after the first one, not timed (default 1)")
    p.add_argument("--input", action="append", default=[], metavar="FILE",
                   help="an input: X.npy (in model input order, repeat), NAME=X.npy, or an .npz by tensor name")
    p.add_argument("--cast", action="store_true", help="cast --input arrays to the model's dtypes instead of refusing")
    p.add_argument("--threads", type=positive, help="threads for BLAS and host work (default: the libraries' own)")
    p.add_argument("--relaxed", action="store_true",
                   help="let float32 be computed at float16 range and precision (relaxComputationFloat32toFloat16); "
                        "a line says what the backend makes of it")
    p.add_argument("--no-fallback", action="store_true",
                   help="refuse a .tflite model with operators the driver cannot run, instead of running them "
                        "on TFLite's kernels")


def thread_limit(n: int | None):
    """A context that limits BLAS / OpenMP pools to n threads (none: unchanged)."""
    if n is None:
        return contextlib.nullcontext()
    from threadpoolctl import threadpool_limits

    return threadpool_limits(limits=n)


def summarize(arr) -> str:
    import numpy as np

    flat = arr.reshape(-1)
    if flat.size == 0:
        return f"shape {list(arr.shape)} {arr.dtype}, empty"
    head = np.array2string(flat[:6], precision=5, separator=", ", max_line_width=10**6)
    num = flat.astype(np.float64)
    return (f"shape {list(arr.shape)} {arr.dtype}, min {num.min():.6g} max {num.max():.6g} "
            f"mean {num.mean():.6g}, first {head}")


def _peak_rss_mb() -> float:
    """This process's peak resident memory so far, in MiB (Linux reports ru_maxrss in KiB)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def model_inputs(args, named) -> tuple[list, str]:
    """The inputs to run with and where they come from."""
    from ..session import random_inputs

    if args.input:
        return read_inputs(args.input, named, args.cast), "--input"
    if named.example_inputs is not None:
        return named.example_inputs, "the case's own"
    return random_inputs(named.inputs, seed=0), "random, seed 0"


def _file_name(name: str, taken: set[str]) -> str:
    stem = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "output"
    candidate, k = stem, 1
    while candidate in taken:
        k += 1
        candidate = f"{stem}_{k}"
    taken.add(candidate)
    return candidate + ".npy"


def _percentiles(latencies_us: list[float]) -> dict[str, float]:
    import numpy as np

    lat = np.asarray(latencies_us) / 1e3
    p50, p90, p99 = np.percentile(lat, [50, 90, 99])
    return {"count": len(lat), "p50_ms": p50, "p90_ms": p90, "p99_ms": p99, "min_ms": lat.min(),
            "mean_ms": lat.mean()}


def timed_runs(session, inputs, args) -> tuple[float, list[float]]:
    """(first run in µs, the steady-state runs in µs): one run, --warmup untimed, --repeat timed."""
    from ..hal.types import MeasureTiming

    session.set_inputs(inputs)
    t = time.perf_counter_ns()
    session.execute(MeasureTiming.NO)
    first = (time.perf_counter_ns() - t) / 1e3
    for _ in range(args.warmup):
        session.execute(MeasureTiming.NO)
    steady = []
    for _ in range(args.repeat):
        t = time.perf_counter_ns()
        session.execute(MeasureTiming.NO)
        steady.append((time.perf_counter_ns() - t) / 1e3)
    return first, steady


def open_session(named, device, burst: bool = False, fallback: bool = True, model: str | None = None,
                 relaxed: bool = False):
    """A Session on `device`, failures as CLIError (naming `model`, the path given); `relaxed`:
    the model prepared with relaxComputationFloat32toFloat16 set."""
    from ..session import ExecutionError, Session
    from ..tflite.errors import TFLiteImportError

    try:
        session = Session(named, device, burst=burst, fallback=fallback, relaxed=relaxed)
    except ExecutionError as e:
        raise CLIError(str(e), 1) from e
    except TFLiteImportError as e:  # a host partition TFLite cannot load
        raise CLIError(f"{Path(model).name if model else 'model'}: {e}") from e
    except ImportError as e:
        raise CLIError(f"--burst needs nngpu.burst, which cannot be imported: {e}", 1) from e
    except Exception as e:  # nngpu.burst.BurstError: configureExecutionBurst refused
        raise CLIError(f"cannot set up the execution: {type(e).__name__}: {e}", 1) from e
    return session


def print_device(session, burst: bool = False) -> None:
    """The device line, and for a relaxed session what the backend computes in float16."""
    print(f"device: {session.device.getVersionString()[1]}{'; burst' if burst else ''}")
    if session.relaxed:
        print(f"relaxed: {session.device.backend.relaxed_precision()}")


def run(args) -> int:
    from ..session import ExecutionError

    json_path = writable_file(args.json, "--json") if args.json else None
    trace_path = writable_file(args.profile, "--profile") if args.profile else None
    out_dir = writable_dir(args.save_outputs, "--save-outputs") if args.save_outputs else None
    device = open_device(args.backend)
    named = open_model(args.model, fallback=not args.no_fallback, device=device)
    inputs, origin = model_inputs(args, named)
    print(f"model: {named.description or Path(args.model or 'demo').name} -> {named.operation_count} NNAPI operations")
    for w in named.warnings:
        print(f"warning: {w}", file=sys.stderr)
    for t, a in zip(named.inputs, inputs):
        print(f"input {t.name}: {'no value' if a is None else summarize(a)} ({origin})")
    recording = contextlib.nullcontext()
    if trace_path is not None:
        from ..profiling import recording as start_recording

        recording = start_recording()
    with thread_limit(args.threads), recording as profile:
        with open_session(named, device, args.burst, not args.no_fallback, args.model, args.relaxed) as session:
            print_device(session, args.burst)
            try:
                first, steady = timed_runs(session, inputs, args)
            except ExecutionError as e:
                raise CLIError(str(e), 1) from e
            outputs = session.output_arrays()
            placement = session.device_placement()
            launches = session.device_launches()
    for t, a in zip(named.outputs, outputs):
        print(f"output {t.name}: {summarize(a)}")
    stats = _percentiles(steady)
    print(f"prepare {session.prepare_s * 1e3:.1f} ms; first run {first / 1e3:.3f} ms")
    print(f"steady state over {stats['count']} runs after {args.warmup} warm-up (ms): p50 {stats['p50_ms']:.3f}  "
          f"p90 {stats['p90_ms']:.3f}  p99 {stats['p99_ms']:.3f}  min {stats['min_ms']:.3f}  mean {stats['mean_ms']:.3f}")
    print(f"placement: {session.placement}")
    print(f"device plans: {placement[0]} operations in device kernels, {placement[1]} on the host; "
          f"{launches} device launches (kernels and GEMMs) a run")
    if out_dir is not None:
        import numpy as np

        taken: set[str] = set()
        for t, a in zip(named.outputs, outputs):
            np.save(out_dir / _file_name(t.name, taken), a)
        print(f"saved {len(outputs)} outputs to {out_dir}/<tensor name>.npy")
    if trace_path is not None:
        profile.write_chrome_trace(trace_path)
        print(f"trace written to {trace_path} (open it in ui.perfetto.dev or chrome://tracing)")
    if json_path is not None:
        report = {"model": str(args.model or "demo"), "backend": session.device.backend_name,
                  "device": session.device.getVersionString()[1], "burst": bool(args.burst),
                  "relaxed": bool(args.relaxed),
                  "threads": args.threads, "prepare_ms": session.prepare_s * 1e3, "first_run_ms": first / 1e3,
                  "warmup_runs": args.warmup, "steady": stats,
                  "placement": {"device_operations": placement[0], "host_operations": placement[1],
                                "launches_per_run": launches, "partitions": session.placement},
                  "outputs": {t.name: list(a.shape) for t, a in zip(named.outputs, outputs)},
                  "peak_rss_mb": _peak_rss_mb()}
        json_path.write_text(json.dumps(report, indent=2, default=float) + "\n")
    return 0
