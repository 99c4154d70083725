"""The harness of the template tests (imported by the other test_templates_* modules) and the
index-map fitting the data-movement templates rely on.

`check_on_device` builds a one-operation model, asserts that the compiler places the operation
in a device kernel (or on the host, when `device=False`), compiles its CUDA source with NVRTC
when CuPy is installed, and compares every device backend's results with the numpy reference."""
from __future__ import annotations

import functools

import numpy as np
import pytest

from nngpu.backends import device_backends
from nngpu.compiler.lower import lower
from nngpu.compiler.templates_movement import axis_digits, separable_index
from nngpu.driver.device import Device
from nngpu.compiler.interpreter import GraphRunner
from nngpu.hal import OperandType as T
from nngpu.modelutil import as_model_1_3
from nngpu.testing import Value, output, run_op, scalar, single_op_model, tensor

rng = np.random.default_rng(11)
F32, F16 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16
Q8, S8 = T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED
# (atol, rtol): the corpus' criteria or looser; quantized copies must be exact
TOLERANCE = {F32: (1e-5, 1e-5), F16: (5e-3, 5e-3), Q8: (0, 0), S8: (0, 0), T.TENSOR_BOOL8: (0, 0)}


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


def check_on_device(op, inputs: list[Value], out_type, out_rank: int, device: bool = True, kind: str | None = None,
                    scale: float = 0.0, zero_point: int = 0):
    """Run `op` on the reference and every device backend; returns the reference output."""
    out = output(out_type, [0] * out_rank, scale, zero_point)
    model = single_op_model(op, inputs, [out])
    spec = lower(GraphRunner(as_model_1_3(model)), "opencl")
    assert spec is not None, "no static plan"
    assert spec.counts() == ((1, 0) if device else (0, 1)), f"placement {spec.counts()}"
    if device and kind is not None:
        assert spec.kernels[-1].kind == kind
    if device and _has_cupy():
        for step in lower(GraphRunner(as_model_1_3(model)), "cuda").kernels:
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


# ---- the index-map fitting ------------------------------------------------------------------

def _digits_value(digits, n: int) -> np.ndarray:
    c = np.arange(n)
    return sum(w * ((c // p) if r is None else (c // p % r)) for p, r, w in digits)


@pytest.mark.parametrize("g", [
    np.arange(7) * 3,                                        # affine
    (np.arange(12) % 4) * 5,                                 # tiled
    (np.arange(12) // 6) * 100 + (np.arange(12) // 3 % 2) * 10 + np.arange(12) % 3,  # block split
    np.zeros(5, dtype=np.int64),                             # broadcast
    np.array([0]),
])
def test_axis_digits_reproduce_the_map(g):
    digits = axis_digits(np.asarray(g, dtype=np.int64))
    assert digits is not None
    np.testing.assert_array_equal(_digits_value(digits, len(g)), g)


def test_axis_digits_reject_irregular_maps():
    assert axis_digits(np.array([0, 2, 3, 7], dtype=np.int64)) is None


def test_separable_index_identity_and_transpose():
    src = np.arange(24, dtype=np.int64).reshape(2, 3, 4)
    assert separable_index(src) == "i"
    expr = separable_index(np.ascontiguousarray(src.transpose(2, 0, 1)))
    assert expr is not None and "c0" in expr and "c2" in expr


def test_separable_index_rejects_non_separable_maps():
    src = np.arange(6, dtype=np.int64).reshape(2, 3)
    src[1] = src[1][::-1]            # row 1 reversed: the column term depends on the row
    assert separable_index(src) is None
