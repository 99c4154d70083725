"""`nngpu profile MODEL`: where an execution's time goes, per op type, the way TFLite's
benchmark_model --enable_op_profiling reports it.

The model runs as `nngpu run` runs it (prepare, a first run, --warmup runs, --repeat runs) while
nngpu.profiling records; the op table covers the --repeat runs only, the prepare table the
prepare phases. A device plan synchronises after every step while recording, so the runs are
slower than `nngpu run` measures: the table compares steps, it is not a latency."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from .common import open_device, open_model, writable_file
from .errors import CLIError, missing_extra
from .run_command import add_execution_options, model_inputs, open_session, print_device, thread_limit, timed_runs

PLOT_LABEL = 48  # characters of a fused group's name kept on the chart's axis


def add_parser(sub, common) -> None:
    p = sub.add_parser("profile", parents=[common], help="per-op-type time table",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("model", help="a .tflite or corpus-format .json model")
    add_execution_options(p)
    p.add_argument("--plot", metavar="SVG", help="draw the time per op type as a bar chart (needs matplotlib)")
    p.add_argument("--trace", metavar="TRACE",
                   help="also write a Chrome / Perfetto trace of prepare and every run (ui.perfetto.dev)")
    p.set_defaults(func=profile)


def _pyplot() -> Any:
    """matplotlib.pyplot drawing to files, or a CLIError naming the extra."""
    try:
        import matplotlib
    except ImportError as e:
        raise missing_extra("--plot", "plot") from e
    matplotlib.use("Agg")  # no display needed
    import matplotlib.pyplot as plt

    return plt


def profile(args) -> int:
    from ..profiling import recording
    from ..session import ExecutionError

    plt = _pyplot() if args.plot else None  # a missing extra fails before the work starts
    plot_path = writable_file(args.plot, "--plot") if args.plot else None
    trace_path = writable_file(args.trace, "--trace") if args.trace else None
    device = open_device(args.backend)
    named = open_model(args.model, fallback=not args.no_fallback, device=device)
    inputs, origin = model_inputs(args, named)
    print(f"model: {named.description or Path(args.model).name} -> {named.operation_count} NNAPI operations; "
          f"inputs: {origin}")
    with thread_limit(args.threads), recording() as prof:
        with open_session(named, device, fallback=not args.no_fallback, model=args.model,
                          relaxed=args.relaxed) as session:
            print_device(session)
            print(f"placement: {session.placement}")
            try:
                _, steady = timed_runs(session, inputs, args)
            except ExecutionError as e:
                raise CLIError(str(e), 1) from e
    skip = 1 + args.warmup  # the first run and the warm-up runs are not in the table
    print(f"prepare {session.prepare_s * 1e3:.1f} ms")
    print(prof.format_prepare())
    print()
    mean_ms = sum(steady) / len(steady) / 1e3
    print(f"per op type over {args.repeat} runs after the first and {args.warmup} warm-up: "
          f"mean {mean_ms:.3f} ms per run while recording")
    print(prof.format_op_table(skip))
    if plot_path is not None:
        _plot(plt, prof.op_table(skip), plot_path, f"{named.description or Path(args.model).name} on "
                                                  f"{session.device.backend_name}")
        print(f"chart written to {plot_path}")
    if trace_path is not None:
        prof.write_chrome_trace(trace_path)
        print(f"trace written to {trace_path} (open it in ui.perfetto.dev or chrome://tracing)")
    return 0


def _plot(plt: Any, rows: list, path: Path, title: str) -> None:
    """A horizontal bar per row of the op table, the longest at the top."""
    rows = rows[::-1]
    labels = [(f"{r.name} ({r.kind})" if r.kind else r.name) for r in rows]
    labels = [s if len(s) <= PLOT_LABEL else s[:PLOT_LABEL - 1] + "…" for s in labels]
    fig, ax = plt.subplots(figsize=(9, 1.2 + 0.28 * len(rows)))
    ax.barh(range(len(rows)), [r.mean_us / 1e3 for r in rows], color=["0.6" if not r.kind else "C0" for r in rows])
    ax.set_yticks(range(len(rows)), labels, fontsize=8)
    ax.set_xlabel("ms per run")
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
