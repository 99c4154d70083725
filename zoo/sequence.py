"""Sequence models: recurrent layers in Keras 3 (which convert to WHILE loops) and in tf_keras /
Keras 2 (UNIDIRECTIONAL_SEQUENCE_LSTM), a Conv1D text classifier over an Embedding, and a
transformer encoder block (MultiHeadAttention: BATCH_MATMUL)."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .convert import Input, Maker, Unavailable, convert_keras2, convert_keras3, register

MODELS: dict[str, Maker] = {}


def _dims(full: bool) -> tuple[int, int, int]:
    """(time steps, features, units)."""
    return (64, 32, 128) if full else (12, 8, 16)


def _keras3_recurrent(layer: Callable[[Any], Any], full: bool) -> bytes:
    import keras

    steps, feats, _ = _dims(full)
    x = keras.Input((steps, feats), batch_size=1, name="sequence")
    y = keras.layers.Dense(4)(layer(x))
    return convert_keras3(keras.Model(x, y), [Input("sequence", (1, steps, feats))])


@register(MODELS, "lstm_keras3")
def lstm_keras3(full: bool, seed: int) -> bytes:
    import keras

    units = _dims(full)[2]
    return _keras3_recurrent(keras.layers.LSTM(units, return_sequences=True), full)


@register(MODELS, "gru_keras3")
def gru_keras3(full: bool, seed: int) -> bytes:
    import keras

    return _keras3_recurrent(keras.layers.GRU(_dims(full)[2]), full)


@register(MODELS, "bilstm_keras3")
def bilstm_keras3(full: bool, seed: int) -> bytes:
    import keras

    units = _dims(full)[2] // 2
    return _keras3_recurrent(keras.layers.Bidirectional(keras.layers.LSTM(units, return_sequences=True)), full)


def _tf_keras() -> Any:
    try:
        import tf_keras
    except ImportError as e:
        raise Unavailable("tf_keras is not installed (pip install tf-keras matching tensorflow)") from e
    return tf_keras


def _keras2_recurrent(make_layer: Callable[[Any], Any], full: bool) -> bytes:
    k2 = _tf_keras()
    steps, feats, _ = _dims(full)
    model = k2.Sequential([k2.Input((steps, feats), batch_size=1, name="sequence"), make_layer(k2.layers),
                           k2.layers.Dense(4)])
    return convert_keras2(model, [Input("sequence", (1, steps, feats))])


@register(MODELS, "lstm_keras2")
def lstm_keras2(full: bool, seed: int) -> bytes:
    units = _dims(full)[2]
    return _keras2_recurrent(lambda layers: layers.LSTM(units, return_sequences=True), full)


@register(MODELS, "gru_keras2")
def gru_keras2(full: bool, seed: int) -> bytes:
    units = _dims(full)[2]
    return _keras2_recurrent(lambda layers: layers.GRU(units), full)


@register(MODELS, "bilstm_keras2")
def bilstm_keras2(full: bool, seed: int) -> bytes:
    units = _dims(full)[2] // 2
    return _keras2_recurrent(
        lambda layers: layers.Bidirectional(layers.LSTM(units, return_sequences=True)), full)


@register(MODELS, "text_conv1d")
def text_conv1d(full: bool, seed: int) -> bytes:
    """Token ids -> Embedding (GATHER) -> Conv1D -> global max pool -> softmax over 4 classes."""
    import keras
    import tensorflow as tf

    length, vocab, width = (256, 20000, 128) if full else (32, 256, 16)
    x = keras.Input((length,), batch_size=1, dtype="int32", name="tokens")
    h = keras.layers.Embedding(vocab, width)(x)
    h = keras.layers.Conv1D(2 * width, 5, activation="relu")(h)
    h = keras.layers.GlobalMaxPooling1D()(h)
    y = keras.layers.Dense(4, activation="softmax")(h)
    return convert_keras3(keras.Model(x, y), [Input("tokens", (1, length), tf.int32)])


@register(MODELS, "transformer_encoder")
def transformer_encoder(full: bool, seed: int) -> bytes:
    """One post-norm encoder block: self-attention, then a ReLU feed-forward, each with a residual."""
    import keras

    steps, width, heads = (128, 256, 8) if full else (16, 32, 4)
    x = keras.Input((steps, width), batch_size=1, name="tokens")
    att = keras.layers.MultiHeadAttention(num_heads=heads, key_dim=width // heads)(x, x)
    h = keras.layers.LayerNormalization()(x + att)
    ff = keras.layers.Dense(width)(keras.layers.Dense(2 * width, activation="relu")(h))
    y = keras.layers.LayerNormalization()(h + ff)
    return convert_keras3(keras.Model(x, y), [Input("tokens", (1, steps, width))])
