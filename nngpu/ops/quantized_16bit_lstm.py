"""QUANTIZED_16BIT_LSTM: the reference's fixed-point LSTM cell (TFLite LstmCell<4> on uint8 /
int16), bit-exact.

The gate pre-activations are a uint8 fully-connected layer rescaled to int16 Q3.12; sigmoid and
tanh are gemmlowp's int16 fixed-point logistic/tanh (lib/fixedpoint_int16.py, which
QUANTIZED_LSTM shares).
"""
from __future__ import annotations

import math

import numpy as np

from ..hal.types import OperandType as T
from ..hal.types import OperationType
from .lib.fixedpoint_int16 import I16_MAX, I16_MIN, fx_logistic, fx_mul, fx_rdpot, fx_rescale, fx_sat_add, fx_tanh
from .lib.quant import multiply_by_quantized_multiplier, quantize_multiplier
from .registry import HalVersion, OpContext, OpError, OpSpec, register, sig

STATE_INTEGER_BITS = 4


def quantized_16bit_lstm_step(x, prev_out, weights, w_zero_point: int, bias, prev_cell,
                              accum_multiplier: int, accum_shift: int):
    """One cell step of the TFLite kernel: weights [4*n, input_size + n] multiply the row-wise
    concatenation [x, prev_out]; gates are stacked [input, cell, forget, output] along the rows.
    Returns (cell int16, output uint8)."""
    concat = np.concatenate([x, prev_out], axis=1).astype(np.int64) - 128
    acc = bias.astype(np.int64) + concat @ (weights.astype(np.int64) - w_zero_point).T
    acc = multiply_by_quantized_multiplier(acc, accum_multiplier, accum_shift)
    acc = np.clip(acc, I16_MIN, I16_MAX)
    n = prev_cell.shape[1]
    g_in, g_cell, g_forget, g_out = (acc[:, k * n:(k + 1) * n] for k in range(4))
    input_gate = fx_logistic(g_in, 3)
    modulation = fx_tanh(g_cell, 3)
    forget_gate = fx_logistic(g_forget, 3)
    output_gate = fx_logistic(g_out, 3)
    input_times_mod = fx_mul(input_gate, modulation)
    forget_times_prev = fx_mul(forget_gate, prev_cell.astype(np.int64))
    new_state = fx_sat_add(fx_rescale(input_times_mod, 0, STATE_INTEGER_BITS), forget_times_prev)
    activ = fx_mul(output_gate, fx_tanh(fx_rescale(new_state, STATE_INTEGER_BITS, 3), 3))
    out = 128 + np.clip(fx_rdpot(activ, 8), -128, 127)
    return new_state.astype(np.int16), out.astype(np.uint8)


def _q16_shape(node: OpContext) -> list[tuple[int, ...]]:
    """cell state and output, both [batch, outputSize], checking every input's shape."""
    x, prev_cell, prev_out = node.in_shape(0), node.in_shape(13), node.in_shape(14)
    if len(x) != 2 or len(prev_out) != 2 or len(prev_cell) != 2:
        raise OpError("input, state and output must be 2-D")
    (batch, input_size), n = x, prev_out[1]
    if prev_out[0] != batch or prev_cell != (batch, n):
        raise OpError("state shapes do not match the input")
    if any(node.in_shape(1 + k) != (n, input_size if k < 4 else n) for k in range(8)):
        raise OpError("weights have the wrong shape")
    if any(node.in_shape(i) != (n,) for i in range(9, 13)):
        raise OpError("biases must be [output_size]")
    return [(batch, n), (batch, n)]


def _q16_reference(ctx: OpContext) -> list[np.ndarray]:
    _q16_shape(ctx)
    x, prev_cell, prev_out = ctx.input(0), ctx.input(13), ctx.input(14)
    op_in, op_prev, op_cell = ctx.in_operand(0), ctx.in_operand(14), ctx.in_operand(13)
    for o, what in ((op_in, "input"), (op_prev, "previous output")):
        if o.scale != 1.0 / 128.0 or o.zeroPoint != 128:
            raise OpError(f"{what} must have scale 1/128 and zeroPoint 128")
    w_ops = [ctx.in_operand(i) for i in range(1, 9)]
    w_scale, w_zp = w_ops[0].scale, w_ops[0].zeroPoint
    if w_scale == 0 or any(o.scale != w_scale or o.zeroPoint != w_zp for o in w_ops):
        raise OpError("all weights must share one non-zero scale and zero point")
    weights = [ctx.input(i) for i in range(1, 9)]
    b_ops = [ctx.in_operand(i) for i in range(9, 13)]
    b_scale = b_ops[0].scale
    if float(np.float32(b_scale)) != float(np.float32(w_scale / 128.0)) or \
            any(o.scale != b_scale or o.zeroPoint != 0 for o in b_ops):
        raise OpError("biases must have scale weights_scale / 128 and zeroPoint 0")
    biases = [ctx.input(i) for i in range(9, 13)]
    if op_cell.zeroPoint != 0 or op_cell.scale <= 0 or \
            round(math.log2(op_cell.scale)) + 15 != STATE_INTEGER_BITS or \
            abs(math.log2(op_cell.scale) - round(math.log2(op_cell.scale))) > 1e-3:
        raise OpError("cell state must have scale 2^-11 and zeroPoint 0")
    # gate order of the reference's concatenated weights: input, cell, forget, output
    order = (0, 2, 1, 3)
    # The reference lays each gate's row out as [recurrent | input] columns, while the kernel's
    # concatenation is [input, prev_output]: kept as is to stay bit-exact with it.
    big = np.concatenate([np.concatenate([weights[4 + g], weights[g]], axis=1) for g in order])
    bias = np.concatenate([biases[g] for g in order])
    mult, shift = quantize_multiplier(4096.0 * b_scale)
    cell, out = quantized_16bit_lstm_step(x, prev_out, big, w_zp, bias, prev_cell, mult, shift)
    return [cell, out]


Q8, I32, Q16 = T.TENSOR_QUANT8_ASYMM, T.TENSOR_INT32, T.TENSOR_QUANT16_SYMM
register(OpSpec(OperationType.QUANTIZED_16BIT_LSTM,
                [sig([Q8] * 9 + [I32] * 4 + [Q16, Q8], [Q16, Q8], HalVersion.V1_2)],
                _q16_reference, shape=_q16_shape))
