"""TFLite's recurrent builtins (RNN, UNIDIRECTIONAL_SEQUENCE_RNN, BIDIRECTIONAL_SEQUENCE_RNN,
SVDF, LSTM, BIDIRECTIONAL_SEQUENCE_LSTM), built in the test with zero-initialised state tensors,
against the interpreter's first invocation. (UNIDIRECTIONAL_SEQUENCE_LSTM comes from TensorFlow's
converter: test_lowering_models.)"""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("tflite", reason="the `tflite` flatbuffer package is not installed")

from nngpu.hal.types import Model_1_3, OperationType
from nngpu.tflite import import_tflite

from .tfl_util import assert_close, run_nngpu, run_reference
from .tflbuild import TFLModel, opt

Op = OperationType
RNG = np.random.default_rng(11)
B, T_, I, U = 2, 4, 3, 5  # batch, time, input size, units


def _w(m: TFLModel, name: str, *shape) -> int:
    return m.const(name, RNG.uniform(-0.6, 0.6, shape).astype(np.float32))


def _state(m: TFLModel, name: str, *shape) -> int:
    return m.tensor(name, list(shape), variable=True)


def _check(m: TFLModel, x: int, outs: list[int], shape, op: OperationType) -> None:
    data = m.build([x], outs)
    imported = import_tflite(data)
    model = imported.model
    assert op in {o.type for o in (model.main if isinstance(model, Model_1_3) else model).operations}
    assert any("starts at zero" in w for w in imported.warnings)
    inp = [RNG.uniform(-1, 1, shape).astype(np.float32)]
    assert_close(run_reference(data, inp, xnnpack=False), run_nngpu(imported, inp), 1e-5)


def _rnn_weights(m: TFLModel, p: str) -> list[int]:
    return [_w(m, f"{p}w", U, I), _w(m, f"{p}r", U, U), _w(m, f"{p}b", U)]


def test_rnn():
    m = TFLModel()
    x, y = m.tensor("x", [B, I]), m.tensor("y", [B, U])
    m.op("RNN", [x, *_rnn_weights(m, ""), _state(m, "h", B, U)], [y], "RNNOptions",
         lambda b: opt(b, "RNNOptions", FusedActivationFunction=4))
    _check(m, x, [y], (B, I), Op.RNN)


def test_unidirectional_sequence_rnn():
    m = TFLModel()
    x, y = m.tensor("x", [B, T_, I]), m.tensor("y", [B, T_, U])
    m.op("UNIDIRECTIONAL_SEQUENCE_RNN", [x, *_rnn_weights(m, ""), _state(m, "h", B, U)], [y], "SequenceRNNOptions",
         lambda b: opt(b, "SequenceRNNOptions", TimeMajor=False, FusedActivationFunction=1))
    _check(m, x, [y], (B, T_, I), Op.UNIDIRECTIONAL_SEQUENCE_RNN)


def test_bidirectional_sequence_rnn_merged():
    m = TFLModel()
    x, y = m.tensor("x", [B, T_, I]), m.tensor("y", [B, T_, 2 * U])
    ins = [x, *_rnn_weights(m, "f"), _state(m, "hf", B, U), *_rnn_weights(m, "b"), _state(m, "hb", B, U), -1, -1, -1]
    m.op("BIDIRECTIONAL_SEQUENCE_RNN", ins, [y], "BidirectionalSequenceRNNOptions",
         lambda b: opt(b, "BidirectionalSequenceRNNOptions", TimeMajor=False, FusedActivationFunction=4,
                       MergeOutputs=True))
    _check(m, x, [y], (B, T_, I), Op.BIDIRECTIONAL_SEQUENCE_RNN)


def test_svdf():
    rank, memory = 2, 3
    filters = U * rank
    m = TFLModel()
    x, y = m.tensor("x", [B, I]), m.tensor("y", [B, U])
    ins = [x, _w(m, "wf", filters, I), _w(m, "wt", filters, memory), _w(m, "b", U), _state(m, "s", B, memory * filters)]
    m.op("SVDF", ins, [y], "SVDFOptions", lambda b: opt(b, "SVDFOptions", Rank=rank, FusedActivationFunction=1))
    _check(m, x, [y], (B, I), Op.SVDF)


def _lstm_weights(m: TFLModel, p: str, peephole: bool) -> list[int]:
    ws = [_w(m, f"{p}x{g}", U, I) for g in "ifco"] + [_w(m, f"{p}h{g}", U, U) for g in "ifco"]
    ws += [_w(m, f"{p}p{g}", U) for g in "ifo"] if peephole else [-1, -1, -1]
    ws += [m.const(f"{p}b{g}", np.full(U, 1.0 if g == "f" else 0.1, np.float32)) for g in "ifco"]
    return ws + [-1, -1]  # no projection


def test_lstm_with_peepholes():
    m = TFLModel()
    x, y = m.tensor("x", [B, I]), m.tensor("y", [B, U])
    ins = [x, *_lstm_weights(m, "", True), _state(m, "h", B, U), _state(m, "c", B, U)]
    m.op("LSTM", ins, [y], "LSTMOptions",
         lambda b: opt(b, "LSTMOptions", FusedActivationFunction=4, CellClip=0.0, ProjClip=0.0, KernelType=0))
    _check(m, x, [y], (B, I), Op.LSTM)


def test_bidirectional_sequence_lstm():
    m = TFLModel()
    x = m.tensor("x", [B, T_, I])
    fw, bw = m.tensor("fw", [B, T_, U]), m.tensor("bw", [B, T_, U])
    ins = [x, *_lstm_weights(m, "f", False), *_lstm_weights(m, "b", False), _state(m, "hf", B, U),
           _state(m, "cf", B, U), _state(m, "hb", B, U), _state(m, "cb", B, U)] + [-1] * 9
    m.op("BIDIRECTIONAL_SEQUENCE_LSTM", ins, [fw, bw], "BidirectionalSequenceLSTMOptions",
         lambda b: opt(b, "BidirectionalSequenceLSTMOptions", FusedActivationFunction=4, CellClip=0.0,
                       ProjClip=0.0, MergeOutputs=False, TimeMajor=False))
    _check(m, x, [fw, bw], (B, T_, I), Op.BIDIRECTIONAL_SEQUENCE_LSTM)
