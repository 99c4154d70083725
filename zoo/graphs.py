"""Small Keras 3 graphs around particular operators: U-Nets (TRANSPOSE_CONV, CONCATENATION; or
UpSampling2D, float and int8),
depth_to_space / space_to_depth, argmax / top_k, reflect and symmetric padding (MIRROR_PAD) with
a nearest resize, an SSD-style detection head (float and int8) and a dynamic batch (SHAPE)."""
from __future__ import annotations

from typing import Any

from .convert import (
    FLOAT,
    INT8_U8,
    Input,
    Maker,
    convert_keras3,
    randomize_batch_norm,
    register,
)

MODELS: dict[str, Maker] = {}


def _conv_bn(x: Any, filters: int, stride: int = 1) -> Any:
    import keras

    x = keras.layers.Conv2D(filters, 3, strides=stride, padding="same", use_bias=False)(x)
    return keras.layers.ReLU()(keras.layers.BatchNormalization()(x))


@register(MODELS, "unet_small")
def unet_small(full: bool, seed: int) -> bytes:
    import keras

    side, base = (128, 32) if full else (32, 8)
    x = keras.Input((side, side, 3), batch_size=1, name="image")
    e1 = _conv_bn(_conv_bn(x, base), base)
    e2 = _conv_bn(_conv_bn(keras.layers.MaxPooling2D()(e1), 2 * base), 2 * base)
    mid = _conv_bn(keras.layers.MaxPooling2D()(e2), 4 * base)
    d2 = keras.layers.Conv2DTranspose(2 * base, 2, strides=2)(mid)
    d2 = _conv_bn(keras.layers.Concatenate()([d2, e2]), 2 * base)
    d1 = keras.layers.Conv2DTranspose(base, 2, strides=2)(d2)
    d1 = _conv_bn(keras.layers.Concatenate()([d1, e1]), base)
    y = keras.layers.Conv2D(2, 1, activation="sigmoid")(d1)
    model = keras.Model(x, y)
    randomize_batch_norm(model, seed)
    return convert_keras3(model, [Input("image", (1, side, side, 3))])


def _unet_upsampling(full: bool, seed: int, mode: str) -> bytes:
    """A U-Net whose decoder doubles its resolution with Keras 3's UpSampling2D, which the
    converter writes as RESHAPE to rank 5, BROADCAST_TO (or TILE) and RESHAPE back."""
    import keras

    side, base = (128, 32) if full else (64, 8)
    x = keras.Input((side, side, 3), batch_size=1, name="image")
    e1 = _conv_bn(x, base)
    e2 = _conv_bn(keras.layers.MaxPooling2D()(e1), 2 * base)
    mid = _conv_bn(keras.layers.MaxPooling2D()(e2), 4 * base)
    d2 = _conv_bn(keras.layers.Concatenate()([keras.layers.UpSampling2D()(mid), e2]), 2 * base)
    d1 = _conv_bn(keras.layers.Concatenate()([keras.layers.UpSampling2D()(d2), e1]), base)
    y = keras.layers.Conv2D(2, 1, activation="sigmoid")(d1)
    model = keras.Model(x, y)
    randomize_batch_norm(model, seed)
    return convert_keras3(model, [Input("image", (1, side, side, 3))], mode, seed)


@register(MODELS, "unet_upsampling")
def unet_upsampling(full: bool, seed: int) -> bytes:
    return _unet_upsampling(full, seed, FLOAT)


@register(MODELS, "unet_upsampling_int8", "unet_upsampling")
def unet_upsampling_int8(full: bool, seed: int) -> bytes:
    return _unet_upsampling(full, seed, INT8_U8)


@register(MODELS, "depth_space")
def depth_space(full: bool, seed: int) -> bytes:
    import keras
    import tensorflow as tf

    side = 128 if full else 16
    x = keras.Input((side, side, 3), batch_size=1, name="image")
    h = keras.layers.Conv2D(8, 3, padding="same")(x)
    h = keras.layers.Lambda(lambda t: tf.nn.space_to_depth(t, 2))(h)
    h = keras.layers.Conv2D(12, 3, padding="same")(h)
    y = keras.layers.Lambda(lambda t: tf.nn.depth_to_space(t, 2))(h)
    return convert_keras3(keras.Model(x, y), [Input("image", (1, side, side, 3))])


@register(MODELS, "argmax_topk")
def argmax_topk(full: bool, seed: int) -> bytes:
    """Scores, then their argmax (ARG_MAX) and the best five (TOPK_V2: values and indices)."""
    import keras
    import tensorflow as tf

    width = 1000 if full else 64
    x = keras.Input((width,), batch_size=1, name="features")
    scores = keras.layers.Dense(width // 2)(x)
    best = keras.layers.Lambda(lambda t: tf.argmax(t, axis=-1, output_type=tf.int32))(scores)
    top = keras.layers.Lambda(lambda t: list(tf.math.top_k(t, k=5)))(scores)
    return convert_keras3(keras.Model(x, [best, top[0], top[1]]), [Input("features", (1, width))])


@register(MODELS, "mirror_pad_resize")
def mirror_pad_resize(full: bool, seed: int) -> bytes:
    """Reflect padding before a valid conv, a nearest 2x resize, symmetric padding before another."""
    import keras
    import tensorflow as tf

    side = 128 if full else 16
    x = keras.Input((side, side, 3), batch_size=1, name="image")
    h = keras.layers.Lambda(lambda t: tf.pad(t, [[0, 0], [1, 1], [1, 1], [0, 0]], mode="REFLECT"))(x)
    h = keras.layers.Conv2D(8, 3, activation="relu")(h)
    h = keras.layers.Lambda(lambda t: tf.image.resize(t, (2 * side, 2 * side), method="nearest"))(h)
    h = keras.layers.Lambda(lambda t: tf.pad(t, [[0, 0], [2, 2], [2, 2], [0, 0]], mode="SYMMETRIC"))(h)
    y = keras.layers.Conv2D(3, 5)(h)
    return convert_keras3(keras.Model(x, y), [Input("image", (1, side, side, 3))])


def _ssd(full: bool, seed: int, mode: str) -> bytes:
    """A strided conv backbone with box and class heads on two levels, reshaped and concatenated
    the way SSD models feed their post-processing: boxes (1, N, 4), class scores (1, N, C)."""
    import keras

    side, classes, anchors = (320, 91, 6) if full else (64, 6, 3)
    x = keras.Input((side, side, 3), batch_size=1, name="image")
    h = x
    for filters in (8, 16, 24, 32):
        h = _conv_bn(h, filters, stride=2)
    levels = [h, _conv_bn(h, 48, stride=2)]
    boxes, scores = [], []
    for level in levels:
        b = keras.layers.Conv2D(anchors * 4, 3, padding="same")(level)
        c = keras.layers.Conv2D(anchors * classes, 3, padding="same")(level)
        boxes.append(keras.layers.Reshape((-1, 4))(b))
        scores.append(keras.layers.Reshape((-1, classes))(c))
    box = keras.layers.Concatenate(axis=1, name="boxes")(boxes)
    score = keras.layers.Activation("sigmoid", name="scores")(keras.layers.Concatenate(axis=1)(scores))
    model = keras.Model(x, [box, score])
    randomize_batch_norm(model, seed)
    return convert_keras3(model, [Input("image", (1, side, side, 3))], mode, seed)


@register(MODELS, "ssd_head", family="ssd_head")
def ssd_head(full: bool, seed: int) -> bytes:
    return _ssd(full, seed, FLOAT)


@register(MODELS, "ssd_head_int8", family="ssd_head")
def ssd_head_int8(full: bool, seed: int) -> bytes:
    return _ssd(full, seed, INT8_U8)


@register(MODELS, "dynamic_batch")
def dynamic_batch(full: bool, seed: int) -> bytes:
    """A batch left open: Reshape keeps it through SHAPE / STRIDED_SLICE / PACK."""
    import keras

    width = 256 if full else 16
    x = keras.Input((width,), name="features")
    h = keras.layers.Dense(2 * width, activation="relu")(x)
    h = keras.layers.Dense(4)(keras.layers.Reshape((8, width // 4))(h))
    y = keras.layers.Softmax()(keras.layers.Flatten()(h))
    return convert_keras3(keras.Model(x, y), [Input("features", (None, width))])
