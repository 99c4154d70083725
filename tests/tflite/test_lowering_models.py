"""TensorFlow-converted models (tests/data/tflite, made by tests/tflite/make_models.py) import and
match the TFLite interpreter on every backend here: full-integer int8 models with uint8 and int8
I/O, a dynamic batch, Keras 3 UpSampling2D, int64 ARG_MAX, int8 EXP / LOG / RSQRT, and the
recurrent layers (fused sequence LSTMs, and WHILE loops with their subgraphs), tf.cond (IF)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("tflite", reason="the `tflite` flatbuffer package is not installed")

from nngpu.hal.types import Model_1_3, OperationType
from nngpu.session import Session
from nngpu.tflite import import_tflite

from .tfl_util import assert_close, run_reference

Op = OperationType
DATA = Path(__file__).resolve().parents[1] / "data" / "tflite"

# model -> (NNAPI operations the import must contain, quantization steps of tolerance). A MEAN
# whose output scale differs is computed in float32 (mappers/reduce.py): TFLite's fixed-point
# mean rounds differently now and then, within one step.
MODELS = {
    "cnn_float": ({Op.CONV_2D, Op.MEAN}, 0),
    "cnn_uint8": ({Op.DEQUANTIZE, Op.QUANTIZE, Op.MEAN}, 1),  # uint8 <-> int8 and MEAN in float
    "cnn_int8": ({Op.CONV_2D, Op.DEQUANTIZE, Op.MEAN}, 1),
    "exp_int8": ({Op.GATHER, Op.CAST}, 1),                      # RSQRT: fixed point in TFLite
    "dynamic_batch": ({Op.RESHAPE, Op.MUL}, 0),
    "upsampling2d": ({Op.RESIZE_NEAREST_NEIGHBOR}, 0),
    "argmax_int64": ({Op.ARGMAX, Op.ARGMIN}, 0),
    "lstm_tfkeras": ({Op.UNIDIRECTIONAL_SEQUENCE_LSTM}, 0),
    "bilstm_tfkeras": ({Op.UNIDIRECTIONAL_SEQUENCE_LSTM, Op.REVERSE}, 0),
    "gru_tfkeras": ({Op.WHILE}, 0),
    "rnn_tfkeras": ({Op.WHILE}, 0),
    "lstm_keras3": ({Op.WHILE}, 0),
    "if_cond": ({Op.IF}, 0),
}


def _backends() -> list[str]:
    from nngpu.driver.device import Device

    try:
        Device("opencl")
    except Exception:  # no pyopencl or no OpenCL device
        return ["numpy"]
    return ["numpy", "opencl"]


def _inputs(imported, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = []
    for t in imported.inputs:
        if t.dtype.kind == "f":
            out.append(rng.uniform(-1, 1, t.shape).astype(t.dtype))
        else:
            info = np.iinfo(t.dtype)
            out.append(rng.integers(info.min, info.max, t.shape, endpoint=True).astype(t.dtype))
    return out


@pytest.mark.parametrize("backend", _backends())
@pytest.mark.parametrize("name", MODELS)
def test_converted_model_matches_tflite(name, backend):
    data = (DATA / f"{name}.tflite").read_bytes()
    imported = import_tflite(data)
    model = imported.model
    ops = {o.type for o in (model.main if isinstance(model, Model_1_3) else model).operations}
    want, tol = MODELS[name]
    assert want <= ops, f"{name}: {sorted(o.name for o in want - ops)} missing"
    inputs = _inputs(imported)
    with Session(imported, backend) as s:
        got = list(s.run(inputs).values())
    assert_close(run_reference(data, inputs, xnnpack=False), got, 1e-5, tol)


def test_while_subgraphs_become_referenced_subgraphs():
    imported = import_tflite((DATA / "lstm_keras3.tflite").read_bytes())
    model = imported.model
    assert isinstance(model, Model_1_3) and len(model.referenced) == 2  # condition and body
    assert {o.type for o in model.referenced[0].operations} >= {Op.LESS, Op.LOGICAL_AND}


def test_int64_outputs_read_as_int64():
    imported = import_tflite((DATA / "argmax_int64.tflite").read_bytes())
    assert [t.dtype for t in imported.outputs] == [np.dtype(np.int64)] * 2


def test_dynamic_batch_imports_at_another_batch():
    from .tfl_util import reference_interpreter

    data = (DATA / "dynamic_batch.tflite").read_bytes()
    it = reference_interpreter()(model_content=data)
    d = it.get_input_details()[0]
    it.resize_tensor_input(d["index"], [3, 4, 3])
    it.allocate_tensors()
    x = np.random.default_rng(8).uniform(-1, 1, (3, 4, 3)).astype(np.float32)
    it.set_tensor(d["index"], x)
    it.invoke()
    imported = import_tflite(data, input_shapes={d["name"]: [3, 4, 3]})
    assert imported.outputs[0].shape == [3, 12]
    with Session(imported, "numpy") as s:
        got = list(s.run([x]).values())
    assert_close([it.get_tensor(it.get_output_details()[0]["index"])], got, 1e-6)
    with pytest.raises(ImportError, match="does not fit its signature"):
        import_tflite(data, input_shapes={d["name"]: [3, 5, 3]})


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_if_takes_each_branch(sign):
    data = (DATA / "if_cond.tflite").read_bytes()
    imported = import_tflite(data)
    x = (sign * np.abs(np.random.default_rng(9).uniform(0.1, 1, (1, 4)))).astype(np.float32)
    with Session(imported, "numpy") as s:
        got = list(s.run([x]).values())
    assert_close(run_reference(data, [x], xnnpack=False), got, 1e-6)
