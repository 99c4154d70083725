"""`nngpu cache build`: the CUDA kernels of models or of a corpus, compiled ahead into the
kernel cache (see nngpu/driver/prebuild.py)."""
from __future__ import annotations

import sys
import time
from pathlib import Path

from .common import open_model
from .errors import CLIError


def _named_units(named) -> list[str]:
    """The units of a loaded model: the whole model's, or each driver partition's (at zeros:
    their inputs come from the partitions before them)."""
    import numpy as np

    from ..driver.prebuild import model_units
    from ..session import random_inputs

    if named.model is not None:
        inputs = named.example_inputs if named.example_inputs is not None else random_inputs(named.inputs, seed=0)
        return model_units(named.model, inputs)
    units = []
    for part in named.plan.parts:
        if part.imported is not None:
            zeros = [np.zeros([d or 1 for d in t.shape], t.dtype) for t in part.imported.inputs]
            units += model_units(part.imported.model, zeros)
    return units


def _corpus_units(root: Path, pattern: str | None) -> tuple[list[str], int, list[str]]:
    """(the units of every case, the cases, the cases the reference cannot run, with why; cases
    built to fail are not tried)."""
    from ..cts.runner import filter_cases
    from ..driver.prebuild import model_units
    from ..json_models import build_model, case_inputs, load_cases

    try:
        cases = filter_cases(load_cases(root), pattern)
    except (OSError, ValueError, KeyError) as e:
        raise CLIError(f"{root}: cannot read the corpus: {type(e).__name__}: {e}") from e
    if not cases:
        raise CLIError(f"no case in {root} matches" + (f" -k {pattern}" if pattern else ""))
    units, refused = [], []
    for case in cases:
        if case.expect_failure:
            continue
        try:
            units += model_units(build_model(case, not case.needs_1_3()), case_inputs(case))
        except Exception as e:  # the reference refuses it: said, and the rest goes on
            refused.append(f"{case.version}/{case.name}: {type(e).__name__}: {e}")
    return units, len(cases), refused


def build(args) -> int:
    from ..backends.base import cache_dir
    from ..driver.prebuild import Prebuilt, arch_problem, prebuild

    if args.backend != "cuda":
        raise CLIError(f"--backend {args.backend}: only cuda kernels are built ahead (OpenCL binaries are the "
                       "device driver's own: a first run on the device fills the cache)")
    if not args.models and not args.corpus:
        raise CLIError("nngpu cache build needs MODEL paths or --corpus DIR")
    if args.k and not args.corpus:
        raise CLIError("-k selects corpus cases: it needs --corpus DIR")
    if args.jobs < 1:
        raise CLIError(f"--jobs {args.jobs}: at least 1")
    problem = arch_problem(args.arch)
    if problem is not None:
        raise CLIError(problem)
    t0, total = time.perf_counter(), Prebuilt()
    print(f"kernel cache: {cache_dir()}; CUDA {args.arch}")
    for path in args.models:
        done = prebuild(_named_units(open_model(path)), args.arch, args.jobs)
        print(f"{Path(path).name}: units {done.built} compiled, {done.cached} already cached")
        total += done
    if args.corpus:
        root = Path(args.corpus)
        if not root.is_dir():
            raise CLIError(f"--corpus {root}: no such folder")
        units, cases, refused = _corpus_units(root, args.k)
        done = prebuild(units, args.arch, args.jobs)
        for reason in refused:
            print(f"warning: the reference cannot run {reason}; its kernels are not built", file=sys.stderr)
        print(f"corpus {root}: {cases} cases; units {done.built} compiled, {done.cached} already cached")
        total += done
    print(f"{total.built} compiled, {total.cached} already cached, in {time.perf_counter() - t0:.1f} s")
    return 0
