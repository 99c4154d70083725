"""A TFLite model with a dynamic batch (shape signature [-1, 16]): Session prepares it at the
stored shape, again at any batch the signature allows (as TFLite's resize_tensor_input), at
`input_shapes` when asked, and refuses a shape the signature does not allow."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import nngpu
from nngpu.session import InputError

pytest.importorskip("ai_edge_litert")
from nngpu.tflite.compare import tflite_run  # noqa: E402  (needs ai_edge_litert)

MODEL = Path(__file__).resolve().parents[1] / "data" / "zoo" / "dynamic_batch.tflite"


def _input(batch: int) -> np.ndarray:
    return np.random.default_rng(batch).uniform(-1, 1, (batch, 16)).astype(np.float32)


def _expected(x: np.ndarray) -> list[np.ndarray]:
    return tflite_run(MODEL, [x])[0]


def test_each_batch_the_signature_allows_is_prepared_and_matches_tflite():
    with nngpu.Session(MODEL, backend="numpy") as s:
        assert s.inputs[0].shape == [1, 16] and s.inputs[0].signature == [-1, 16]
        for batch in (1, 3, 1, 2):
            x = _input(batch)
            got = list(s.run([x]).values())
            assert s.inputs[0].shape == [batch, 16]
            for g, e in zip(got, _expected(x)):
                np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
        assert len(s._prepared) == 3  # batches 1, 3 and 2, the first taken again from the cache


def test_input_shapes_prepares_at_the_asked_shape():
    with nngpu.Session(MODEL, backend="numpy") as probe:
        name = probe.input_names[0]
    with nngpu.Session(MODEL, backend="numpy", input_shapes={name: [4, 16]}) as s:
        assert s.inputs[0].shape == [4, 16]
        x = _input(4)
        for g, e in zip(s.run([x]).values(), _expected(x)):
            np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


def test_a_shape_outside_the_signature_is_refused():
    with nngpu.Session(MODEL, backend="numpy") as s:
        with pytest.raises(InputError, match=r"shape \[2, 17\]"):
            s.run([np.zeros((2, 17), np.float32)])


def test_input_shapes_is_refused_for_a_model_that_declares_its_shapes():
    from nngpu.named_model import ModelLoadError

    b = nngpu.ModelBuilder()
    b.output("y", b.relu(b.input("x", np.float32, [2])))
    with pytest.raises(ModelLoadError, match="input_shapes applies to .tflite models only"):
        nngpu.Session(b.build(), backend="numpy", input_shapes={"x": [3]})
