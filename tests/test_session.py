"""nngpu.Session: any model kind by name, strict input checks like the TFLite interpreter,
outputs whose shapes the model leaves open, and the burst path; on numpy and every device
backend."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import nngpu
from nngpu.backends import device_backends
from nngpu.hal.types import OperandType as T, OperationType as Op
from nngpu.session import InputError, Session

from .compiler.model_builder import ModelBuilder

DEMO = Path(nngpu.__file__).resolve().parent / "data" / "demo_cnn.json"
BACKENDS = ["numpy", *device_backends()]


def _open_add():
    """y = x + x over a float tensor whose extents the request decides."""
    b = ModelBuilder()
    x = b.input(T.TENSOR_FLOAT32, [0, 0])
    act = b.constant(T.INT32, 0)
    b.output(b.op(Op.ADD, [x, x, act], T.TENSOR_FLOAT32, [0, 0]))
    return b.build()


@pytest.mark.parametrize("backend", BACKENDS)
def test_json_model_by_name(backend):
    with Session(DEMO, backend) as s:
        assert s.input_names == ["input0"] and s.output_names == ["output0"]
        assert s.inputs[0].shape == [1, 8, 8, 3] and s.inputs[0].dtype == np.float32
        x = s.named.example_inputs[0]
        out = s.run({"input0": x})["output0"]
    assert out.shape == (1, 10)
    np.testing.assert_allclose(out.sum(), 1.0, rtol=1e-5)  # the demo ends in SOFTMAX
    with Session(DEMO, "numpy") as reference:
        np.testing.assert_allclose(out, reference.run([x])["output0"], rtol=1e-4, atol=1e-6)


def test_strict_like_the_tflite_interpreter():
    with Session(DEMO, "numpy") as s:
        good = np.zeros((1, 8, 8, 3), np.float32)
        with pytest.raises(InputError, match="unknown input 'x'"):
            s.run({"x": good})
        with pytest.raises(InputError, match="'input0' is missing"):
            s.run({})
        with pytest.raises(InputError, match="dtype float64, the model wants float32"):
            s.run({"input0": good.astype(np.float64)})
        with pytest.raises(InputError, match=r"shape \[1, 8, 8\], the model wants \[1, 8, 8, 3\]"):
            s.run({"input0": good[..., 0]})
        with pytest.raises(InputError, match="the model has 1 inputs"):
            s.run([good, good])
        cast = s.run({"input0": good.astype(np.float64)}, cast=True)["output0"]
        np.testing.assert_array_equal(cast, s.run([good])["output0"])


@pytest.mark.parametrize("backend", BACKENDS)
def test_open_shapes_grow_the_output_pool(backend):
    with Session(_open_add(), backend) as s:
        assert s.inputs[0].shape == [0, 0]
        for shape in [(1, 2), (7, 5), (3, 3)]:
            x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
            np.testing.assert_array_equal(s.run({"input0": x})["output0"], x + x)


def test_burst_gives_the_same_outputs():
    pytest.importorskip("nngpu.burst")
    x = np.linspace(-1, 1, 192, dtype=np.float32).reshape(1, 8, 8, 3)
    with Session(DEMO, "numpy") as plain, Session(DEMO, "numpy", burst=True) as burst:
        assert burst.burst is not None
        np.testing.assert_array_equal(plain.run([x])["output0"], burst.run([x])["output0"])


def test_hal_model_object_and_unknown_source():
    with Session(_open_add(), "numpy") as s:
        assert s.output_names == ["output0"]
    with pytest.raises(TypeError, match="cannot make a model of a int"):
        Session(3, "numpy")
