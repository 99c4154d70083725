"""Basic RNN cells: RNN (one step), UNIDIRECTIONAL_SEQUENCE_RNN, BIDIRECTIONAL_SEQUENCE_RNN.

state = act(x W' + state R' + b), unrolled over time for the sequence ops; the time loop is
sequential, each step is one batched matmul. float16 is computed in float32.
"""
from __future__ import annotations

import numpy as np

from ..hal.types import OperandType as T
from ..hal.types import OperationType
from .registry import HalVersion, OpContext, OpError, OpSpec, register, sig

F32, F16 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16
FLOAT_TYPES = ((F32, HalVersion.V1_0), (F16, HalVersion.V1_2))

# The reference's activation functor: NONE, RELU, RELU1, RELU6, TANH, SIGMOID.
ACTIVATIONS = {0, 1, 2, 3, 4, 6}


def activate(x: np.ndarray, act: int) -> np.ndarray:
    if act == 0:
        return x
    if act == 1:
        return np.maximum(x, 0)
    if act == 2:
        return np.clip(x, -1, 1)
    if act == 3:
        return np.clip(x, 0, 6)
    if act == 4:
        return np.tanh(x)
    if act == 6:
        return 1 / (1 + np.exp(-x))
    raise OpError(f"unsupported activation {act}")


def _f(a: np.ndarray) -> np.ndarray:
    return np.asarray(a, dtype=np.float64)


def _check_cell(w: np.ndarray, r: np.ndarray, b: np.ndarray, h: np.ndarray, batch: int, n_in: int,
                what: str = "") -> None:
    units = w.shape[0] if w.ndim == 2 else -1
    if w.ndim != 2 or w.shape[1] != n_in:
        raise OpError(f"{what}weights must be [num_units, input_size]")
    if r.shape != (units, units):
        raise OpError(f"{what}recurrent weights must be [num_units, num_units]")
    if b.shape != (units,):
        raise OpError(f"{what}bias must be [num_units]")
    if h.shape != (batch, units):
        raise OpError(f"{what}hidden state must be [batch, num_units]")


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


def _rnn(ctx: OpContext) -> list[np.ndarray]:
    x, w, r, b, h = (_f(ctx.input(i)) for i in range(5))
    act = ctx.scalar(5)
    if act not in ACTIVATIONS:
        raise OpError(f"unsupported activation {act}")
    if x.ndim != 2:
        raise OpError("input must be [batch, input_size]")
    _check_cell(w, r, b, h, x.shape[0], x.shape[1])
    out, h = run_sequence(x[None], w, r, b, h, act)
    return [h, h.copy()]


def _unidirectional(ctx: OpContext) -> list[np.ndarray]:
    x, w, r, b, h = (_f(ctx.input(i)) for i in range(5))
    act = ctx.scalar(5)
    time_major = ctx.scalar(6)
    if act not in ACTIVATIONS:
        raise OpError(f"unsupported activation {act}")
    if time_major not in (0, 1):
        raise OpError("timeMajor must be 0 or 1")
    if x.ndim != 3:
        raise OpError("input must be 3-D")
    if not time_major:
        x = x.transpose(1, 0, 2)
    _check_cell(w, r, b, h, x.shape[1], x.shape[2])
    out, h = run_sequence(x, w, r, b, h, act)
    if not time_major:
        out = out.transpose(1, 0, 2)
    return [out, h][: ctx.num_outputs]


def _bidirectional(ctx: OpContext) -> list[np.ndarray]:
    x = _f(ctx.input(0))
    fw = [_f(ctx.input(i)) for i in range(1, 5)]
    bw = [_f(ctx.input(i)) for i in range(5, 9)]
    aux = _f(ctx.input(9)) if ctx.has_input(9) else None
    fw_aux = _f(ctx.input(10)) if ctx.has_input(10) else None
    bw_aux = _f(ctx.input(11)) if ctx.has_input(11) else None
    act = ctx.scalar(12)
    time_major = bool(ctx.scalar(13))
    merge = bool(ctx.scalar(14))
    if act not in ACTIVATIONS:
        raise OpError(f"unsupported activation {act}")
    if x.ndim != 3 or (aux is not None and aux.ndim != 3):
        raise OpError("input and aux input must be 3-D")
    if (fw_aux is None) != (bw_aux is None):
        raise OpError("forward and backward aux weights must both be present or both omitted")
    if fw_aux is not None and aux is None:
        raise OpError("aux weights given without an aux input")
    if ctx.num_outputs != (1 if merge else 2) and ctx.num_outputs != (3 if merge else 4):
        raise OpError("output count does not match mergeOutputs")
    if not time_major:
        x = x.transpose(1, 0, 2)
        aux = aux.transpose(1, 0, 2) if aux is not None else None
    if aux is not None and aux.shape[:2] != x.shape[:2]:
        raise OpError("aux input must match the input's time and batch sizes")
    cross = fw_aux is not None
    bw_x = aux if (aux is not None and not cross) else x   # 1.3 parallel linking feeds aux to bw
    batch = x.shape[1]
    _check_cell(*fw, batch, x.shape[2], "forward ")
    _check_cell(*bw, batch, bw_x.shape[2], "backward ")
    if cross:
        if fw_aux.shape != (fw[0].shape[0], aux.shape[2]) or bw_aux.shape != (bw[0].shape[0], aux.shape[2]):
            raise OpError("aux weights must be [num_units, aux_input_size]")
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


register(OpSpec(OperationType.RNN, _signatures_rnn(), _rnn))
register(OpSpec(OperationType.UNIDIRECTIONAL_SEQUENCE_RNN, _signatures_uni(), _unidirectional))
register(OpSpec(OperationType.BIDIRECTIONAL_SEQUENCE_RNN, _signatures_bi(), _bidirectional))
