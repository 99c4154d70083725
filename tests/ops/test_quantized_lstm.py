"""QUANTIZED_LSTM: the configurations the corpus lacks (peephole, no layer norm, projection with
zero points, clipping, saturation, empty batch) against a float LSTM on the dequantized values,
and the error paths."""
from __future__ import annotations

import numpy as np
import pytest

from nngpu.hal.types import ErrorStatus
from nngpu.hal.types import OperandType as T
from nngpu.hal.types import OperationType as Op
from nngpu.ops import load_all
from nngpu.ops.registry import OpContext, lookup
from nngpu.testing import Value, output, run_op, scalar, single_op_model, tensor

from .test_recurrent import compiler_shapes

load_all()

S8, Q8, Q16, I32, F32 = (T.TENSOR_QUANT8_ASYMM_SIGNED, T.TENSOR_QUANT8_SYMM, T.TENSOR_QUANT16_SYMM,
                         T.TENSOR_INT32, T.FLOAT32)

X_S, X_ZP = 1 / 64, 5          # input
H_S, H_ZP = 1 / 128, -3        # previous output / output
W_S = 1 / 100                  # all int8 weights
PEEP_S = 1 / 4096              # peephole weights (int16)
LN_S = 1 / 4096                # layer norm weights (int16)
CELL_S = 2.0 ** -11
INTER = 2.0 ** -12             # Q3.12: the gate sigmoid/tanh input without layer norm
HID_S = 1 / 128


def _absent(t, dims, scale=1.0):
    return Value(t, None, dims, scale, omitted=True)


def _sigmoid(v):
    return 1 / (1 + np.exp(-v))


def _case(batch=2, n_in=5, n_cell=4, n_out=4, cifg=False, peephole=False, layer_norm=False,
          projection=False, cell_clip=0.0, proj_clip=0.0, hidden_zp=0, big=False, const=False,
          cell_s=CELL_S, seed=0):
    """The 32 operands of one QUANTIZED_LSTM and the float model's expected outputs."""
    rng = np.random.default_rng(seed)
    wmax = 127 if big else 60
    w_in = [rng.integers(-wmax, wmax + 1, (n_cell, n_in)) for _ in range(4)]
    w_rec = [rng.integers(-wmax, wmax + 1, (n_cell, n_out)) for _ in range(4)]
    peep = [rng.integers(-3000, 3001, n_cell) for _ in range(3)]
    ln = [rng.integers(2000, 8000, n_cell) for _ in range(4)]
    b_scale = X_S * W_S
    bias = [rng.integers(-20000, 20001, n_cell) for _ in range(4)]
    w_proj = rng.integers(-100, 101, (n_out, n_cell))
    b_proj = rng.integers(-50, 51, n_out)
    x = rng.integers(-128, 128, (batch, n_in))
    h = rng.integers(-128, 128, (batch, n_out))
    c = rng.integers(-6000, 6001, (batch, n_cell))

    def t(tp, v, s=0.0, zp=0):  # weights, biases and coefficients
        return tensor(tp, v, s, zp, const=const)

    g_in = [None if cifg and g == 0 else t(Q8, w_in[g], W_S) for g in range(4)]
    g_rec = [None if cifg and g == 0 else t(Q8, w_rec[g], W_S) for g in range(4)]
    ins = [tensor(S8, x, X_S, X_ZP)]
    ins += [v or _absent(Q8, [n_cell, n_in], W_S) for v in g_in]
    ins += [v or _absent(Q8, [n_cell, n_out], W_S) for v in g_rec]
    ins += [t(Q16, peep[k], PEEP_S) if peephole and not (cifg and k == 0) else _absent(Q16, [n_cell])
            for k in range(3)]
    ins += [_absent(I32, [n_cell]) if cifg and g == 0 else t(I32, bias[g]) for g in range(4)]
    ins += [t(Q8, w_proj, W_S) if projection else _absent(Q8, [n_out, n_cell], W_S),
            t(I32, b_proj) if projection else _absent(I32, [n_out])]
    ins += [tensor(S8, h, H_S, H_ZP), tensor(Q16, c, cell_s)]
    ins += [t(Q16, ln[g], LN_S) if layer_norm and not (cifg and g == 0) else _absent(Q16, [n_cell], LN_S)
            for g in range(4)]
    inter = 2.0 ** -11 if layer_norm else INTER
    ins += [scalar(F32, cell_clip), scalar(F32, proj_clip)] + [scalar(F32, inter)] * 4
    ins += [scalar(T.INT32, hidden_zp), scalar(F32, HID_S)]

    # float model
    xr, hr, cr = (x - X_ZP) * X_S, (h - H_ZP) * H_S, c * cell_s

    def pre(g, cell):
        # each term is rounded to the intermediate scale, as the kernel does: the layer norm
        # of a row with a small spread is sensitive to it
        terms = [xr @ (w_in[g] * W_S).T, hr @ (w_rec[g] * W_S).T]
        if peephole and g != 2:
            terms.append(cell * peep[{0: 0, 1: 1, 3: 2}[g]] * PEEP_S)
        if not layer_norm:
            return sum(terms) + bias[g] * b_scale
        acc = sum(np.round(v / inter) for v in terms)
        z = (acc - acc.mean(1, keepdims=True)) / acc.std(1, keepdims=True)
        return z * ln[g] * LN_S + bias[g] * LN_S / 1024

    f = _sigmoid(pre(1, cr))
    gc = np.tanh(pre(2, cr))
    i = 1 - f if cifg else _sigmoid(pre(0, cr))
    c_new = np.clip(f * cr + i * gc, -32768 * cell_s, 32767 * cell_s)  # int16 saturation
    if cell_clip > 0:
        c_new = np.clip(c_new, -cell_clip, cell_clip)
    o = _sigmoid(pre(3, c_new))
    hid_q = np.clip(np.round(o * np.tanh(c_new) / HID_S) - hidden_zp, -128, 127)
    if projection:
        out_r = ((hid_q + hidden_zp) * HID_S) @ (w_proj * W_S).T + b_proj * W_S * HID_S
        out = np.clip(np.round(out_r / H_S) + H_ZP, -128, 127)
        if proj_clip > 0:
            q = int(proj_clip / H_S)
            out = np.clip(out, -q, q)
    else:
        out = hid_q
    outs = [output(S8, [batch, n_out], H_S, H_ZP), output(Q16, [batch, n_cell], cell_s),
            output(S8, [batch, n_out], H_S, H_ZP)]
    return ins, outs, out, c_new / cell_s


def _run(ins, outs):
    return run_op(Op.QUANTIZED_LSTM, ins, outs, version=13)


CONFIGS = {
    "plain": {},
    "peephole": dict(peephole=True),
    "cifg_peephole": dict(cifg=True, peephole=True),
    "layer_norm_peephole": dict(layer_norm=True, peephole=True, n_cell=8, n_out=8),
    "projection": dict(projection=True, n_out=3, hidden_zp=4),
    "everything": dict(peephole=True, layer_norm=True, projection=True, n_out=6, n_cell=8),
    "constants": dict(peephole=True, projection=True, const=True),
    "cell_scale_2^-9": dict(peephole=True, cell_s=2.0 ** -9),     # tanh of Q6.9
    "cell_scale_2^-15": dict(peephole=True, cell_s=2.0 ** -15),   # tanh of Q0.15
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_matches_float_lstm(name):
    ins, outs, want_out, want_cell = _case(**CONFIGS[name])
    res = _run(ins, outs)
    assert res.status == ErrorStatus.NONE
    out, cell, out2 = res.outputs
    np.testing.assert_array_equal(out, out2)
    assert compiler_shapes(Op.QUANTIZED_LSTM, ins, outs) == [r.shape for r in res.outputs]
    # 3e-3 in real terms (6 units at 2^-11), whatever the cell scale
    np.testing.assert_allclose(cell, want_cell, atol=6 * CELL_S / CONFIGS[name].get("cell_s", CELL_S))
    # the int8 output is a rounding of values the integer kernel carries to ~1e-3
    assert np.abs(out.astype(int) - want_out).max() <= 2


def test_saturating_weights_and_inputs():
    ins, outs, want_out, want_cell = _case(big=True, peephole=True, projection=True)
    res = _run(ins, outs)
    assert res.status == ErrorStatus.NONE
    np.testing.assert_allclose(res.outputs[1], want_cell, atol=8)
    assert np.abs(res.outputs[0].astype(int) - want_out).max() <= 2


def test_cell_and_projection_clip():
    ins, outs, want_out, want_cell = _case(big=True, projection=True, cell_clip=0.25, proj_clip=0.3)
    res = _run(ins, outs)
    assert res.status == ErrorStatus.NONE
    assert np.abs(res.outputs[1]).max() <= 512            # 0.25 / 2^-11
    assert np.abs(res.outputs[0].astype(int)).max() <= 38  # trunc(0.3 * 128)
    np.testing.assert_allclose(res.outputs[1], want_cell, atol=8)
    assert np.abs(res.outputs[0].astype(int) - want_out).max() <= 2


def test_empty_batch():
    # a model input cannot be zero-sized, so run the kernel on the values directly, as it
    # would see a batch-0 temporary
    ins, outs, _, _ = _case(batch=0, peephole=True, layer_norm=True)
    model = single_op_model(Op.QUANTIZED_LSTM, ins, outs)
    ctx = OpContext(model.operations[0], model.operands, [v.value for v in ins])
    res = lookup(Op.QUANTIZED_LSTM).reference(ctx)
    assert [r.shape for r in res] == [(0, 4), (0, 4), (0, 4)]
    assert lookup(Op.QUANTIZED_LSTM).shape(ctx) == [(0, 4), (0, 4), (0, 4)]


@pytest.mark.parametrize("v", [2, 3, 17, 1000, 4849, 123457, 1 << 24, (1 << 29) + 5])
def test_inverse_sqrt_multiplier(v):
    # the layer norm's 1/stddev as a (multiplier, shift) pair
    from nngpu.ops.quantized_lstm import _inv_sqrt
    from nngpu.ops.lib.quant import multiply_by_quantized_multiplier
    a, b = _inv_sqrt(np.array([v]))
    got = multiply_by_quantized_multiplier(np.array([1 << 30]), a, b)[0]
    assert abs(got / ((1 << 30) / np.sqrt(v)) - 1) < 1e-5


def _replace(ins, k, v):
    return ins[:k] + [v] + ins[k + 1:]


def test_cifg_with_input_gate_bias_is_rejected_at_prepare():
    ins, outs, _, _ = _case(cifg=True, const=True)
    res = _run(_replace(ins, 12, tensor(I32, np.zeros(4), const=True)), outs)
    assert res.status == ErrorStatus.INVALID_ARGUMENT


def test_partial_layer_norm_is_rejected_at_prepare():
    ins, outs, _, _ = _case(layer_norm=True, const=True)
    res = _run(_replace(ins, 22, _absent(Q16, [4], LN_S)), outs)
    assert res.status == ErrorStatus.INVALID_ARGUMENT


def test_omitted_required_input_is_rejected_at_prepare():
    ins, outs, _, _ = _case()
    res = _run(_replace(ins, 3, _absent(Q8, [4, 5], W_S)), outs)
    assert res.status == ErrorStatus.INVALID_ARGUMENT


def test_half_given_input_gate_fails_at_execution():
    # input-to-input stays a model input while recurrent-to-input is omitted: prepare cannot
    # tell whether the request will leave input-to-input out too (CIFG), execution can
    ins, outs, _, _ = _case()
    res = _run(_replace(ins, 5, _absent(Q8, [4, 4], W_S)), outs)
    assert res.status == ErrorStatus.GENERAL_FAILURE


PREPARE, EXECUTE = ErrorStatus.INVALID_ARGUMENT, ErrorStatus.GENERAL_FAILURE


@pytest.mark.parametrize("k, value, status", [
    (19, tensor(Q16, np.zeros((2, 4)), 0.001), PREPARE),          # cell scale not a power of two
    (19, tensor(Q16, np.zeros((2, 4)), 2.0 ** -5), PREPARE),      # power of two above 2^-9
    (31, scalar(F32, 0.0), PREPARE),                              # hidden state scale
    (26, scalar(F32, -1.0), PREPARE),                             # intermediate scale
    (30, scalar(T.INT32, 200), PREPARE),                          # hidden zero point beyond int8
    (2, tensor(Q8, np.zeros((4, 6)), W_S), EXECUTE),              # input-to-forget shape
    (18, tensor(S8, np.zeros((3, 4)), H_S, H_ZP), EXECUTE),       # previous output batch
    (0, tensor(S8, np.zeros((2, 5, 1)), X_S, X_ZP), EXECUTE),     # input rank
])
def test_bad_values_fail(k, value, status):
    ins, outs, _, _ = _case()
    res = _run(_replace(ins, k, value), outs)
    assert res.status == status


def test_no_projection_needs_equal_output_size():
    ins, outs, _, _ = _case(n_out=3)
    res = _run(ins, outs)
    assert res.status == ErrorStatus.GENERAL_FAILURE
