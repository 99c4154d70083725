"""TensorFlow -> .tflite with TensorFlow's own converter: the settings every zoo model shares.

A model is a callable on tensors (a Keras 3 model) plus the specs of its inputs. `convert` traces
it into a concrete function, freezes its weights and converts it as float, fp16-weight or
full-integer int8 (uint8 or int8 at the boundary). A tf_keras (Keras 2) model goes through
`convert_keras2`, the path that keeps TFLite's fused recurrent operators."""
from __future__ import annotations

import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import tensorflow as tf

FLOAT, FP16, INT8_U8, INT8_I8 = "float", "fp16", "int8_u8", "int8_i8"
MODES = (FLOAT, FP16, INT8_U8, INT8_I8)
# Integer inputs that are not quantized are indices (an Embedding's): drawn from [0, INDEX_HIGH),
# the same rule as compare.py's, so every vocabulary in the zoo is at least this large.
INDEX_HIGH = 100


@dataclass(frozen=True)
class Input:
    name: str
    shape: tuple[int | None, ...]   # None: a dimension the model leaves open (a dynamic batch)
    dtype: Any = tf.float32


class Unavailable(RuntimeError):
    """A model this environment cannot make (e.g. tf_keras is not installed)."""


# A model maker: full size or reduced -> the .tflite bytes.
Maker = Callable[[bool], bytes]


def stable_seed(name: str) -> int:
    """The seed of a model, from its name (the same on every run and machine)."""
    return zlib.crc32(name.encode()) % 2**31


def set_seed(seed: int) -> None:
    """A fresh Keras session (layer names restart) and the Python, numpy and TensorFlow seeds, so a
    model comes out the same whichever others are made before it in one process."""
    import keras

    keras.backend.clear_session()
    keras.utils.set_random_seed(seed)


def register(table: dict[str, Maker], name: str, family: str | None = None
             ) -> Callable[[Callable[[bool, int], bytes]], Callable[[bool, int], bytes]]:
    """Decorator: enter fn(full, seed) in `table` under `name`, seeded from `family` (models of
    one family, e.g. float and int8, share their weights) or from `name`."""
    def deco(fn: Callable[[bool, int], bytes]) -> Callable[[bool, int], bytes]:
        seed = stable_seed(family or name)

        def make(full: bool) -> bytes:
            set_seed(seed)
            return fn(full, seed)

        table[name] = make
        return fn
    return deco


def randomize_batch_norm(model: Any, seed: int) -> None:
    """Give every BatchNormalization layer non-trivial statistics: weights=None leaves them the
    identity, which the converter folds away without testing the folded scale and shift."""
    rng = np.random.default_rng(seed)
    for layer in model.layers:
        if type(layer).__name__ != "BatchNormalization":
            continue
        for attr, lo, hi in (("gamma", 0.6, 1.4), ("beta", -0.1, 0.1), ("moving_mean", -0.1, 0.1),
                             ("moving_variance", 0.6, 1.4)):
            var = getattr(layer, attr, None)  # gamma / beta are None without scale / center
            if var is not None:
                var.assign(rng.uniform(lo, hi, tuple(var.shape)).astype(np.float32))


def sample(inputs: Sequence[Input], rng: np.random.Generator, batch: int = 1) -> list[np.ndarray]:
    """One random value per input: floats in [-1, 1), integers in [0, INDEX_HIGH)."""
    out = []
    for spec in inputs:
        shape = [batch if d is None else d for d in spec.shape]
        if spec.dtype.is_floating:
            out.append(rng.uniform(-1.0, 1.0, shape).astype(np.float32))
        else:
            out.append(rng.integers(0, INDEX_HIGH, shape).astype(spec.dtype.as_numpy_dtype))
    return out


def _representative(inputs: Sequence[Input], seed: int, count: int = 16) -> Callable[[], Iterator[list]]:
    def gen() -> Iterator[list[np.ndarray]]:
        rng = np.random.default_rng(seed)
        for _ in range(count):
            yield sample(inputs, rng)
    return gen


def _configure(conv: Any, mode: str, inputs: Sequence[Input], seed: int) -> Any:
    if mode == FP16:
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.target_spec.supported_types = [tf.float16]
    elif mode in (INT8_U8, INT8_I8):
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.representative_dataset = _representative(inputs, seed)
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        boundary = tf.uint8 if mode == INT8_U8 else tf.int8
        conv.inference_input_type = boundary
        conv.inference_output_type = boundary
    elif mode != FLOAT:
        raise ValueError(f"unknown conversion mode {mode!r}; one of {', '.join(MODES)}")
    return conv


def convert(fn: Callable[..., Any], inputs: Sequence[Input], mode: str = FLOAT, seed: int = 0,
            keep: Any = None) -> bytes:
    """The .tflite bytes of `fn` traced on `inputs` (`keep`: the object owning its variables)."""
    specs = [tf.TensorSpec(i.shape, i.dtype, name=i.name) for i in inputs]
    from tensorflow.python.framework.convert_to_constants import (
        convert_variables_to_constants_v2,
    )

    # Frozen first: traced as is, the weights stay resource variables (VAR_HANDLE / READ_VARIABLE).
    concrete = convert_variables_to_constants_v2(tf.function(fn).get_concrete_function(*specs))
    conv = tf.lite.TFLiteConverter.from_concrete_functions([concrete], keep if keep is not None else fn)
    return registered_versions(_configure(conv, mode, inputs, seed).convert())


# TensorFlow 2.21's converter marks an int8 TILE as version 3, which no released runtime registers
# (its own interpreter and ai-edge-litert 2.3 both refuse the file); their TILE kernel takes int8
# under version 2, so the zoo writes that, and TFLite can compute the reference.
_RUNNABLE_VERSION = {"TILE": 2}


def registered_versions(data: bytes) -> bytes:
    """`data` with each operator code of _RUNNABLE_VERSION lowered to the version given there."""
    import struct

    import tflite

    out = bytearray(data)
    model = tflite.Model.GetRootAsModel(out, 0)
    for k in range(model.OperatorCodesLength()):
        code = model.OperatorCodes(k)
        builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
        name = next((n for n, v in vars(tflite.BuiltinOperator).items() if v == builtin), "")
        field = code._tab.Offset(8)   # OperatorCode.version, the table's third field
        if name in _RUNNABLE_VERSION and field and code.Version() > _RUNNABLE_VERSION[name]:
            struct.pack_into("<i", out, code._tab.Pos + field, _RUNNABLE_VERSION[name])
    return bytes(out)


def convert_keras3(model: Any, inputs: Sequence[Input], mode: str = FLOAT, seed: int = 0) -> bytes:
    """A Keras 3 model, called in inference mode on one input or on a list of them."""
    if len(inputs) == 1:
        return convert(lambda x: model(x, training=False), inputs, mode, seed, keep=model)
    return convert(lambda *xs: model(list(xs), training=False), inputs, mode, seed, keep=model)


def convert_keras2(model: Any, inputs: Sequence[Input], mode: str = FLOAT, seed: int = 0) -> bytes:
    """A tf_keras (Keras 2) model through from_keras_model: its LSTMs become
    UNIDIRECTIONAL_SEQUENCE_LSTM instead of a WHILE loop."""
    conv = tf.lite.TFLiteConverter.from_keras_model(model)
    return _configure(conv, mode, inputs, seed).convert()
