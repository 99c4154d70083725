"""A zero PAD of rows and columns read only by a convolution becomes the convolution's padding
(compiler/pad_fold.py): the folded model has no PAD, and every backend gives the reference's
answer for the model as written (float, and bit for bit for uint8 with a zero point that is not
0); what the fold must leave alone stays."""
from __future__ import annotations

import numpy as np
import pytest

from nngpu import ModelBuilder
from nngpu.backends import device_backends
from nngpu.compiler.pad_fold import fold_pads
from nngpu.driver.device import Device
from nngpu.hal import ErrorStatus, OperationType as Op
from nngpu.runtime.interpreter import GraphRunner
from nngpu.testing import run_model

Q = dict(scale=0.05, zero_point=3)


def padded_conv(kind: str = "conv", pads=((0, 0), (1, 0), (2, 1), (0, 0)), padding=("VALID",), quant: bool = False,
                dilation: int = 1, twice: bool = False, seed: int = 0, second: tuple | None = None):
    """x → PAD(pads) → CONV_2D or DEPTHWISE_CONV_2D (3x3, stride 2, relu6) → output; `padding`:
    ("VALID",) / ("SAME",) implicit, or (left, right, top, bottom) explicit. `twice`: a RELU reads
    the PAD too; `second`: so does a second convolution of the kind with that padding, stride 1."""
    rng = np.random.default_rng(seed)
    b = ModelBuilder()
    c = 8
    cin = c + sum(pads[3])  # the convolution's channels, after the PAD
    if quant:
        x = b.input("x", "TENSOR_QUANT8_ASYMM", (1, 9, 10, c), **Q)
        w = b.constant(rng.integers(0, 256, (1 if kind == "depthwise" else 6, 3, 3, cin)), "TENSOR_QUANT8_ASYMM",
                       scale=0.02, zero_point=128)
        bias = b.constant(rng.integers(-50, 50, cin if kind == "depthwise" else 6), "TENSOR_INT32", scale=0.05 * 0.02)
        out = dict(dtype="TENSOR_QUANT8_ASYMM", scale=0.1, zero_point=7)
    else:
        x = b.input("x", "float32", (1, 9, 10, c))
        w = b.constant(rng.standard_normal((1 if kind == "depthwise" else 6, 3, 3, cin)).astype(np.float32))
        bias = b.constant(rng.standard_normal(cin if kind == "depthwise" else 6).astype(np.float32))
        out = {}
    p = b.op("PAD", x, np.asarray(pads, np.int32))
    code = {"VALID": 2, "SAME": 1}
    pad_args = [code[padding[0]]] if len(padding) == 1 else list(padding)
    extra = [1] if kind == "depthwise" else []  # the depth multiplier
    tail = [False, dilation, dilation] if dilation != 1 else []
    op = "DEPTHWISE_CONV_2D" if kind == "depthwise" else "CONV_2D"
    y = b.op(op, p, w, bias, *pad_args, 2, 2, *extra, 3, *tail, **out)
    b.output("y", y)
    if second is not None:
        own = [code[second[0]]] if len(second) == 1 else list(second)
        b.output("y2", b.op(op, p, w, bias, *own, 1, 1, *extra, 0, *tail, **out))
    if twice:
        b.output("p", b.op("RELU", p))
    named = b.build()
    if quant:
        xv = rng.integers(0, 256, (1, 9, 10, c)).astype(np.uint8)
    else:
        xv = rng.standard_normal((1, 9, 10, c)).astype(np.float32)
    return named.model, xv


FOLDED = {
    "conv-valid": lambda: padded_conv(),
    "depthwise-valid": lambda: padded_conv("depthwise"),
    "depthwise-explicit": lambda: padded_conv("depthwise", padding=(0, 1, 1, 0)),
    "conv-dilated": lambda: padded_conv(pads=((0, 0), (2, 3), (4, 1), (0, 0)), dilation=2),
    "conv-uint8": lambda: padded_conv(quant=True),
    "depthwise-uint8": lambda: padded_conv("depthwise", quant=True),
    "two-depthwise": lambda: padded_conv("depthwise", pads=((0, 0), (1, 1), (1, 1), (0, 0)), second=(1, 0, 0, 1)),
    "two-conv-uint8": lambda: padded_conv(quant=True, second=("VALID",)),
}
KEPT = {
    "channels-padded": lambda: padded_conv(pads=((0, 0), (1, 1), (1, 1), (0, 8))),
    "same-padding": lambda: padded_conv(padding=("SAME",)),
    "as-large-as-the-filter": lambda: padded_conv(pads=((0, 0), (3, 0), (0, 0), (0, 0))),
    "read-twice": lambda: padded_conv(twice=True),
    "second-as-large-as-the-filter": lambda: padded_conv(second=(2, 0, 0, 0)),
}


def _types(model) -> list[Op]:
    return [op.type for op in model.main.operations]


@pytest.mark.parametrize("name", FOLDED)
def test_folds(name):
    model, _ = FOLDED[name]()
    assert Op.PAD in _types(model) and Op.PAD not in _types(fold_pads(model))


@pytest.mark.parametrize("name", KEPT)
def test_leaves_alone(name):
    model, _ = KEPT[name]()
    assert fold_pads(model) is model


@pytest.mark.parametrize("backend", ["numpy", *device_backends()])
@pytest.mark.parametrize("name", [*FOLDED, *KEPT])
def test_answers_as_written(backend, name):
    model, x = {**FOLDED, **KEPT}[name]()
    want = GraphRunner(model).run([x])  # the reference on the model as written, PAD included
    got = run_model(model, [x], [1 << 16] * len(want), Device(backend), version=13)
    assert got.status == ErrorStatus.NONE and len(got.outputs) == len(want)
    for g, w in zip(got.outputs, want):
        if w.dtype == np.uint8:
            np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
