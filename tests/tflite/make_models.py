"""Generate the small TensorFlow-converted .tflite models the lowering tests use.

    .venv-zoo/bin/python tests/tflite/make_models.py [DEST]     # default DEST: tests/data/tflite

Runs under the zoo virtualenv (tensorflow-cpu 2.21 with tf_keras), never under nngpu's: the
committed files in tests/data/tflite/ let CI test without TensorFlow. Each model is tiny (< 50 KB)
and exercises one lowering: requantization at a full-integer model's uint8 / int8 boundary,
same-scale NNAPI ops (MEAN), int8 ops NNAPI has only for float (EXP), SHAPE of a dynamic batch,
Keras 3 UpSampling2D (a rank-5 RESHAPE/BROADCAST_TO pattern), int64 ARG_MAX, and recurrent layers
(tf_keras LSTM -> UNIDIRECTIONAL_SEQUENCE_LSTM, Keras 3 LSTM -> WHILE, bidirectional LSTM), and
tf.cond (IF)."""
from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np
import tensorflow as tf

RNG = np.random.default_rng(0)


def _convert(fn_or_model, quant: str | None = None, sample_shape=None, concrete=None) -> bytes:
    """quant: None (float), "uint8" / "int8" (full integer with that I/O type)."""
    if concrete is not None:
        conv = tf.lite.TFLiteConverter.from_concrete_functions([concrete])
    else:
        conv = tf.lite.TFLiteConverter.from_keras_model(fn_or_model)
    if quant:
        def rep():
            for _ in range(32):
                yield [RNG.uniform(-1, 1, sample_shape).astype(np.float32)]
        conv.optimizations = [tf.lite.Optimize.DEFAULT]
        conv.representative_dataset = rep
        conv.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS_INT8]
        conv.inference_input_type = getattr(tf, quant)
        conv.inference_output_type = getattr(tf, quant)
    return conv.convert()


def _keras3():
    import keras
    return keras


def cnn(quant: str | None) -> bytes:
    """conv -> pool -> global mean -> dense -> softmax (MEAN needs a requantize when quantized)."""
    keras = _keras3()
    keras.utils.set_random_seed(1)
    m = keras.Sequential([keras.Input((8, 8, 3)), keras.layers.Conv2D(4, 3, activation="relu"),
                          keras.layers.MaxPooling2D(), keras.layers.GlobalAveragePooling2D(),
                          keras.layers.Dense(5), keras.layers.Softmax()])
    return _convert(m, quant, (1, 8, 8, 3))


def exp_int8() -> bytes:
    """EXP / LOG / RSQRT on int8 (NNAPI has them only for float)."""
    @tf.function(input_signature=[tf.TensorSpec([1, 16], tf.float32)])
    def f(x):
        return tf.exp(x), tf.math.log(x + 1.5), tf.math.rsqrt(x + 1.5)
    return _convert(None, "int8", (1, 16), f.get_concrete_function())


def dynamic_batch() -> bytes:
    """A reshape through tf.shape of a dynamic batch (SHAPE, STRIDED_SLICE, PACK at import)."""
    @tf.function(input_signature=[tf.TensorSpec([None, 4, 3], tf.float32)])
    def f(x):
        n = tf.shape(x)[0]
        return tf.reshape(x, tf.stack([n, 12])) * 2.0
    return _convert(None, None, None, f.get_concrete_function())


def upsampling() -> bytes:
    keras = _keras3()
    m = keras.Sequential([keras.Input((3, 4, 2)), keras.layers.UpSampling2D(2),
                          keras.layers.Conv2D(2, 1)])
    return _convert(m)


def argmax64() -> bytes:
    @tf.function(input_signature=[tf.TensorSpec([2, 7], tf.float32)])
    def f(x):
        return tf.math.argmax(x, axis=1, output_type=tf.int64), tf.math.argmin(x, axis=1, output_type=tf.int64)
    return _convert(None, None, None, f.get_concrete_function())


def lstm_tfkeras(bidirectional: bool = False, gru: bool = False) -> bytes:
    import tf_keras
    tf_keras.utils.set_random_seed(2)
    layer = tf_keras.layers.GRU(6) if gru else tf_keras.layers.LSTM(6, return_sequences=bidirectional)
    if bidirectional:
        layer = tf_keras.layers.Bidirectional(layer)
    m = tf_keras.Sequential([tf_keras.Input((5, 3), batch_size=1), layer])
    conv = tf.lite.TFLiteConverter.from_keras_model(m)
    return conv.convert()


def lstm_keras3() -> bytes:
    keras = _keras3()
    keras.utils.set_random_seed(3)
    m = keras.Sequential([keras.Input((5, 3), batch_size=1), keras.layers.LSTM(4)])
    return _convert(m)


def rnn_tfkeras() -> bytes:
    import tf_keras
    tf_keras.utils.set_random_seed(4)
    m = tf_keras.Sequential([tf_keras.Input((5, 3), batch_size=1), tf_keras.layers.SimpleRNN(4)])
    return tf.lite.TFLiteConverter.from_keras_model(m).convert()


def if_cond() -> bytes:
    """tf.cond on a data-dependent predicate: IF with two branch subgraphs."""
    @tf.function(input_signature=[tf.TensorSpec([1, 4], tf.float32)])
    def f(x):
        return tf.cond(tf.reduce_sum(x) > 0, lambda: x * 2.0, lambda: tf.nn.relu(x) - 1.0)
    return _convert(None, None, None, f.get_concrete_function())


MODELS = {
    "cnn_float": lambda: cnn(None),
    "cnn_uint8": lambda: cnn("uint8"),
    "cnn_int8": lambda: cnn("int8"),
    "exp_int8": exp_int8,
    "dynamic_batch": dynamic_batch,
    "upsampling2d": upsampling,
    "argmax_int64": argmax64,
    "lstm_tfkeras": lstm_tfkeras,
    "bilstm_tfkeras": lambda: lstm_tfkeras(bidirectional=True),
    "gru_tfkeras": lambda: lstm_tfkeras(gru=True),
    "rnn_tfkeras": rnn_tfkeras,
    "lstm_keras3": lstm_keras3,
    "if_cond": if_cond,
}


def main(argv: list[str]) -> int:
    dest = Path(argv[0]) if argv else Path(__file__).resolve().parents[1] / "data" / "tflite"
    dest.mkdir(parents=True, exist_ok=True)
    names = argv[1:] or list(MODELS)
    for name in names:
        data = MODELS[name]()
        (dest / f"{name}.tflite").write_bytes(data)
        print(f"{name}.tflite {len(data)} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
