"""Latency of the five MediaPipe models, and the zoo's float MobileNet v2, MobileNet v3 small and
EfficientNet B0 where a generated zoo folder has them: TFLite (ai-edge-litert, 1 and 2 threads)
vs nngpu (sync, and burst when nngpu.burst imports) on every backend that constructs here.

    pytest bench/test_bench_tflite.py            # prints a nngpu/TFLite ratio table at the end
    NNGPU_BENCH_ROUNDS=20 pytest bench/...       # more rounds per nngpu measurement (default 10)

Inputs are the fixed-seed random images `nngpu run` uses. Models come from ci/fetch-models.sh;
the zoo's from NNGPU_ZOO_DIR (default $XDG_CACHE_HOME/nngpu/zoo: `ZOO_ARGS=--full-size bash
zoo/run.sh`), skipped when missing."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tflite", reason="the `tflite` flatbuffer package is not installed")
litert = pytest.importorskip("ai_edge_litert.interpreter", reason="ai-edge-litert is not installed")

from nngpu.tflite import load_tflite  # noqa: E402
from nngpu.tflite.models import MODELS  # noqa: E402
from nngpu.session import Session, random_inputs  # noqa: E402

from .common import mediapipe_model, show_summary, zoo_model  # noqa: E402

ROUNDS = int(os.environ.get("NNGPU_BENCH_ROUNDS", "10"))
WARMUP = 3   # runs before an nngpu measurement (the first compiles nothing, but caches are cold)
TFLITE_ROUNDS = 50
ZOO_MODELS = ("mobilenet_v2", "mobilenet_v3_small", "efficientnet_b0")   # float, full size
NAMES = sorted(MODELS) + [f"zoo:{n}" for n in ZOO_MODELS]


def _backends() -> list[str]:
    from nngpu.driver.device import Device

    names = ["numpy"]
    for name in ("opencl", "cuda"):
        try:
            Device(name)
            names.append(name)
        except Exception:
            pass
    return names


def _has_burst() -> bool:
    try:
        import nngpu.burst  # noqa: F401
    except ImportError:
        return False
    return True


BACKENDS = _backends()
MODES = ["sync"] + (["burst"] if _has_burst() else [])
RESULTS: dict[tuple[str, str], float] = {}  # (model, config) -> median seconds


@pytest.fixture(scope="module", autouse=True)
def ratio_table(request):
    yield
    if not RESULTS:
        return
    lines = ["", "nngpu / TFLite latency (median ms; ratio to TFLite with 1 thread | 2 threads):"]
    for name in NAMES:
        t1, t2 = RESULTS.get((name, "tflite-1")), RESULTS.get((name, "tflite-2"))
        if not t1 or not t2:
            continue
        lines.append(f"  {name}: tflite-1 {t1 * 1e3:.2f}, tflite-2 {t2 * 1e3:.2f}")
        for backend in BACKENDS:
            for mode in MODES:
                t = RESULTS.get((name, f"{backend}-{mode}"))
                if t:
                    lines.append(f"    {backend + '-' + mode:14s} {t * 1e3:9.2f}  = {t / t1:6.1f}x | {t / t2:6.1f}x")
    show_summary(request, lines)


def model_path(name: str) -> Path:
    """The file of NAMES' model `name` (a skip where it is missing)."""
    return zoo_model(name[4:]) if name.startswith("zoo:") else mediapipe_model(name)


def loaded(name: str) -> tuple:
    """(name, path, imported model, its fixed-seed inputs); a skip where the model is missing."""
    path = model_path(name)
    imported = load_tflite(path)
    return name, path, imported, random_inputs(imported.inputs, seed=0)


@pytest.fixture(scope="module", params=NAMES)
def model(request):
    return loaded(request.param)


def _record(benchmark, key) -> None:
    stats = getattr(benchmark, "stats", None)
    if stats is not None and getattr(stats, "stats", None) is not None:
        RESULTS[key] = stats.stats.median


def interpreter(path: Path, inputs: list, threads: int):
    """TFLite's interpreter of the model with `threads` threads, its inputs set."""
    it = litert.Interpreter(model_path=str(path), num_threads=threads)
    it.allocate_tensors()
    for d, a in zip(it.get_input_details(), inputs):
        it.set_tensor(d["index"], a)
    return it


@pytest.mark.parametrize("threads", [1, 2])
def test_tflite(benchmark, model, threads):
    name, path, _, inputs = model
    it = interpreter(path, inputs, threads)
    benchmark.group = name
    benchmark.extra_info["threads"] = threads
    benchmark.pedantic(it.invoke, rounds=TFLITE_ROUNDS, warmup_rounds=3)
    _record(benchmark, (name, f"tflite-{threads}"))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("backend", BACKENDS)
def test_nngpu(benchmark, model, backend, mode):
    name, _, imported, inputs = model
    with Session(imported, backend, burst=(mode == "burst")) as session:
        session.set_inputs(inputs)
        benchmark.group = name
        benchmark.extra_info.update(backend=backend, mode=mode, prepare_s=round(session.prepare_s, 3))
        benchmark.pedantic(session.execute, rounds=ROUNDS, warmup_rounds=WARMUP)
        assert all(np.isfinite(o).all() for o in session.output_arrays())
    _record(benchmark, (name, f"{backend}-{mode}"))
