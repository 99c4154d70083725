"""The image classifiers of keras.applications, with random weights (weights=None) and random
batch-norm statistics. Reduced: 64x64 or 96x96 inputs, small width multipliers (0.25, 0.35,
0.75), 10 classes; full size: 224x224, alpha 1, 1000 classes."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .convert import (
    FLOAT,
    FP16,
    INT8_I8,
    INT8_U8,
    Input,
    Maker,
    convert_keras3,
    randomize_batch_norm,
    register,
)

Built = tuple[Any, list[Input]]


def _app(ctor: Callable[..., Any], size: int, full: bool, seed: int, **reduced: Any) -> Built:
    side = 224 if full else size
    kwargs = {} if full else {"classes": 10, **reduced}
    model = ctor(input_shape=(side, side, 3), weights=None, **kwargs)
    randomize_batch_norm(model, seed)
    return model, [Input("image", (1, side, side, 3))]


def mobilenet_v1(full: bool, seed: int) -> Built:
    import keras

    return _app(keras.applications.MobileNet, 96, full, seed, alpha=0.25)


def mobilenet_v2(full: bool, seed: int) -> Built:
    import keras

    return _app(keras.applications.MobileNetV2, 96, full, seed, alpha=0.35)


def mobilenet_v3_small(full: bool, seed: int) -> Built:
    import keras

    # Inputs in [-1, 1] as for the other MobileNets, not [0, 255] through a Rescaling layer.
    def ctor(**kw: Any) -> Any:
        return keras.applications.MobileNetV3Small(include_preprocessing=False, **kw)

    return _app(ctor, 96, full, seed, alpha=0.75)


def mobilenet_v3_large(full: bool, seed: int) -> Built:
    import keras

    def ctor(**kw: Any) -> Any:
        return keras.applications.MobileNetV3Large(include_preprocessing=False, **kw)

    return _app(ctor, 96, full, seed, alpha=0.35)


def efficientnet_b0(full: bool, seed: int) -> Built:
    import keras

    return _app(keras.applications.EfficientNetB0, 96, full, seed)


def efficientnet_v2_b0(full: bool, seed: int) -> Built:
    import keras

    return _app(keras.applications.EfficientNetV2B0, 96, full, seed)


def resnet50(full: bool, seed: int) -> Built:
    import keras

    return _app(keras.applications.ResNet50, 64, full, seed)


def densenet121(full: bool, seed: int) -> Built:
    import keras

    return _app(keras.applications.DenseNet121, 64, full, seed)


def nasnet_mobile(full: bool, seed: int) -> Built:
    import keras

    return _app(keras.applications.NASNetMobile, 96, full, seed)


# name -> builder; the MobileNets and EfficientNet-B0 also come as fp16-weight and full-integer int8 models.
BUILDERS: dict[str, Callable[[bool, int], Built]] = {
    "mobilenet_v1": mobilenet_v1, "mobilenet_v2": mobilenet_v2, "mobilenet_v3_small": mobilenet_v3_small,
    "mobilenet_v3_large": mobilenet_v3_large,
    "efficientnet_b0": efficientnet_b0, "efficientnet_v2_b0": efficientnet_v2_b0, "resnet50": resnet50,
    "densenet121": densenet121, "nasnet_mobile": nasnet_mobile,
}
QUANTIZED_FAMILIES = (
    "mobilenet_v1", "mobilenet_v2", "mobilenet_v3_small", "mobilenet_v3_large", "efficientnet_b0")
MODELS: dict[str, Maker] = {}


def _enter(family: str, build: Callable[[bool, int], Built], mode: str) -> None:
    def make(full: bool, seed: int) -> bytes:
        model, inputs = build(full, seed)
        return convert_keras3(model, inputs, mode, seed)

    register(MODELS, family if mode == FLOAT else f"{family}_{mode}", family)(make)


for _family, _build in BUILDERS.items():
    for _mode in (FLOAT, FP16, INT8_U8, INT8_I8) if _family in QUANTIZED_FAMILIES else (FLOAT,):
        _enter(_family, _build, _mode)
