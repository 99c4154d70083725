"""The numpy reference's heavy kernels on layer shapes of the MediaPipe models, each against a
real alternative in the same run (compare the medians within each group; the table at the end
gives alternative / chosen):

- DEPTHWISE_CONV_2D: the chosen path (row einsums below 64 channels or at stride 1 below 192)
  vs the window einsum that wide layers use;
- RESIZE_BILINEAR float: separable (columns then rows) vs the reference's four-term order that
  quantized inputs keep;
- PAD: the border-only fill vs np.pad;
- global AVERAGE_POOL_2D: rows then columns vs one reduction over the window view.

    pytest bench/test_bench_numpy_kernels.py"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Callable

import numpy as np
import pytest

from nngpu.ops import pooling, resize
from nngpu.ops.lib import conv_kernels
from nngpu.ops.lib.layout import pad_constant
from nngpu.ops.lib.conv_common import Window, pad_nhwc, window_view

from .common import show_summary

RESULTS: dict[tuple[str, str], float] = {}   # (case, "chosen" | "alternative") -> median seconds
rng = np.random.default_rng(0)


@pytest.fixture(scope="module", autouse=True)
def ratio_table(request):
    yield
    lines = ["", "numpy kernels: median µs, chosen vs alternative (ratio = alternative / chosen):"]
    for case in sorted({c for c, _ in RESULTS}):
        a, b = RESULTS.get((case, "chosen")), RESULTS.get((case, "alternative"))
        if a and b:
            lines.append(f"  {case:44s} {a * 1e6:9.1f} {b * 1e6:9.1f}  x{b / a:5.2f}")
    show_summary(request, lines)


def _run(benchmark, case: str, which: str, fn: Callable, *args) -> None:
    benchmark.group = case
    benchmark.pedantic(fn, args, rounds=20, warmup_rounds=2)
    stats = getattr(benchmark, "stats", None)
    if stats is not None and getattr(stats, "stats", None) is not None:
        RESULTS[(case, which)] = stats.stats.median


# (input NHWC, filter size, stride, pads top/bottom/left/right)
DEPTHWISE = [((1, 96, 96, 32), 5, 1, (2, 2, 2, 2)), ((1, 112, 112, 24), 3, 1, (1, 1, 1, 1)),
             ((1, 56, 56, 144), 3, 1, (1, 1, 1, 1)), ((1, 128, 128, 16), 3, 2, (0, 1, 0, 1)),
             ((1, 96, 96, 32), 5, 2, (1, 2, 1, 2)), ((1, 14, 14, 672), 5, 1, (2, 2, 2, 2))]


def _window_einsum(x, f, win, oh, ow):
    kh, kw, c = f.shape[1], f.shape[2], x.shape[3]
    return np.einsum("nhwijc,ijc->nhwc", window_view(pad_nhwc(x, win), win, kh, kw, oh, ow), f.reshape(kh, kw, c))


@pytest.mark.parametrize("which", ["chosen", "alternative"])
@pytest.mark.parametrize("shape, k, s, pads", DEPTHWISE, ids=lambda v: "x".join(map(str, v)) if isinstance(v, tuple)
                         else str(v))
def test_depthwise(benchmark, shape, k, s, pads, which):
    x = rng.standard_normal(shape, dtype=np.float32)
    f = rng.standard_normal((1, k, k, shape[3]), dtype=np.float32)
    win = Window(*pads, s, s)
    oh, ow = (shape[1] + pads[0] + pads[1] - k) // s + 1, (shape[2] + pads[2] + pads[3] - k) // s + 1
    case = f"depthwise {'x'.join(map(str, shape[1:]))} k{k} s{s}"
    if which == "chosen":
        _run(benchmark, case, which, conv_kernels.depthwise_forward, x, f, 1, win, oh, ow)
    else:
        _run(benchmark, case, which, _window_einsum, x, f, win, oh, ow)


@pytest.mark.parametrize("which", ["chosen", "alternative"])
@pytest.mark.parametrize("shape", [(1, 64, 64, 16), (1, 12, 12, 256), (1, 7, 7, 1152)], ids=str)
def test_resize_bilinear(benchmark, shape, which):
    x = rng.standard_normal(shape, dtype=np.float32)
    fn = resize._bilinear if which == "chosen" else resize._bilinear_exact
    _run(benchmark, f"bilinear x2 {'x'.join(map(str, shape[1:]))}", which, fn, x, 2 * shape[1], 2 * shape[2],
         False, True)


@pytest.mark.parametrize("which", ["chosen", "alternative"])
@pytest.mark.parametrize("shape, pads", [((1, 112, 112, 64), ((0, 0), (1, 1), (1, 1), (0, 0))),
                                         ((1, 48, 48, 32), ((0, 0), (0, 0), (0, 0), (0, 32)))], ids=str)
def test_pad(benchmark, shape, pads, which):
    x = rng.standard_normal(shape, dtype=np.float32)
    fn = pad_constant if which == "chosen" else (lambda a, p: np.pad(a, p))
    _run(benchmark, f"pad {'x'.join(map(str, shape[1:]))} {sum(map(sum, pads))}", which, fn, x, pads)


@pytest.mark.parametrize("which", ["chosen", "alternative"])
@pytest.mark.parametrize("shape", [(1, 128, 128, 16), (1, 16, 16, 128)], ids=str)
def test_global_average_pool(benchmark, shape, which):
    x = rng.standard_normal(shape, dtype=np.float32)
    h, w = shape[1:3]
    win = Window(0, 0, 0, 0, h, w)
    case = f"global sum pool {'x'.join(map(str, shape[1:]))}"
    if which == "chosen":
        p = SimpleNamespace(filter_h=h, filter_w=w)
        _run(benchmark, case, which, pooling._reduce_taps, x, p, win, 1, 1, 0, np.add)
    else:
        _run(benchmark, case, which, lambda a: np.add.reduce(window_view(a, win, h, w, 1, 1), axis=(3, 4)), x)
