"""`nngpu kernels --relaxed`: the kernels of the model with relaxComputationFloat32toFloat16 set,
which on CUDA store float32 temporaries as float16, and a line saying how many."""
from __future__ import annotations

from pathlib import Path

from nngpu.cli import main

DEMO = Path(__file__).parents[2] / "nngpu" / "data" / "demo_cnn.json"


def _dump(tmp_path: Path, capsys, *flags: str) -> tuple[str, list[str]]:
    out = tmp_path / ("relaxed" if flags else "float32")
    assert main(["kernels", str(DEMO), "--target", "cuda", "--out", str(out), *flags]) == 0
    return capsys.readouterr().out, [p.read_text() for p in sorted(out.glob("*.cu"))]


def test_relaxed_kernels_store_float32_temporaries_as_float16(tmp_path, capsys):
    plain, plain_sources = _dump(tmp_path, capsys)
    relaxed, relaxed_sources = _dump(tmp_path, capsys, "--relaxed")
    assert "relaxed:" not in plain and not any("nn_float_to_half" in s for s in plain_sources)
    assert "relaxed: 4 float32 temporaries stored as float16 on cuda" in relaxed
    assert len(relaxed_sources) == len(plain_sources)
    # CONV_2D, AVERAGE_POOL_2D and FULLY_CONNECTED store float16 (RESHAPE views the pool's); the
    # SOFTMAX's statistics and its output, the model's, stay float32
    assert [" = nn_float_to_half(" in s for s in relaxed_sources] == [True] * 3 + [False] * 3
