"""Recurrent and random ops: edges the corpus lacks, checked against plain loops, and error paths."""
from __future__ import annotations

import numpy as np
import pytest

from nngpu.hal.types import ErrorStatus, OperationType as Op
from nngpu.hal.types import OperandType as T
from nngpu.ops import load_all
from nngpu.ops.node import OpNode
from nngpu.ops.registry import OpError, lookup
from nngpu.testing import Value, omitted, output, run_op, scalar, single_op_model, tensor

load_all()

F32 = T.TENSOR_FLOAT32
RNG = np.random.default_rng(7)


def _rand(*shape):
    return RNG.uniform(-0.5, 0.5, shape).astype(np.float32)


def compiler_shapes(op_type, ins: list[Value], outs, absent: tuple[int, ...] = ()) -> list[tuple[int, ...]]:
    """The output shapes the shape function gives the compiler at prepare: every input's shape
    but those of `absent` (model inputs the execution leaves without a value), only the
    constants' values."""
    model = single_op_model(op_type, ins, outs)
    shapes = {i: () if v.omitted else tuple(v.dims) for i, v in enumerate(ins) if i not in absent}
    values = [v.value if v.const else None for v in ins]
    return OpNode(lookup(op_type), 0, model.operations[0], model.operands, values, shapes).output_shapes()


# ---- UNIDIRECTIONAL_SEQUENCE_RNN (no corpus cases) -------------------------------------------

def _rnn_loop(x_tm, w, r, b, h):
    outs = []
    for t in range(x_tm.shape[0]):
        h = np.maximum(x_tm[t].astype(np.float64) @ w.T + h @ r.T + b, 0)
        outs.append(h)
    return np.stack(outs), h


@pytest.mark.parametrize("time_major", [0, 1])
def test_unidirectional_rnn_matches_loop(time_major):
    T_, B, I, U = 4, 2, 3, 5
    x = _rand(T_, B, I) if time_major else _rand(B, T_, I)
    w, r, b, h = _rand(U, I), _rand(U, U), _rand(U), _rand(B, U)
    ins = [tensor(F32, x), tensor(F32, w), tensor(F32, r), tensor(F32, b), tensor(F32, h),
           scalar(T.INT32, 1), scalar(T.INT32, time_major)]
    outs = [output(F32, list(x.shape[:2]) + [U])]   # the 1.3 state output needs prepareModel_1_3
    res = run_op(Op.UNIDIRECTIONAL_SEQUENCE_RNN, ins, outs)
    assert res.status == ErrorStatus.NONE
    x_tm = x if time_major else x.transpose(1, 0, 2)
    want, _ = _rnn_loop(x_tm, w, r, b, h)
    if not time_major:
        want = want.transpose(1, 0, 2)
    np.testing.assert_allclose(res.outputs[0], want, atol=1e-5)
    assert compiler_shapes(Op.UNIDIRECTIONAL_SEQUENCE_RNN, ins, outs) == [want.shape]


def test_unidirectional_rnn_bad_time_major_is_an_error():
    res = run_op(Op.UNIDIRECTIONAL_SEQUENCE_RNN,
                 [tensor(F32, _rand(2, 1, 3)), tensor(F32, _rand(4, 3)), tensor(F32, _rand(4, 4)),
                  tensor(F32, _rand(4)), tensor(F32, _rand(1, 4)), scalar(T.INT32, 0), scalar(T.INT32, 2)],
                 [output(F32, [2, 1, 4])])
    assert res.status != ErrorStatus.NONE


def test_rnn_state_shape_mismatch_is_an_error():
    res = run_op(Op.RNN,
                 [tensor(F32, _rand(2, 3)), tensor(F32, _rand(4, 3)), tensor(F32, _rand(4, 4)),
                  tensor(F32, _rand(4)), tensor(F32, _rand(2, 5)), scalar(T.INT32, 0)],
                 [output(F32, [2, 4]), output(F32, [2, 4])])
    assert res.status != ErrorStatus.NONE


# ---- SVDF ------------------------------------------------------------------------------------

def test_svdf_rank2_matches_loop():
    B, I, U, rank, M = 2, 3, 2, 2, 4
    F = U * rank
    x, wf, wt, bias = _rand(B, I), _rand(F, I), _rand(F, M), _rand(U)
    state = _rand(B, F * M)
    res = run_op(Op.SVDF, [tensor(F32, x), tensor(F32, wf), tensor(F32, wt), tensor(F32, bias),
                           tensor(F32, state), scalar(T.INT32, rank), scalar(T.INT32, 0)],
                 [output(F32, [B, F * M]), output(F32, [B, U])])
    assert res.status == ErrorStatus.NONE
    want = np.zeros((B, U))
    new_state = np.zeros((B, F * M))
    for b in range(B):
        for f in range(F):
            mem = list(state[b, f * M:(f + 1) * M])
            mem[-1] = float(np.dot(wf[f], x[b]))
            want[b, f // rank] += float(np.dot(wt[f], mem))
            new_state[b, f * M:(f + 1) * M] = mem[1:] + [0.0]
    want += bias
    np.testing.assert_allclose(res.outputs[1], want, atol=1e-5)
    np.testing.assert_allclose(res.outputs[0], new_state, atol=1e-6)


def test_svdf_rank_not_dividing_filters_is_an_error():
    res = run_op(Op.SVDF, [tensor(F32, _rand(1, 3)), tensor(F32, _rand(3, 3)), tensor(F32, _rand(3, 2)),
                           omitted(F32), tensor(F32, _rand(1, 6)), scalar(T.INT32, 2), scalar(T.INT32, 0)],
                 [output(F32, [1, 6]), output(F32, [1, 1])])
    assert res.status != ErrorStatus.NONE


# ---- LSTM ------------------------------------------------------------------------------------

def _lstm_inputs(n_in=2, n_cell=3, batch=1, cifg_break=False):
    ins = [tensor(F32, _rand(batch, n_in))]
    ins += [tensor(F32, _rand(n_cell, n_in)) for _ in range(4)]
    ins += [omitted(F32) if cifg_break else tensor(F32, _rand(n_cell, n_cell))]
    ins += [tensor(F32, _rand(n_cell, n_cell)) for _ in range(3)]
    ins += [omitted(F32)] * 3                       # no peephole
    ins += [tensor(F32, _rand(n_cell)) for _ in range(4)]
    ins += [omitted(F32)] * 2                       # no projection
    ins += [tensor(F32, _rand(batch, n_cell)), tensor(F32, _rand(batch, n_cell))]
    ins += [scalar(T.INT32, 4), scalar(T.FLOAT32, 0.0), scalar(T.FLOAT32, 0.0)]
    return ins


def test_lstm_step_matches_formula():
    ins = _lstm_inputs()
    v = [i.value for i in ins]
    res = run_op(Op.LSTM, ins, [output(F32, [1, 12]), output(F32, [1, 3]), output(F32, [1, 3]), output(F32, [1, 3])])
    assert res.status == ErrorStatus.NONE
    sig = lambda z: 1 / (1 + np.exp(-z))  # noqa: E731
    x, h, c = v[0].astype(np.float64), v[18], v[19]
    gate = lambda k: x @ v[1 + k].T + h @ v[5 + k].T + v[12 + k]  # noqa: E731
    i, f, g, o = sig(gate(0)), sig(gate(1)), np.tanh(gate(2)), sig(gate(3))
    c_new = f * c + i * g
    np.testing.assert_allclose(res.outputs[2], c_new, atol=1e-5)
    np.testing.assert_allclose(res.outputs[1], o * np.tanh(c_new), atol=1e-5)
    np.testing.assert_allclose(res.outputs[3], res.outputs[1])


def test_lstm_shapes_follow_the_weights_given_at_execution():
    # CIFG (no input gate) is decided by the weights the execution gives: 3 scratch blocks, not 4.
    outs = [output(F32, []) for _ in range(4)]
    assert compiler_shapes(Op.LSTM, _lstm_inputs(), outs) == [(1, 12), (1, 3), (1, 3), (1, 3)]
    cifg = compiler_shapes(Op.LSTM, _lstm_inputs(), outs, absent=(1, 5, 12))
    assert cifg == [(1, 9), (1, 3), (1, 3), (1, 3)]
    with pytest.raises(OpError, match="must both be given"):
        compiler_shapes(Op.LSTM, _lstm_inputs(), outs, absent=(1,))


def test_lstm_half_cifg_is_an_error():
    res = run_op(Op.LSTM, _lstm_inputs(cifg_break=True),
                 [output(F32, [1, 12]), output(F32, [1, 3]), output(F32, [1, 3]), output(F32, [1, 3])])
    assert res.status != ErrorStatus.NONE


def test_lstm_bad_activation_is_an_error():
    ins = _lstm_inputs()
    ins[20] = scalar(T.INT32, 5)
    res = run_op(Op.LSTM, ins, [output(F32, [1, 12]), output(F32, [1, 3]), output(F32, [1, 3]), output(F32, [1, 3])])
    assert res.status != ErrorStatus.NONE


# ---- QUANTIZED_16BIT_LSTM (no corpus cases: the upstream quantized_lstm example) -------------

_W = np.array([[254, 206, 77, 168, 146, 250], [71, 20, 215, 6, 235, 171], [223, 7, 118, 225, 10, 218],
               [59, 130, 174, 26, 171, 108], [172, 60, 205, 65, 133, 34], [14, 0, 140, 168, 29, 49],
               [240, 223, 133, 56, 206, 109], [142, 64, 246, 216, 54, 183], [137, 240, 103, 52, 24, 50],
               [68, 51, 237, 112, 132, 179], [0, 220, 89, 23, 158, 110], [69, 4, 207, 253, 3, 169],
               [106, 214, 67, 23, 195, 187], [59, 158, 45, 3, 11, 99], [119, 132, 49, 205, 109, 10],
               [129, 218, 11, 98, 218, 48]], dtype=np.uint8)
_BIAS = np.array([-7876, 13488, -726, 32839, 39481, 48624, 48976, -21419, 9206, -46884, -11693,
                  -38724, -58999, -17050, -41852, -40538], dtype=np.int32)


def _q16_inputs(input_scale=1 / 128):
    Q8, I32, Q16 = T.TENSOR_QUANT8_ASYMM, T.TENSOR_INT32, T.TENSOR_QUANT16_SYMM
    ws = 0.00408021
    blocks = {"input": 0, "cell": 1, "forget": 2, "output": 3}   # row blocks of the fused matrix
    order = ["input", "forget", "cell", "output"]                 # operand order
    ins = [tensor(Q8, [[166, 179], [50, 150]], input_scale, 128)]
    ins += [tensor(Q8, _W[4 * blocks[g]:4 * blocks[g] + 4, 4:], ws, 100) for g in order]
    ins += [tensor(Q8, _W[4 * blocks[g]:4 * blocks[g] + 4, :4], ws, 100) for g in order]
    ins += [tensor(I32, _BIAS[4 * blocks[g]:4 * blocks[g] + 4], ws / 128, 0) for g in order]
    ins += [tensor(Q16, [[876, 1034, 955, -909], [761, 1029, 796, -1036]], 1 / 2048, 0),
            tensor(Q8, [[136, 150, 140, 115], [135, 152, 138, 112]], 1 / 128, 128)]
    return ins, [output(Q16, [2, 4], 1 / 2048, 0), output(Q8, [2, 4], 1 / 128, 128)]


def test_quantized_16bit_lstm_example():
    ins, outs = _q16_inputs()
    res = run_op(Op.QUANTIZED_16BIT_LSTM, ins, outs)
    assert res.status == ErrorStatus.NONE
    assert res.outputs[0].tolist() == [[1485, 1177, 1373, -1023], [1019, 1355, 1097, -1235]]
    assert res.outputs[1].tolist() == [[140, 151, 146, 112], [136, 156, 142, 112]]
    assert compiler_shapes(Op.QUANTIZED_16BIT_LSTM, ins, outs) == [(2, 4), (2, 4)]


def test_quantized_16bit_lstm_fixed_point_functions_track_float():
    from nngpu.ops.lib.fixedpoint_int16 import fx_logistic, fx_tanh
    raw = np.arange(-32768, 32768, 61)                # every Q3.12 region, both saturation ends
    np.testing.assert_allclose(fx_tanh(raw, 3) / 32768, np.tanh(raw / 4096), atol=5e-4)
    np.testing.assert_allclose(fx_logistic(raw, 3) / 32768, 1 / (1 + np.exp(-raw / 4096)), atol=5e-4)


def test_quantized_16bit_lstm_bad_input_scale_is_an_error():
    ins, outs = _q16_inputs(input_scale=1 / 64)
    assert run_op(Op.QUANTIZED_16BIT_LSTM, ins, outs).status != ErrorStatus.NONE


# ---- LSH_PROJECTION --------------------------------------------------------------------------

def test_lsh_sparse_with_weight_is_an_error():
    res = run_op(Op.LSH_PROJECTION, [tensor(F32, _rand(2, 2)), tensor(T.TENSOR_INT32, [[1], [2]]),
                                     tensor(F32, [1.0, 2.0]), scalar(T.INT32, 3)], [output(T.TENSOR_INT32, [2])])
    assert res.status != ErrorStatus.NONE


def test_lsh_unknown_type_is_an_error():
    res = run_op(Op.LSH_PROJECTION, [tensor(F32, _rand(2, 2)), tensor(T.TENSOR_INT32, [[1], [2]]),
                                     omitted(F32), scalar(T.INT32, 7)], [output(T.TENSOR_INT32, [2])])
    assert res.status != ErrorStatus.NONE


def test_lsh_sparse_offsets_each_hash_function():
    # With SPARSE (3) signature k gets k << num_bits added; SPARSE_DEPRECATED (1) does not.
    args = [tensor(F32, _rand(3, 2), const=True), tensor(T.TENSOR_INT32, [[5], [9], [13]])]
    new = run_op(Op.LSH_PROJECTION, args + [omitted(F32), scalar(T.INT32, 3)], [output(T.TENSOR_INT32, [3])])
    old = run_op(Op.LSH_PROJECTION, args + [omitted(F32), scalar(T.INT32, 1)], [output(T.TENSOR_INT32, [3])])
    assert new.status == old.status == ErrorStatus.NONE
    np.testing.assert_array_equal(new.outputs[0] - old.outputs[0], [0, 4, 8])


def test_farmhash_long_inputs_are_deterministic_and_length_sensitive():
    from nngpu.ops.lsh import fingerprint64
    data = bytes(range(200))
    values = {fingerprint64(data[:n]) for n in (0, 3, 8, 17, 33, 64, 65, 128, 200)}
    assert len(values) == 9 and all(0 <= v < 1 << 64 for v in values)


# ---- RANDOM_MULTINOMIAL ----------------------------------------------------------------------

def test_multinomial_seeded_is_reproducible_and_follows_softmax():
    logits = np.log(np.array([[0.1, 0.6, 0.3]], dtype=np.float32))
    args = [tensor(F32, logits), scalar(T.INT32, 20000), tensor(T.TENSOR_INT32, [3, 4], const=True)]
    a = run_op(Op.RANDOM_MULTINOMIAL, args, [output(T.TENSOR_INT32, [1, 20000])])
    b = run_op(Op.RANDOM_MULTINOMIAL, args, [output(T.TENSOR_INT32, [1, 20000])])
    assert a.status == ErrorStatus.NONE
    np.testing.assert_array_equal(a.outputs[0], b.outputs[0])
    freq = np.bincount(a.outputs[0].reshape(-1), minlength=3) / 20000
    np.testing.assert_allclose(freq, [0.1, 0.6, 0.3], atol=0.02)


def test_multinomial_bad_seed_shape_is_an_error():
    res = run_op(Op.RANDOM_MULTINOMIAL, [tensor(F32, [[0.0, 1.0]]), scalar(T.INT32, 4),
                                         tensor(T.TENSOR_INT32, [1, 2, 3], const=True)],
                 [output(T.TENSOR_INT32, [1, 4])])
    assert res.status != ErrorStatus.NONE
