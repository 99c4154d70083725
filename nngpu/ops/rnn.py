"""Basic RNN cells: RNN (one step), UNIDIRECTIONAL_SEQUENCE_RNN, BIDIRECTIONAL_SEQUENCE_RNN.

state = act(x W' + state R' + b), unrolled over time for the sequence ops; the time loop is
sequential, each step is one batched matmul. float16 is computed in float32. The shape
functions hold every shape rule of the reference (the references call them first); `given`,
`sequence_input` and `aux_input` are shared with the LSTM family.
"""
from __future__ import annotations

import numpy as np

from ..hal.types import OperandType as T
from ..hal.types import OperationType
from .lib.recurrent import Shape, activate, aux_input, check_activation, sequence_input
from .registry import HalVersion, OpContext, OpError, OpSpec, register, sig

F32, F16 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16
FLOAT_TYPES = ((F32, HalVersion.V1_0), (F16, HalVersion.V1_2))

# The reference's activation functor: NONE, RELU, RELU1, RELU6, TANH, SIGMOID.


def _f(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, dtype=np.float64)


def _cell_units(node: OpContext, first: int, batch: int, n_in: int, what: str = "") -> int:
    """The number of units of the cell whose weights, recurrent weights, bias and hidden state
    are inputs first .. first + 3, checked against each other, the batch and the input size."""
    w, r, b, h = (node.in_shape(first + k) for k in range(4))
    if len(w) != 2 or w[1] != n_in:
        raise OpError(f"{what}weights must be [num_units, input_size]")
    units = w[0]
    if r != (units, units):
        raise OpError(f"{what}recurrent weights must be [num_units, num_units]")
    if b != (units,):
        raise OpError(f"{what}bias must be [num_units]")
    if h != (batch, units):
        raise OpError(f"{what}hidden state must be [batch, num_units]")
    return units


def run_sequence(x: np.ndarray, w: np.ndarray, r: np.ndarray, b: np.ndarray, h: np.ndarray,
                 act: int, reverse: bool = False, aux: np.ndarray | None = None,
                 w_aux: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Time-major x [T, B, I] -> (outputs [T, B, U], last state [B, U])."""
    steps = x.shape[0]
    pre = x @ w.T + b                                  # input contribution of all steps at once
    if aux is not None and w_aux is not None:
        pre = pre + aux @ w_aux.T
    out = np.empty((steps, h.shape[0], w.shape[0]), dtype=np.float64)
    order = range(steps - 1, -1, -1) if reverse else range(steps)
    for t in order:
        h = activate(pre[t] + h @ r.T, act)
        out[t] = h
    return out, h


# ---- RNN --------------------------------------------------------------------------------------

def _rnn_shape(node: OpContext) -> list[Shape]:
    """hidden state out and output, both [batch, num_units]."""
    x = node.in_shape(0)
    if len(x) != 2:
        raise OpError("input must be [batch, input_size]")
    units = _cell_units(node, 1, x[0], x[1])
    return [(x[0], units)] * 2


def _rnn(ctx: OpContext) -> list[np.ndarray]:
    _rnn_shape(ctx)
    x, w, r, b, h = (_f(ctx.input(i)) for i in range(5))
    act = ctx.scalar(5)
    check_activation(act)
    out, h = run_sequence(x[None], w, r, b, h, act)
    return [h, h.copy()]


# ---- UNIDIRECTIONAL_SEQUENCE_RNN ----------------------------------------------------------------

def _time_major(node: OpContext) -> bool:
    time_major = node.scalar(6)
    if time_major not in (0, 1):
        raise OpError("timeMajor must be 0 or 1")
    return bool(time_major)


def _unidirectional_shape(node: OpContext) -> list[Shape]:
    """output [*input's time and batch, num_units] and (1.3) the hidden state [batch, num_units]."""
    x, batch = sequence_input(node, 0, _time_major(node))
    units = _cell_units(node, 1, batch, x[2])
    return [x[:2] + (units,), (batch, units)][: node.num_outputs]


def _unidirectional(ctx: OpContext) -> list[np.ndarray]:
    _unidirectional_shape(ctx)
    x, w, r, b, h = (_f(ctx.input(i)) for i in range(5))
    act = ctx.scalar(5)
    check_activation(act)
    time_major = _time_major(ctx)
    if not time_major:
        x = x.transpose(1, 0, 2)
    out, h = run_sequence(x, w, r, b, h, act)
    if not time_major:
        out = out.transpose(1, 0, 2)
    return [out, h][: ctx.num_outputs]


# ---- BIDIRECTIONAL_SEQUENCE_RNN -----------------------------------------------------------------

def _bidirectional_shape(node: OpContext) -> list[Shape]:
    """The forward and backward outputs (one concatenated output when merged) shaped like the
    input with each direction's units last, then (1.3) each direction's hidden state."""
    merge = bool(node.scalar(14))
    if node.num_outputs not in ((1, 3) if merge else (2, 4)):
        raise OpError("output count does not match mergeOutputs")
    x, batch = sequence_input(node, 0, bool(node.scalar(13)))
    cross = node.given(10)
    aux, bw_in = aux_input(node, 9, x, cross, node.given(11))
    fw = _cell_units(node, 1, batch, x[2], "forward ")
    bw = _cell_units(node, 5, batch, bw_in, "backward ")
    if cross and (node.in_shape(10) != (fw, aux[2]) or node.in_shape(11) != (bw, aux[2])):
        raise OpError("aux weights must be [num_units, aux_input_size]")
    outs = [x[:2] + (fw + bw,)] if merge else [x[:2] + (fw,), x[:2] + (bw,)]
    if node.num_outputs > len(outs):
        outs += [(batch, fw), (batch, bw)]
    return outs


def _bidirectional(ctx: OpContext) -> list[np.ndarray]:
    _bidirectional_shape(ctx)
    x = _f(ctx.input(0))
    fw = [_f(ctx.input(i)) for i in range(1, 5)]
    bw = [_f(ctx.input(i)) for i in range(5, 9)]
    aux = _f(ctx.input(9)) if ctx.has_input(9) else None
    fw_aux = _f(ctx.input(10)) if ctx.has_input(10) else None
    bw_aux = _f(ctx.input(11)) if ctx.has_input(11) else None
    act = ctx.scalar(12)
    check_activation(act)
    time_major = bool(ctx.scalar(13))
    merge = bool(ctx.scalar(14))
    if not time_major:
        x = x.transpose(1, 0, 2)
        aux = aux.transpose(1, 0, 2) if aux is not None else None
    cross = fw_aux is not None
    bw_x = aux if (aux is not None and not cross) else x   # 1.3 parallel linking feeds aux to bw
    fw_out, fw_h = run_sequence(x, *fw, act, aux=aux if cross else None, w_aux=fw_aux)
    bw_out, bw_h = run_sequence(bw_x, *bw, act, reverse=True, aux=aux if cross else None, w_aux=bw_aux)
    if not time_major:
        fw_out, bw_out = fw_out.transpose(1, 0, 2), bw_out.transpose(1, 0, 2)
    outs = [np.concatenate([fw_out, bw_out], axis=2)] if merge else [fw_out, bw_out]
    if ctx.num_outputs > len(outs):
        outs += [fw_h, bw_h]
    return outs


def _signatures_rnn():
    return [sig([t] * 5 + [T.INT32], [t, t], v) for t, v in FLOAT_TYPES]


def _signatures_uni():
    out = []
    for t, _ in FLOAT_TYPES:
        ins = [t] * 5 + [T.INT32, T.INT32]
        out.append(sig(ins, [t], HalVersion.V1_2))
        out.append(sig(ins, [t, t], HalVersion.V1_3))
    return out


def _signatures_bi():
    out = []
    for t, _ in FLOAT_TYPES:
        ins = [t] * 12 + [T.INT32, T.BOOL, T.BOOL]
        for n, v in ((1, HalVersion.V1_2), (2, HalVersion.V1_2), (3, HalVersion.V1_3), (4, HalVersion.V1_3)):
            out.append(sig(ins, [t] * n, v))
    return out


register(OpSpec(OperationType.RNN, _signatures_rnn(), _rnn, shape=_rnn_shape))
register(OpSpec(OperationType.UNIDIRECTIONAL_SEQUENCE_RNN, _signatures_uni(), _unidirectional,
                shape=_unidirectional_shape))
register(OpSpec(OperationType.BIDIRECTIONAL_SEQUENCE_RNN, _signatures_bi(), _bidirectional,
                shape=_bidirectional_shape))
