"""Progress reporting: off unless turned on; prepare reports every kernel it compiles, in
translation units of the backend's size."""
from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

import nngpu
from nngpu import progress
from nngpu.backends import device_backends
from nngpu.session import Session
from nngpu.backends.opencl import TARGET as OPENCL

DEMO = Path(nngpu.__file__).resolve().parent / "data" / "demo_cnn.json"


def test_off_by_default_and_silent(capsys):
    assert not progress.enabled()
    with progress.bar(10, "work") as bar:
        bar.update(10)
    assert capsys.readouterr().err == ""


def _record_bars(monkeypatch) -> dict[str, list[list[int]]]:
    """Bars on, each recorded by description as [total, update, update, ...]."""
    bars: dict[str, list[list[int]]] = {}

    @contextlib.contextmanager
    def recording_bar(total, desc, unit="it"):
        done = [total]
        bars.setdefault(desc.split()[0], []).append(done)

        class Bar:
            def update(self, n=1):
                done.append(n)

        yield Bar()

    monkeypatch.setattr(progress, "bar", recording_bar)
    monkeypatch.setattr(progress, "_enabled", True)
    return bars


@pytest.mark.parametrize("backend", device_backends())
def test_prepare_reports_each_kernel_and_the_first_run_each_step(backend, monkeypatch, tmp_path):
    monkeypatch.setenv("NNGPU_CACHE_DIR", str(tmp_path))
    recorded = _record_bars(monkeypatch)
    with Session(DEMO, backend) as s:
        segments = s.prepared.executor._last
        bars = recorded.pop("compiling")
        s.run(s.named.example_inputs)
        s.run(s.named.example_inputs)
    steps = sum(len(seg.runners) for seg in segments)
    assert recorded == {"first": [[steps] + [1] * steps]}  # the first run only, step by step
    kernels = sum(seg.spec.kernel_count for seg in segments)   # generated ones and templates
    assert kernels > 0
    assert sum(b[0] for b in bars) == kernels          # the kernels announced
    assert all(sum(b[1:]) == b[0] for b in bars)       # and every kernel reported done
    per_unit = s.device.backend.kernels_per_unit
    if per_unit:
        assert all(n <= per_unit for b in bars for n in b[1:])
    # compiled into the cache it was given, unless the device's compiler keeps its own (PoCL)
    assert bool(list(tmp_path.glob("*.bin"))) != s.device.backend.compiler_caches


def test_units_split_a_segment():
    from nngpu.runtime.interpreter import GraphRunner
    from nngpu.compiler.lower import trace_segments
    from nngpu.json_models import build_model, case_inputs, load_file
    from nngpu.modelutil import as_model_1_3

    case = load_file(DEMO)[0]
    runner = GraphRunner(as_model_1_3(build_model(case)))
    spec = trace_segments(runner, runner.trace(case_inputs(case)), OPENCL, False)[0]
    names = [k.name for k in spec.kernels]
    assert len(names) >= 3
    one = spec.units()
    assert len(one) == 1 and one[0][1] == names
    split = spec.units(2)
    assert [n for _, ns in split for n in ns] == names and all(len(ns) <= 2 for _, ns in split)
    assert all(f" {n}(" in src for src, ns in split for n in ns)
