"""split_runs, the segmenting logic of CUDA graph capture: which steps form a capturable run
(kernel launches, GEMMs, transfers) and what ends one (a host step, the segment's end). On
hand-made step lists, and over the segments the corpus lowers to."""
from __future__ import annotations

import warnings
from itertools import islice
from pathlib import Path

import numpy as np
import pytest

from nngpu.runtime.capture import Run, split_runs
from nngpu.runtime.interpreter import GraphRunner
from nngpu.compiler.steps import GemmStep, HostStep, KernelStep, Transfer
from nngpu.compiler.lower import trace_segments
from nngpu.json_models import build_model, load_cases
from nngpu.modelutil import as_model_1_3
from nngpu.backends.cuda import TARGET as CUDA

from ..ops.test_shape_functions import case_inputs

CORPUS = Path(__file__).resolve().parents[1] / "data" / "nnapi-cts"
SAMPLE = 400  # corpus cases traced


def kernel(*args: int) -> KernelStep:
    return KernelStep(None, "cuda", list(args), [0])  # the kernel itself plays no part in the split


def host(op: int) -> HostStep:
    return HostStep(op, [1], [2], [None])


def test_device_steps_form_one_run():
    steps = [Transfer(0, True), kernel(0, 1), GemmStep([1, 2, 3], 4, 4, 4, [1]), kernel(3, 4), Transfer(4, False)]
    assert split_runs(steps) == [Run(0, 5, False, (0,), (4,))]


def test_a_host_step_ends_a_run_and_is_one_of_its_own():
    steps = [Transfer(0, True), kernel(0, 1), Transfer(1, False), host(7), host(8), Transfer(2, True), kernel(2, 3)]
    assert split_runs(steps) == [Run(0, 3, False, (0,), (1,)), Run(3, 4, True), Run(4, 5, True),
                                 Run(5, 7, False, (2,), ())]


def test_host_steps_only_and_no_steps():
    assert split_runs([host(1)]) == [Run(0, 1, True)]
    assert split_runs([]) == []


def test_a_foreign_step_is_refused():
    with pytest.raises(TypeError, match="step 1"):
        split_runs([kernel(0, 1), ("launch", None)])


def corpus_segments():
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        for case in islice((c for c in load_cases(CORPUS) if not c.expect_failure), SAMPLE):
            try:
                model = as_model_1_3(build_model(case))
                runner = GraphRunner(model)
                yield from trace_segments(runner, runner.trace(case_inputs(case, model)), CUDA)
            except Exception:
                continue  # a model the reference rejects lowers to nothing


def test_corpus_segments_split_into_runs_that_cover_them():
    mixed = 0
    for spec in corpus_segments():
        runs = split_runs(spec.steps)
        assert [r.start for r in runs[1:]] == [r.stop for r in runs[:-1]]
        assert (runs[0].start, runs[-1].stop) == (0, len(spec.steps)) if runs else not spec.steps
        for r, after in zip(runs, runs[1:]):
            assert r.host or after.host, "two device runs in a row should be one"
        for r in runs:
            steps = spec.steps[r.start:r.stop]
            if r.host:
                assert len(steps) == 1 and isinstance(steps[0], HostStep)
                continue
            assert not any(isinstance(s, HostStep) for s in steps)
            assert r.uploads == tuple(s.tensor for s in steps if isinstance(s, Transfer) and s.to_device)
            assert r.downloads == tuple(s.tensor for s in steps if isinstance(s, Transfer) and not s.to_device)
        mixed += any(r.host for r in runs) and any(not r.host for r in runs)
    assert mixed, "the sample should lower some segment to both host and device steps"
