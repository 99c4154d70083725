"""CUDA graph replay (compiler/replay.py; needs a GPU, skips elsewhere): a plan's device runs
replayed from the graphs captured at prepare give exactly what step-by-step launching gives,
for new inputs at every execution, from host inputs and from IBuffers whose storage changes (a
new capture per storage)."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from nngpu.backends import cuda, device_backends
from nngpu.backends.base import DeviceValue
from nngpu.runtime.capture import split_runs
from nngpu.runtime.interpreter import GraphRunner
from nngpu.compiler.lower import trace_segments
from nngpu.compiler.lower import device_plan
from nngpu.driver.device import Device
from nngpu.json_models import build_model, load_cases
from nngpu.modelutil import as_model_1_3
from nngpu.backends.opencl import TARGET as OPENCL

from ..backends.test_opencl import plan_of
from ..ops.test_shape_functions import case_inputs
from .test_capture import CORPUS
from .test_fusion import chain_model
from .test_gemm import CASES

needs_gpu = pytest.mark.skipif(not cuda.available(), reason="CuPy sees no GPU")


def _graphs(plan) -> list[tuple]:
    """The keys (upload sources) of the graphs the plan's runs captured."""
    return [key for seg in plan._last for r in seg.replays.values() for key, g in r.graphs.items() if g is not None]


@needs_gpu
@pytest.mark.parametrize("name", [*CASES, "chain"])
def test_replay_matches_step_by_step(name):
    model, x = (chain_model(8, [4, 64, 64]), None) if name == "chain" else CASES[name]()
    plan = plan_of(Device("cuda"), model)
    assert plan.graphs
    shape = x.shape if x is not None else (4, 64, 64)
    rng = np.random.default_rng(7)
    for _ in range(3):
        value = rng.standard_normal(shape, dtype=np.float32)
        plan.graphs = True
        replayed = plan.execute([value])
        plan.graphs = False
        stepped = plan.execute([value])
        for a, b in zip(replayed, stepped):
            np.testing.assert_array_equal(a, b)
        np.testing.assert_allclose(replayed[0], plan.reference.run([value])[0], rtol=1e-4, atol=1e-4)
    assert _graphs(plan), "the plan's device runs should have been captured at prepare"


@needs_gpu
def test_an_ibuffer_input_recaptures_when_its_storage_changes():
    model, x = CASES["conv1x1"]()
    plan = plan_of(Device("cuda"), model)
    backend = plan.backend
    rng = np.random.default_rng(8)
    storages = [backend.alloc(x.nbytes), backend.alloc(x.nbytes)]
    for i in range(6):  # each storage twice in a row, then the other: replays and new captures
        value = rng.standard_normal(x.shape, dtype=np.float32)
        buf = storages[(i // 2) % 2]
        backend.upload(buf, value)
        got = plan.execute([DeviceValue(buf, x.shape, np.dtype(np.float32), backend)])
        np.testing.assert_allclose(got[0], plan.reference.run([value])[0], rtol=1e-4, atol=1e-4)
    from_ibuffers = [key for key in _graphs(plan) if any(source[0] == "device" for source in key)]
    assert len(from_ibuffers) == 2, "one graph per IBuffer storage"


# ---- the replay logic where CUDA is absent ---------------------------------------------------
# A stand-in for CUDA's stream capture on the real OpenCL device: `capture` keeps the bound calls
# and a replay issues them again in order, so keys, staging, recapture and the plan's use of them
# run with real kernels (graph launches themselves are the GPU check's).

needs_opencl = pytest.mark.skipif("opencl" not in device_backends(), reason="no OpenCL device here")
MIXED_CASES = 12    # corpus cases whose segments mix device runs (with downloads) and host steps


def recording_backend():
    from nngpu.backends.opencl import OpenCLBackend

    class RecordingOpenCL(OpenCLBackend):
        graphs = True
        replays = 0

        def capture(self, steps):
            calls = list(steps)

            def replay():
                self.replays += 1
                for call in calls:
                    call()
            return replay

        def pinned(self, nbytes):
            return np.empty(max(nbytes, 1), np.uint8)

        def stage_in(self, buf, staging, nbytes):
            if nbytes:  # read when the queue gets there: staging changes only after the next wait
                self.cl.enqueue_copy(self.queue, buf, staging[:nbytes], is_blocking=False)

        def stage_out(self, staging, buf, nbytes):
            if nbytes:
                self.cl.enqueue_copy(self.queue, staging[:nbytes], buf, is_blocking=False)

        def address(self, buf):
            return buf.int_ptr

    return RecordingOpenCL()


def _both_ways(plan, inputs) -> None:
    plan.graphs = True
    replayed = plan.execute(inputs)
    plan.graphs = False
    stepped = plan.execute(inputs)
    assert len(replayed) == len(stepped)
    for a, b in zip(replayed, stepped):
        np.testing.assert_array_equal(a, b)


def _mixed_cases() -> list:
    """Corpus cases with a device run that downloads next to a host step, one per run pattern."""
    picked, patterns = [], set()
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        for case in (c for c in load_cases(CORPUS) if not c.expect_failure):
            try:
                model = as_model_1_3(build_model(case))
                runner = GraphRunner(model)
                inputs = case_inputs(case, model)
                segments = trace_segments(runner, runner.trace(inputs), OPENCL)
            except Exception:
                continue
            runs = [split_runs(s.steps) for s in segments]
            pattern = tuple(tuple((r.host, bool(r.uploads), bool(r.downloads)) for r in rs) for rs in runs)
            if pattern in patterns or not any(r.downloads for rs in runs for r in rs) \
                    or not any(r.host for rs in runs for r in rs):
                continue
            patterns.add(pattern)
            picked.append((case.name, runner, inputs))
            if len(picked) == MIXED_CASES:
                break
    return picked


@needs_opencl
@pytest.mark.parametrize("name", [*CASES, "chain"])
def test_recorded_replay_matches_step_by_step(name):
    model, x = (chain_model(8, [4, 64, 64]), None) if name == "chain" else CASES[name]()
    backend = recording_backend()
    plan = device_plan(GraphRunner(as_model_1_3(model)), backend)
    assert _graphs(plan), "captured at prepare"
    rng = np.random.default_rng(9)
    for _ in range(3):
        _both_ways(plan, [rng.standard_normal(x.shape if x is not None else (4, 64, 64), dtype=np.float32)])
    assert plan.backend.replays == 3   # the plan's own queue's


@needs_opencl
def test_recorded_replay_of_runs_around_host_steps():
    cases = _mixed_cases()
    assert len(cases) >= 3, "the corpus should mix device runs and host steps in several ways"
    for name, runner, inputs in cases:
        backend = recording_backend()
        plan = device_plan(runner, backend)
        for _ in range(2):
            _both_ways(plan, inputs)
        assert plan.backend.replays >= 2, f"{name}: no run was replayed"


@needs_opencl
def test_recorded_replay_recaptures_for_a_new_ibuffer_storage():
    model, x = CASES["conv1x1"]()
    backend = recording_backend()
    plan = device_plan(GraphRunner(as_model_1_3(model)), backend)
    backend = plan.backend   # uploads on the plan's queue come before its kernels
    storages = [backend.alloc(x.nbytes), backend.alloc(x.nbytes)]
    rng = np.random.default_rng(10)
    for i in range(6):
        value = rng.standard_normal(x.shape, dtype=np.float32)
        buf = storages[(i // 2) % 2]
        backend.upload(buf, value)
        _both_ways(plan, [DeviceValue(buf, x.shape, np.dtype(np.float32), backend)])
    from_ibuffers = [key for key in _graphs(plan) if any(source[0] == "device" for source in key)]
    assert len(from_ibuffers) == 2, "one graph per IBuffer storage"
    assert backend.replays == 4, "each storage's first execution runs step by step, then replays"
