"""The harness of the device-implementation tests (imported by tests/ops/test_*.py).

`check_on_device` builds a one-operation model, asserts that the compiler places the operation
in a device kernel (or on the host, when `device=False`), compiles its CUDA source with NVRTC
when CuPy is installed, and compares every device backend's results with the numpy reference."""
from __future__ import annotations

import functools

import numpy as np

from nngpu.backends import device_backends, targets
from nngpu.compiler.lower import trace_segments
from nngpu.compiler.steps import TemplateStep
from nngpu.driver.device import Device
from nngpu.runtime.interpreter import GraphRunner
from nngpu.hal import OperandType as T
from nngpu.modelutil import as_model_1_3
from nngpu.ops.lib.dtypes import is_tensor
from nngpu.testing import Value, output, run_op, scalar, single_op_model, tensor

rng = np.random.default_rng(11)
F32, F16 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16
Q8, S8 = T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED
# (atol, rtol): the corpus' criteria or looser; quantized copies must be exact
TOLERANCE = {F32: (1e-5, 1e-5), F16: (5e-3, 5e-3), **{t: (0, 0) for t in (
    Q8, S8, T.TENSOR_BOOL8, T.TENSOR_INT32, T.TENSOR_QUANT8_SYMM, T.TENSOR_QUANT16_ASYMM, T.TENSOR_QUANT16_SYMM)}}


def data(shape, t=F32, scale: float = 1.0) -> np.ndarray:
    if t in (Q8, S8):
        lo = 0 if t == Q8 else -128
        return rng.integers(lo, lo + 256, shape).astype(np.uint8 if t == Q8 else np.int8)
    return (rng.standard_normal(shape) * scale).astype(np.float16 if t == F16 else np.float32)


def i32(value) -> Value:
    return scalar(T.INT32, value)


def vec(values) -> Value:
    return tensor(T.TENSOR_INT32, np.asarray(values, dtype=np.int32), const=True)


def flag(value: bool) -> Value:
    return scalar(T.BOOL, value)


def fscalar(t, value) -> Value:
    return scalar(T.FLOAT16 if t == F16 else T.FLOAT32, value)


@functools.lru_cache(maxsize=None)
def _device(name: str) -> Device:
    return Device(name)


def cpu_templates(model, inputs: list[Value]) -> list[str]:
    """The sources of the hand-written kernels (TemplateStep) in the plan for an OpenCL CPU device."""
    return [s.source for seg in segments(model, inputs, "opencl-cpu") for s in seg.steps
            if isinstance(s, TemplateStep)]


def reference_and_opencl(op, inputs: list[Value], out: Value):
    """(the numpy reference's result, the OpenCL device's) of a one-operation model, both run
    without error to the same output shapes."""
    ref = run_op(op, inputs, [out], version=13)
    got = run_op(op, inputs, [out], device=_device("opencl"), version=13)
    assert ref.status == got.status == 0 and got.shapes == ref.shapes
    return ref, got


def _nvrtc_compiles(source: str) -> str | None:
    from cupy.cuda import nvrtc

    prog = nvrtc.createProgram(source, "t.cu", [], [])
    try:
        nvrtc.compileProgram(prog, ["--gpu-architecture=sm_90", "--std=c++17"])
        return None
    except nvrtc.NVRTCError:
        return nvrtc.getProgramLog(prog)
    finally:
        nvrtc.destroyProgram(prog)


def _has_cupy() -> bool:
    try:
        import cupy  # noqa: F401
        from cupy.cuda import nvrtc  # noqa: F401
    except Exception:
        return False
    return True


def segments(model, inputs: list[Value], target: str):
    """The plan's segments for these input values (each barrier answered from a reference run)."""
    runner = GraphRunner(as_model_1_3(model))
    given = [v.value for v in inputs if not v.omitted and not v.const and is_tensor(v.type)]
    with np.errstate(all="ignore"):
        values = runner.trace(given)
    return trace_segments(runner, values, targets()[target])


def placement(model, inputs: list[Value]) -> tuple[int, int]:
    """(operations in device kernels, on the host) of the OpenCL plan."""
    segs = segments(model, inputs, "opencl")
    return sum(s.device_ops for s in segs), sum(s.host_ops for s in segs)


def check_on_device(op, inputs: list[Value], out_type, out_rank: int, device: bool = True,
                    scale: float = 0.0, zero_point: int = 0):
    """Run `op` on the reference and every device backend; returns the reference output."""
    out = output(out_type, [0] * out_rank, scale, zero_point)
    model = single_op_model(op, inputs, [out])
    assert placement(model, inputs) == ((1, 0) if device else (0, 1)), f"placement {placement(model, inputs)}"
    if device and _has_cupy():
        for seg in segments(model, inputs, "cuda"):
            for step in seg.kernels:
                log = _nvrtc_compiles(step.source)
                assert log is None, f"NVRTC: {log}\n{step.source}"
    ref = run_op(op, inputs, [out], version=13)
    assert ref.status == 0, f"reference failed: {ref.status}"
    atol, rtol = TOLERANCE[out_type]
    for name in device_backends():
        got = run_op(op, inputs, [out], device=_device(name), version=13)
        assert got.status == 0 and got.shapes == ref.shapes, (name, got.status, got.shapes, ref.shapes)
        np.testing.assert_allclose(got.outputs[0].astype(np.float64), ref.outputs[0].astype(np.float64),
                                   atol=atol, rtol=rtol, err_msg=name)
    return ref.outputs[0]
