"""Each int8 operation the importer maps, against TFLite's reference kernels (BUILTIN_REF) on
identical inputs, over seeded draws of shapes, scales, zero points and data (int8_models.py).

Where NNAPI and TFLite define the same arithmetic the outputs are identical (0 steps). Where they
differ, nngpu keeps NNAPI's semantics (the conformance corpus fixes them) and the difference is at
most 1 step; STEPS names those operations and the README's table gives the reason."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tflite", reason="the `tflite` flatbuffer package is not installed")

from nngpu.backends import device_backends  # noqa: E402
from nngpu.tflite import import_tflite  # noqa: E402

from .int8_models import BUILDERS  # noqa: E402
from .tfl_util import run_nngpu, run_reference  # noqa: E402

SEEDS = 24
# Steps of difference allowed where NNAPI's arithmetic is not TFLite's (README: "int8 against
# TFLite's reference kernels"); every other operation must match exactly.
STEPS = {"MEAN": 1}


def _steps(op: str, seed: int, backend: str) -> int:
    data, inputs = BUILDERS[op](np.random.default_rng([seed, sum(op.encode())]))
    ref = run_reference(data, inputs, reference_kernels=True)
    got = run_nngpu(import_tflite(data), inputs, backend)
    assert [r.dtype for r in ref] == [g.dtype for g in got] and [r.shape for r in ref] == [g.shape for g in got]
    return max(int(np.abs(r.astype(np.int64) - g.astype(np.int64)).max(initial=0)) for r, g in zip(ref, got))


@pytest.mark.parametrize("op", BUILDERS)
def test_int8_operation_against_tflite_reference_kernels(op):
    worst = max(_steps(op, seed, "numpy") for seed in range(SEEDS))
    assert worst <= STEPS.get(op, 0), f"{op}: {worst} steps from TFLite's reference kernels"


@pytest.mark.parametrize("backend", device_backends())
@pytest.mark.parametrize("op", BUILDERS)
def test_device_backends_give_the_same_int8_steps(op, backend):
    """The device kernels are bit-exact with numpy, so they keep numpy's distance from TFLite."""
    for seed in range(4):
        assert _steps(op, seed, backend) <= STEPS.get(op, 0)


def test_the_allowance_is_needed():
    """MEAN's allowance is not slack: some draws do differ by one step."""
    assert any(_steps("MEAN", seed, "numpy") == 1 for seed in range(SEEDS))
