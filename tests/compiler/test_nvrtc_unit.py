"""A model's kernels compile for CUDA as one NVRTC translation unit: the CUDA backend asks for
one unit per segment (kernels_per_unit None), and the unit of a whole MediaPipe model compiles
to one cubin that holds every kernel (works without a GPU)."""
from __future__ import annotations

import pytest

from nngpu.backends.cuda import CudaBackend, compile_cubin
from nngpu.runtime.interpreter import GraphRunner
from nngpu.compiler.lower import lower_model
from nngpu.modelutil import as_model_1_3
from nngpu.tflite.models import find_model
from nngpu.backends.cuda import TARGET as CUDA

pytest.importorskip("cupy", reason="CuPy + NVRTC (extra 'cuda') are not installed")
pytest.importorskip("tflite", reason="the `tflite` flatbuffer package is not installed")

MODEL = "face_detection_short_range"


def test_cuda_compiles_a_segment_as_one_unit():
    assert CudaBackend.kernels_per_unit is None


def test_a_mediapipe_model_is_one_translation_unit():
    from nngpu.tflite import load_tflite

    path = find_model(MODEL)
    if path is None:
        pytest.skip(f"model {MODEL} not cached: run ci/fetch-models.sh")
    spec = lower_model(GraphRunner(as_model_1_3(load_tflite(path).model)), CUDA)
    assert spec is not None and spec.stop is None, "the model should lower to one static segment"
    units = spec.units(CudaBackend.kernels_per_unit)
    assert len(units) == 1 and len(units[0][1]) == len(spec.kernels) > 20
    cubin = compile_cubin(units[0][0], MODEL)
    assert cubin[:4] == b"\x7fELF"
    assert all(name.encode() in cubin for name in units[0][1]), "every kernel is a symbol of the one cubin"


def test_half_conversions_are_the_hardware_instructions():
    """A float16 kernel converts with one cvt each way on the device (compute_90 PTX), not with
    the software routine the host harness compiles instead."""
    from cupy.cuda import nvrtc

    from nngpu.hal.types import OperandType as T
    from nngpu.hal.types import OperationType as Op

    from .model_builder import ModelBuilder

    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT16, (4,))
    b.output(b.op(Op.RELU, [x], T.TENSOR_FLOAT16, (4,)))
    spec = lower_model(GraphRunner(b.build()), CUDA)
    source = spec.units(None)[0][0]
    assert "cvt.f32.f16" in source
    prog = nvrtc.createProgram(source, "half.cu", [], [])
    try:
        nvrtc.compileProgram(prog, ["--gpu-architecture=compute_90", "--std=c++17"])
        ptx = nvrtc.getPTX(prog).decode(errors="replace")
    finally:
        nvrtc.destroyProgram(prog)
    assert "cvt.f32.f16" in ptx and "cvt.rn.f16.f32" in ptx
    assert "0x7e00" not in source.split("#else")[0]
