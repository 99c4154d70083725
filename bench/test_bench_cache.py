"""Compilation caching: prepareModelFromCache against prepareModel on the five MediaPipe models,
on numpy and every device backend, in the same run. Each round starts from an empty kernel
disk cache (the `*.bin` files `nngpu cache clear` removes) and a fresh Device, so prepareModel
compiles every kernel and prepareModelFromCache has only the model cache to load them from.

    pytest bench/test_bench_cache.py             # prints a fromCache / prepareModel table at the end
    NNGPU_BENCH_ROUNDS=5 pytest bench/...        # rounds per measurement (default 2)"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

pytest.importorskip("tflite", reason="the `tflite` flatbuffer package is not installed")

from nngpu.backends import device_backends  # noqa: E402
from nngpu.backends.base import cache_dir  # noqa: E402
from nngpu.driver.callbacks import PreparedModelCallback  # noqa: E402
from nngpu.driver.device import Device  # noqa: E402
from nngpu.hal import (ErrorStatus, ExecutionPreference, Model, NativeHandle, OptionalTimePoint,  # noqa: E402
                       Priority)
from nngpu.tflite import load_tflite  # noqa: E402
from nngpu.tflite.models import MODELS  # noqa: E402

from .common import mediapipe_model, show_summary  # noqa: E402

ROUNDS = int(os.environ.get("NNGPU_BENCH_ROUNDS", "2"))
TOKEN = bytes(range(32))
RESULTS: dict[tuple[str, str, str], float] = {}  # (model, backend, how) -> median seconds


@pytest.fixture(scope="module", autouse=True)
def ratio_table(request):
    yield
    lines = ["", "prepareModelFromCache / prepareModel with an empty kernel cache (median s):"]
    for (name, backend, how), t in sorted(RESULTS.items()):
        cold = RESULTS.get((name, backend, "prepareModel"))
        if how == "fromCache" and cold:
            lines.append(f"  {name:28s} {backend:7s} prepareModel {cold:7.3f}  fromCache {t:7.3f}  = {cold / t:6.1f}x faster")
    show_summary(request, lines)


@pytest.fixture(scope="module", params=sorted(MODELS))
def model(request):
    return request.param, load_tflite(mediapipe_model(request.param)).model


@pytest.fixture
def cache_files(tmp_path_factory, monkeypatch):
    """A private kernel cache (with its key) and the two cache files."""
    root = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("NNGPU_CACHE_DIR", str(root / "kernels"))
    paths = [root / "model", root / "data"]
    opened: list[int] = []

    def handles():
        fds = [os.open(p, os.O_RDWR | os.O_CREAT, 0o600) for p in paths]
        opened.extend(fds)
        return [NativeHandle([fds[0]])], [NativeHandle([fds[1]])]

    yield handles
    for fd in opened:
        os.close(fd)


def _fresh(backend: str) -> Device:
    for binary in Path(cache_dir()).glob("*.bin"):
        binary.unlink()
    return Device(backend)


def _prepare(device, model, handles):
    cb = PreparedModelCallback()
    if isinstance(model, Model):
        device.prepareModel_1_2(model, ExecutionPreference.FAST_SINGLE_ANSWER, *handles, TOKEN, cb)
    else:
        device.prepareModel_1_3(model, ExecutionPreference.FAST_SINGLE_ANSWER, Priority.MEDIUM, OptionalTimePoint(),
                                *handles, TOKEN, cb)
    assert cb.get(600)[0] == ErrorStatus.NONE


def _from_cache(device, handles):
    cb = PreparedModelCallback()
    device.prepareModelFromCache(*handles, TOKEN, cb)
    status, prepared = cb.get(600)
    assert status == ErrorStatus.NONE
    programs = getattr(prepared.executor, "programs", None)
    assert programs is None or programs.built == 0, "a kernel was compiled"


def _record(benchmark, key) -> None:
    stats = getattr(benchmark, "stats", None)
    if stats is not None and getattr(stats, "stats", None) is not None:
        RESULTS[key] = stats.stats.median


@pytest.mark.parametrize("backend", ["numpy", *device_backends()])
def test_prepare_model(benchmark, model, backend, cache_files):
    name, m = model
    benchmark.group = f"{name} {backend}"
    benchmark.pedantic(_prepare, setup=lambda: ((_fresh(backend), m, cache_files()), {}), rounds=ROUNDS)
    _record(benchmark, (name, backend, "prepareModel"))


@pytest.mark.parametrize("backend", ["numpy", *device_backends()])
def test_prepare_model_from_cache(benchmark, model, backend, cache_files):
    name, m = model
    _prepare(_fresh(backend), m, cache_files())
    benchmark.group = f"{name} {backend}"
    benchmark.pedantic(_from_cache, setup=lambda: ((_fresh(backend), cache_files()), {}), rounds=ROUNDS)
    _record(benchmark, (name, backend, "fromCache"))
