"""`nngpu kernels --relaxed`: the kernels of the model with relaxComputationFloat32toFloat16 set,
which on CUDA and an OpenCL GPU store float32 temporaries as float16 (a CPU device's keep
float32), and a line saying how many; a GEMM's whole unit written beside the kernels (the CUDA
units are checked against the host harness's in tests/cuda_host/test_tiled_gemm.py)."""
from __future__ import annotations

from pathlib import Path

import pytest

from nngpu.cli import main

DEMO = Path(__file__).parents[2] / "nngpu" / "data" / "demo_cnn.json"


def _dump(tmp_path: Path, capsys, *flags: str, target: str = "cuda") -> tuple[str, list[str]]:
    out = tmp_path / target / ("relaxed" if flags else "float32")
    assert main(["kernels", str(DEMO), "--target", target, "--out", str(out), *flags]) == 0
    return capsys.readouterr().out, [p.read_text() for p in sorted(out.glob("*.c[lu]"))]


def test_relaxed_kernels_store_float32_temporaries_as_float16(tmp_path, capsys):
    plain, plain_sources = _dump(tmp_path, capsys)
    relaxed, relaxed_sources = _dump(tmp_path, capsys, "--relaxed")
    assert "relaxed:" not in plain and not any("nn_float_to_half" in s for s in plain_sources)
    assert "relaxed: 4 float32 temporaries stored as float16 on cuda" in relaxed
    assert len(relaxed_sources) == len(plain_sources)
    # CONV_2D, AVERAGE_POOL_2D and FULLY_CONNECTED store float16 (RESHAPE views the pool's); the
    # SOFTMAX's statistics and its output, the model's, stay float32
    assert [" = nn_float_to_half(" in s for s in relaxed_sources] == [True] * 3 + [False] * 3


def test_an_opencl_gpu_stores_them_and_a_cpu_device_keeps_float32(tmp_path, capsys):
    relaxed, sources = _dump(tmp_path, capsys, "--relaxed", target="opencl")
    assert "relaxed: 4 float32 temporaries stored as float16 on opencl" in relaxed
    assert sum("__global half*" in s for s in sources) == 3   # as on CUDA
    cpu, cpu_sources = _dump(tmp_path, capsys, "--relaxed", target="opencl-cpu")
    assert "relaxed: 0 float32 temporaries stored as float16 on opencl-cpu" in cpu
    assert not any("half*" in s for s in cpu_sources)


@pytest.mark.parametrize("target, kernel", [("opencl-cpu", "nn_gemm_vec"), ("opencl", "nn_gemm_tiled")])
def test_each_gemm_unit_is_written_whole_and_builds(tmp_path, capsys, target, kernel):
    """The face detector's GEMMs (bias, activation and the folded PAD+ADD+RELU kernels in their
    epilogues): each unit as the backend builds it for the target, built by the OpenCL device here."""
    pytest.importorskip("tflite", reason="the `tflite` flatbuffer package is not installed")
    from nngpu.driver.device import Device
    from nngpu.tflite.models import find_model

    path = find_model("face_detection_short_range")
    if path is None:
        pytest.skip("the face detector is not cached: run ci/fetch-models.sh")
    assert main(["kernels", str(path), "--target", target, "--out", str(tmp_path)]) == 0
    listed = [line for line in capsys.readouterr().out.splitlines() if " gemm " in line]
    units = sorted(tmp_path.glob("*_gemm.cl"))
    assert len(units) == len(listed) > 0 and sum("+ then" in line for line in listed) >= 2
    backend = Device("opencl").backend
    for unit, line in zip(units, listed):   # both in step order
        name = kernel.replace("gemm_", "gemm_nt_") if "B transposed" in line else kernel
        assert backend.compile(unit.read_text(), [name])
