"""The int8 zoo models on the numpy plan (the CPU default) against TFLite with one thread, on
the same fixed-seed inputs; the ratio table prints at the end.

    pytest bench/test_bench_int8_numpy.py

The committed (reduced) models always run; the int8 models of a generated zoo folder join them
(NNGPU_ZOO_DIR, default $XDG_CACHE_HOME/nngpu/zoo; `ZOO_ARGS=--full-size bash zoo/run.sh`)."""
from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("tflite", reason="the `tflite` flatbuffer package is not installed")
litert = pytest.importorskip("ai_edge_litert.interpreter", reason="ai-edge-litert is not installed")

from nngpu.session import Session, random_inputs  # noqa: E402

from .common import ZOO_DIR, show_summary  # noqa: E402

ZOO = Path(__file__).resolve().parents[1] / "tests" / "data" / "zoo"
# name -> file: the committed models, then the generated folder's (named "zoo:NAME").
PATHS = {p.stem: p for p in sorted(ZOO.glob("*int8*.tflite"))}
PATHS.update({f"zoo:{p.stem}": p for p in sorted(ZOO_DIR.glob("*int8*.tflite"))})
MODELS = list(PATHS)
RESULTS: dict[tuple[str, str], float] = {}


@pytest.fixture(scope="module", autouse=True)
def ratio_table(request):
    yield
    lines = ["", "int8 on numpy / TFLite with 1 thread (median ms):"]
    for name in MODELS:
        t, n = RESULTS.get((name, "tflite-1")), RESULTS.get((name, "numpy"))
        if t and n:
            lines.append(f"  {name:30s} tflite-1 {t * 1e3:7.2f}  numpy {n * 1e3:8.2f}  = {n / t:6.1f}x")
    show_summary(request, lines)


def _record(benchmark, key) -> None:
    stats = getattr(benchmark, "stats", None)
    if stats is not None and getattr(stats, "stats", None) is not None:
        RESULTS[key] = stats.stats.median


@pytest.fixture(scope="module", params=MODELS)
def model(request):
    path = PATHS[request.param]
    with Session(str(path), "numpy") as s:
        inputs = random_inputs(s.inputs, seed=0)
    return request.param, path, inputs


def test_tflite_one_thread(benchmark, model):
    name, path, inputs = model
    it = litert.Interpreter(model_path=str(path), num_threads=1)
    it.allocate_tensors()
    for d, a in zip(it.get_input_details(), inputs):
        it.set_tensor(d["index"], a)
    benchmark.group = name
    benchmark.pedantic(it.invoke, rounds=50, warmup_rounds=3)
    _record(benchmark, (name, "tflite-1"))


def test_numpy_plan(benchmark, model):
    name, path, inputs = model
    with Session(str(path), "numpy") as session:
        session.set_inputs(inputs)
        benchmark.group = name
        benchmark.pedantic(session.execute, rounds=10, warmup_rounds=1)
    _record(benchmark, (name, "numpy"))
