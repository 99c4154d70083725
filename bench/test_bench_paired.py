"""nngpu against TFLite in alternating blocks: the ratio at equal threads (TFLite with as many
threads as this process may use, the device backend as it schedules itself) measured in the same
seconds. On a shared machine the two sides of test_bench_tflite.py, measured minutes apart,
each move 20-40% (stop 44: TFLite's own medians 0.95-1.17 ms on MobileNet v3 small); here each
block of TFLite runs is followed by a block of nngpu runs, the first runs of a block (its caches
warming again after the other's) are not counted, and the ratio is the median over the blocks
of the two blocks' medians, with the lowest and highest.

    pytest bench/test_bench_paired.py                 # prints the paired ratio table at the end
    NNGPU_BENCH_BLOCKS=16 pytest bench/test_bench_paired.py

The models are test_bench_tflite.py's (the MediaPipe models, and the zoo's float ones where a
generated zoo folder has them)."""
from __future__ import annotations

import os
import statistics
import time

import pytest

pytest.importorskip("tflite", reason="the `tflite` flatbuffer package is not installed")
pytest.importorskip("ai_edge_litert.interpreter", reason="ai-edge-litert is not installed")

from nngpu.session import Session  # noqa: E402

from .common import show_summary  # noqa: E402
from .test_bench_tflite import BACKENDS, NAMES, interpreter, loaded  # noqa: E402

BLOCKS = int(os.environ.get("NNGPU_BENCH_BLOCKS", "8"))
RUNS = 12       # runs a block
SETTLE = 2      # the first runs of a block, not counted
THREADS = len(os.sched_getaffinity(0))
DEVICES = [b for b in BACKENDS if b != "numpy"]
PAIRED: dict[tuple[str, str], tuple[float, float, list[float]]] = {}   # -> TFLite s, nngpu s, block ratios


@pytest.fixture(scope="module", params=NAMES)
def model(request):
    return loaded(request.param)


@pytest.fixture(scope="module", autouse=True)
def paired_table(request):
    yield
    if not PAIRED:
        return
    lines = ["", f"nngpu / TFLite with {THREADS} threads, in alternating blocks (median ms; ratio: median of "
             f"{BLOCKS} blocks [lowest, highest]):"]
    for (name, backend), (tflite, ours, ratios) in sorted(PAIRED.items()):
        lines.append(f"  {name:32s} {backend:8s} TFLite {tflite * 1e3:7.2f}  nngpu {ours * 1e3:7.2f}  "
                     f"{statistics.median(ratios):5.2f}x [{min(ratios):.2f}, {max(ratios):.2f}]")
    show_summary(request, lines)


def _block(run) -> float:
    """The median seconds of a block's counted runs."""
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times[SETTLE:])


@pytest.mark.skipif(not DEVICES, reason="no device backend here")
@pytest.mark.parametrize("backend", DEVICES)
def test_paired(benchmark, model, backend):
    name, path, imported, inputs = model
    reference = interpreter(path, inputs, THREADS)
    with Session(imported, backend) as session:
        session.set_inputs(inputs)
        blocks: list[tuple[float, float]] = []
        benchmark.group = f"paired {name}"
        benchmark.pedantic(lambda: blocks.append((_block(reference.invoke), _block(session.execute))),
                           rounds=BLOCKS, warmup_rounds=1)
    ratios = [ours / tflite for tflite, ours in blocks[-BLOCKS:]]
    tflite = statistics.median(t for t, _ in blocks[-BLOCKS:])
    ours = statistics.median(o for _, o in blocks[-BLOCKS:])
    PAIRED[name, backend] = (tflite, ours, ratios)
    benchmark.extra_info.update(threads=THREADS, ratio=round(statistics.median(ratios), 3),
                                lowest=round(min(ratios), 3), highest=round(max(ratios), 3))
