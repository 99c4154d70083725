"""nngpu.ModelBuilder: models written with it run through Session on numpy and match numpy; the
generic `op` path; the errors it gives for wrong use."""
from __future__ import annotations

import numpy as np
import pytest

import nngpu
from nngpu.builder import Tensor
from nngpu.hal.types import Model_1_3, OperandType as T
from nngpu.named_model import NamedModel

RNG = np.random.default_rng(7)


def _run(device, b: nngpu.ModelBuilder, **feeds: np.ndarray) -> dict[str, np.ndarray]:
    with nngpu.Session(b.build(), backend=device) as s:
        return s.run(feeds)


def _f32(*shape: int) -> np.ndarray:
    return RNG.uniform(-2, 2, shape).astype(np.float32)


@pytest.mark.parametrize("name, ref", [("add", np.add), ("sub", np.subtract), ("mul", np.multiply)])
def test_binary_float_with_broadcast_and_activation(device, name: str, ref) -> None:
    b = nngpu.ModelBuilder()
    x = b.input("x", np.float32, [2, 3])
    c = b.constant([1.0, -2.0, 0.5])  # a Python list: float32, broadcast along the rows
    b.output("plain", getattr(b, name)(x, c))
    b.output("relu", getattr(b, name)(x, c, activation="RELU"))
    xv = _f32(2, 3)
    out = _run(device, b, x=xv)
    want = ref(xv, np.array([1.0, -2.0, 0.5], np.float32))
    np.testing.assert_allclose(out["plain"], want, rtol=1e-6)
    np.testing.assert_allclose(out["relu"], np.maximum(want, 0), rtol=1e-6)


def test_build_gives_a_named_hal_model() -> None:
    b = nngpu.ModelBuilder()
    x = b.input("x", np.float32, [2, 2])
    b.output("y", b.relu(x))
    named = b.build()
    assert isinstance(named, NamedModel) and isinstance(named.model, Model_1_3)
    assert [(t.name, t.shape, t.dtype) for t in named.inputs] == [("x", [2, 2], np.float32)]
    assert [(t.name, t.shape, t.dtype) for t in named.outputs] == [("y", [2, 2], np.float32)]
    assert named.model.main.operands[x.index].numberOfConsumers == 1


def _conv_reference(x: np.ndarray, w: np.ndarray, bias: np.ndarray, stride: int, same: bool) -> np.ndarray:
    """NHWC x, OHWI w, with NNAPI's implicit padding (SAME: the extra pad at the end)."""
    _, h, wd, _ = x.shape
    kh, kw = w.shape[1:3]
    if same:
        oh, ow = -(-h // stride), -(-wd // stride)
        ph, pw = max((oh - 1) * stride + kh - h, 0), max((ow - 1) * stride + kw - wd, 0)
        x = np.pad(x, ((0, 0), (ph // 2, ph - ph // 2), (pw // 2, pw - pw // 2), (0, 0)))
    else:
        oh, ow = (h - kh) // stride + 1, (wd - kw) // stride + 1
    out = np.zeros((x.shape[0], oh, ow, w.shape[0]), np.float64)
    for i in range(oh):
        for j in range(ow):
            patch = x[:, i * stride: i * stride + kh, j * stride: j * stride + kw, :]
            out[:, i, j, :] = np.einsum("nhwc,ohwc->no", patch, w)
    return out + bias


@pytest.mark.parametrize("padding, stride", [("SAME", 1), ("VALID", 1), ("SAME", 2)])
def test_conv_2d(device, padding: str, stride: int) -> None:
    xv, wv, bv = _f32(1, 5, 6, 2), _f32(3, 3, 3, 2), _f32(3)
    b = nngpu.ModelBuilder()
    x = b.input("x", np.float32, [1, 5, 6, 2])
    y = b.conv_2d(x, b.constant(wv), bv, stride=stride, padding=padding)
    want = _conv_reference(xv, wv, bv, stride, padding == "SAME")
    assert y.shape == want.shape  # from CONV_2D's shape function
    b.output("y", y)
    np.testing.assert_allclose(_run(device, b, x=xv)["y"], want, rtol=1e-4, atol=1e-5)


def test_fully_connected_reshape_softmax(device) -> None:
    xv, wv = _f32(2, 2, 3), _f32(4, 6)
    b = nngpu.ModelBuilder()
    x = b.input("x", np.float32, [2, 2, 3])
    fc = b.fully_connected(b.reshape(x, [2, 6]), b.constant(wv), activation="RELU")  # bias: zeros
    b.output("fc", fc)
    b.output("p", b.softmax(fc, beta=0.5))
    out = _run(device, b, x=xv)
    want = np.maximum(xv.reshape(2, 6) @ wv.T, 0)
    np.testing.assert_allclose(out["fc"], want, rtol=1e-5, atol=1e-6)
    e = np.exp(0.5 * (want - want.max(axis=1, keepdims=True)))
    np.testing.assert_allclose(out["p"], e / e.sum(axis=1, keepdims=True), rtol=1e-5)


def test_quantized_add_and_inherited_quantization(device) -> None:
    b = nngpu.ModelBuilder()
    x = b.input("x", T.TENSOR_QUANT8_ASYMM, [6], scale=0.5, zero_point=100)
    y = b.input("y", "TENSOR_QUANT8_ASYMM", [6], scale=0.25, zero_point=20)
    s = b.add(x, y, scale=1.0, zero_point=50)
    r = b.relu(s)  # RELU fixes its output's quantization: the input's
    assert (r.scale, r.zero_point) == (1.0, 50)
    b.output("s", s)
    b.output("r", r)
    xv = np.array([100, 120, 0, 255, 90, 101], np.uint8)
    yv = np.array([20, 0, 60, 255, 24, 40], np.uint8)
    out = _run(device, b, x=xv, y=yv)
    real = (xv.astype(np.float64) - 100) * 0.5 + (yv.astype(np.float64) - 20) * 0.25
    want = np.clip(np.round(real / 1.0) + 50, 0, 255)
    assert np.abs(out["s"].astype(int) - want).max() <= 1  # the fixed-point rounding of the spec
    np.testing.assert_array_equal(out["r"], np.maximum(out["s"], 50))


def test_generic_op_transpose_mean(device) -> None:
    xv = _f32(2, 3, 4)
    b = nngpu.ModelBuilder()
    x = b.input("x", np.float32, [2, 3, 4])
    t = b.op("TRANSPOSE", x, [2, 0, 1])                      # a list: a TENSOR_INT32 constant
    m = b.op(nngpu.hal.OperationType.MEAN, x, [1], True)     # True: keep_dims, an INT32 by the signature
    assert (t.shape, m.shape) == ((4, 2, 3), (2, 1, 4))
    b.output("t", t)
    b.output("m", m)
    out = _run(device, b, x=xv)
    np.testing.assert_array_equal(out["t"], xv.transpose(2, 0, 1))
    np.testing.assert_allclose(out["m"], xv.mean(axis=1, keepdims=True), rtol=1e-6)


def test_op_with_a_chosen_output_type_and_a_dynamic_extent(device) -> None:
    b = nngpu.ModelBuilder()
    x = b.input("x", np.float32, [0, 2])  # 0: each execution decides
    q = b.op("QUANTIZE", x, dtype=T.TENSOR_QUANT8_ASYMM, scale=0.5, zero_point=10)
    assert q.type == T.TENSOR_QUANT8_ASYMM and q.shape == ()  # known only at execution
    b.output("q", q)
    xv = np.array([[0.0, 1.0], [2.0, -5.0], [3.0, 4.0]], np.float32)
    np.testing.assert_array_equal(_run(device, b, x=xv)["q"], np.round(xv / 0.5) + 10)


def _error(fn, *args, **kwargs) -> str:
    with pytest.raises(ValueError) as e:
        fn(*args, **kwargs)
    return str(e.value)


def test_errors_name_the_mistake() -> None:
    b = nngpu.ModelBuilder()
    x = b.input("x", np.float32, [2, 3])
    assert "unknown operation 'NOPE'" in _error(b.op, "NOPE", x)
    assert "takes 3" in _error(b.op, "ADD", x)
    assert "(TENSOR_FLOAT32, TENSOR_FLOAT32, float)" in _error(b.op, "ADD", x, x, 1.5)
    assert "unknown dtype" in _error(b.input, "z", "no-such-type", [1])
    assert "OperandType" in _error(b.input, "z", np.float64, [1])
    assert "OperandType" in _error(b.input, "z", np.uint8, [1])   # quantized: say which
    assert "scale > 0" in _error(b.input, "z", T.TENSOR_QUANT8_ASYMM, [1])
    assert "unknown activation 'TANH'" in _error(b.add, x, x, activation="TANH")
    assert "unknown padding" in _error(b.conv_2d, b.input("img", np.float32, [1, 4, 4, 1]),
                                       np.ones((1, 2, 2, 1), np.float32), padding="FULL")
    assert "dtype=" in _error(b.op, "QUANTIZE", x)
    assert "does not hold 6 elements" in _error(b.reshape, x, [4, 2])
    assert "does not fit TENSOR_INT32" in _error(b.constant, [2**40])
    assert "not an operation's result" in _error(b.output, "x2", x)
    assert "another ModelBuilder" in _error(nngpu.ModelBuilder().relu, x)
    assert "no outputs" in _error(b.build)
    q = b.input("q", T.TENSOR_QUANT8_ASYMM, [2, 3], scale=0.5, zero_point=0)
    assert "pass scale= and zero_point=" in _error(b.add, q, q)


def test_a_failed_op_leaves_the_model_as_it_was(device) -> None:
    b = nngpu.ModelBuilder()
    x = b.input("x", np.float32, [2])
    _error(b.reshape, x, [3])  # its shape constant is written, then taken back
    y = b.add(x, x)
    assert isinstance(y, Tensor) and y.index == x.index + 2  # the activation scalar and y
    b.output("y", y)
    np.testing.assert_array_equal(_run(device, b, x=np.array([1, 2], np.float32))["y"], [2, 4])


def test_duplicate_names_and_invalid_models_raise_at_build() -> None:
    b = nngpu.ModelBuilder()
    x = b.input("x", np.float32, [2])
    b.output("x", b.relu(x))
    assert "two tensors are named 'x'" in _error(b.build)
    b = nngpu.ModelBuilder()
    b.input("n", T.INT32, [2])  # a scalar type with dimensions: the validation's message
    b.output("y", b.relu(b.input("f", np.float32, [2])))
    assert _error(b.build) == "invalid model: main operand 0: scalar INT32 has rank 1"
