"""The `nngpu` command. Each subcommand is a module here with `add_parser(subparsers, common)`:
run (execute a model: outputs and benchmark-style timing), profile (per-op-type times), compare
(a .tflite model against TFLite, per output and per operator), cts (the conformance corpus),
kernels (a model's generated kernels), info (backends and capabilities), cache (the kernel
cache), serve (a device for other processes, on a Unix socket).

Every failure is one line on stderr and a non-zero exit: CLIError carries the message and the
code, anything unexpected is reported as an internal error (its traceback only with
--log-level debug), Ctrl-C exits 130 at once."""
from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import NoReturn

from .. import __version__
from .errors import CLIError

log = logging.getLogger("nngpu.cli")

LEVELS = ("debug", "info", "warning", "error")

# What `nngpu --help` tells a user (the docstring above is for whoever works on the commands).
DESCRIPTION = ("Run neural network models on nngpu, an Android NNAPI driver: execute and time a .tflite or "
               "NNAPI corpus model on the numpy, OpenCL or CUDA backend, profile it, compare it with TFLite, "
               "check the driver against "
               "the NNAPI conformance corpus, look at its generated kernels, its backends and kernel cache, or "
               "serve it to other processes.")
EPILOG = "`nngpu COMMAND --help` lists a command's options."


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line, like every other failure."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _common() -> argparse.ArgumentParser:
    """Options every subcommand takes (after its name)."""
    c = argparse.ArgumentParser(add_help=False)
    g = c.add_argument_group("output")
    g.add_argument("-v", "--verbose", action="store_true", help="show the driver's INFO logs (cts: every case)")
    g.add_argument("--log-level", choices=LEVELS, help="log level of the driver's logs (default: warning)")
    g.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    return c


def build_parser() -> argparse.ArgumentParser:
    from . import (cache_command, compare_command, cts_command, info_command, kernels_command, profile_command,
                   run_command, serve_command)

    p = _Parser(prog="nngpu", description=DESCRIPTION, epilog=EPILOG)
    p.add_argument("--version", action="version", version=f"nngpu {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=_Parser)
    common = _common()
    for module in (run_command, profile_command, compare_command, cts_command, kernels_command, info_command,
                   cache_command, serve_command):
        module.add_parser(sub, common)
    return p


def _configure(args: argparse.Namespace) -> None:
    from .. import progress

    level = args.log_level or ("info" if args.verbose else "warning")
    # The handler's own level, because the conformance runner lowers nngpu's logger levels to
    # collect failure reasons, and those records still reach the root handlers.
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(level.upper())
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level.upper(), handlers=[handler])
    progress.enable(sys.stderr.isatty() and not args.quiet)


def _interrupted() -> NoReturn:
    """Ctrl-C: say so and leave now. Workers (a kernel compile) may still be running; waiting
    for them is what made an interrupt take many seconds, and nothing they hold needs saving."""
    sys.stdout.flush()
    print("\nnngpu: interrupted", file=sys.stderr, flush=True)
    os._exit(130)


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    _configure(args)
    name = f"nngpu {args.command}"
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        _interrupted()
    except CLIError as e:
        print(f"{name}: {e}", file=sys.stderr)
        return e.code
    except BrokenPipeError:  # `nngpu info | head`
        sys.stderr.close()
        return 1
    except Exception as e:  # a bug: still one line, the traceback on request
        log.debug("traceback", exc_info=True)
        print(f"{name}: internal error: {type(e).__name__}: {e} (--log-level debug shows the traceback)",
              file=sys.stderr)
        return 1
