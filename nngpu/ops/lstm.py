"""Float LSTM: LSTM (one step, 23- or 27-input form), UNIDIRECTIONAL_SEQUENCE_LSTM and
BIDIRECTIONAL_SEQUENCE_LSTM.

One cell implementation (`Cell.step`) covers CIFG, peephole, projection, clipping, layer
normalization and the auxiliary input, following the reference LSTMStep: without layer norm the
gate bias is added before the activation; with it, after normalizing and scaling. The time loop
is sequential; each step is a few batched matmuls. float16 is computed in float32/64 throughout
(the reference converts once, runs every step in float32 and converts back).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..hal.types import OperandType as T
from ..hal.types import OperationType
from .registry import HalVersion, OpContext, OpError, OpSpec, register, sig
from .rnn import ACTIVATIONS, activate

F32, F16 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16
LAYER_NORM_EPSILON = 1e-8
GATES = ("input", "forget", "cell", "output")


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def _layer_norm(x: np.ndarray) -> np.ndarray:
    """The reference MeanStddevNormalization over each batch row."""
    mean = x.mean(axis=1, keepdims=True)
    var = (x * x).mean(axis=1, keepdims=True) - mean * mean
    var = np.where(var == 0, LAYER_NORM_EPSILON, var)
    return (x - mean) / np.sqrt(var)


@dataclass
class CellIndex:
    """Where one direction's tensors sit among the op's inputs (None: not an input of this op)."""
    w_x: tuple[int, int, int, int]            # input-to-{input,forget,cell,output}
    w_h: tuple[int, int, int, int]            # recurrent-to-...
    peep: tuple[int, int, int]                # cell-to-{input,forget,output}
    bias: tuple[int, int, int, int]
    proj_w: int
    proj_b: int
    ln: tuple[int, int, int, int] | None      # layer norm weights
    w_aux: tuple[int, int, int, int] | None = None


def _opt(ctx: OpContext, i: int | None) -> np.ndarray | None:
    if i is None or not ctx.has_input(i):
        return None
    return np.asarray(ctx.input(i), dtype=np.float64)


class Cell:
    """One direction's weights, checked against each other as the reference does."""

    def __init__(self, ctx: OpContext, idx: CellIndex, act: int, cell_clip: float, proj_clip: float):
        if act not in ACTIVATIONS:
            raise OpError(f"unsupported activation {act}")
        if cell_clip < 0 or proj_clip < 0:
            raise OpError("clipping thresholds must be non-negative")
        self.act, self.cell_clip, self.proj_clip = act, cell_clip, proj_clip
        self.w_x = [_opt(ctx, i) for i in idx.w_x]
        self.w_h = [_opt(ctx, i) for i in idx.w_h]
        self.peep = [_opt(ctx, i) for i in idx.peep]
        self.bias = [_opt(ctx, i) for i in idx.bias]
        self.proj_w, self.proj_b = _opt(ctx, idx.proj_w), _opt(ctx, idx.proj_b)
        self.ln = [_opt(ctx, i) for i in idx.ln] if idx.ln else [None] * 4
        self.w_aux = [_opt(ctx, i) for i in idx.w_aux] if idx.w_aux else [None] * 4
        self._check()

    def _check(self) -> None:
        for g in (1, 2, 3):
            if self.w_x[g] is None or self.w_h[g] is None or self.bias[g] is None:
                raise OpError(f"{GATES[g]} gate weights and bias are required")
        wo = self.w_x[3]
        if wo.ndim != 2:
            raise OpError("input-to-output weights must be 2-D")
        self.n_cell, self.n_input = wo.shape
        if self.w_h[3].ndim != 2 or self.w_h[3].shape[0] != self.n_cell:
            raise OpError("recurrent-to-output weights must be [num_units, output_size]")
        self.n_output = self.w_h[3].shape[1]
        self.cifg = self.w_x[0] is None
        if (self.w_h[0] is None) != self.cifg:
            raise OpError("input-to-input and recurrent-to-input weights must both be given or omitted")
        if self.cifg and self.bias[0] is not None:
            raise OpError("CIFG LSTM takes no input gate bias")
        if not self.cifg and self.bias[0] is None:
            raise OpError("input gate bias is required without CIFG")
        for g in range(4):
            if self.w_x[g] is not None and self.w_x[g].shape != (self.n_cell, self.n_input):
                raise OpError(f"input-to-{GATES[g]} weights must be [num_units, input_size]")
            if self.w_h[g] is not None and self.w_h[g].shape != (self.n_cell, self.n_output):
                raise OpError(f"recurrent-to-{GATES[g]} weights must be [num_units, output_size]")
            if self.bias[g] is not None and self.bias[g].shape != (self.n_cell,):
                raise OpError(f"{GATES[g]} gate bias must be [num_units]")
            if self.ln[g] is not None and self.ln[g].shape != (self.n_cell,):
                raise OpError(f"{GATES[g]} layer norm weights must be [num_units]")
        ci, cf, co = self.peep
        for p in self.peep:
            if p is not None and p.shape != (self.n_cell,):
                raise OpError("peephole weights must be [num_units]")
        all_peep = (ci is not None or self.cifg) and cf is not None and co is not None
        if not (all_peep or (ci is None and cf is None and co is None)):
            raise OpError("peephole weights must be all given or all omitted")
        self.peephole = co is not None
        # Layer norm is on when its forget/cell/output weights are given (input's only without CIFG).
        rest = [w is not None for w in self.ln[1:]]
        self.layer_norm = all(rest)
        if any(rest) and not all(rest) or (self.layer_norm and not self.cifg and self.ln[0] is None):
            raise OpError("layer normalization weights must be all given or all omitted")
        if self.proj_w is not None and self.proj_w.shape != (self.n_output, self.n_cell):
            raise OpError("projection weights must be [output_size, num_units]")
        if self.proj_b is not None:
            if self.proj_w is None:
                raise OpError("projection bias without projection weights")
            if self.proj_b.shape != (self.n_output,):
                raise OpError("projection bias must be [output_size]")
        self.n_aux = None
        if any(w is not None for w in self.w_aux):
            need = [1, 2, 3] if self.cifg else [0, 1, 2, 3]
            if any(self.w_aux[g] is None for g in need):
                raise OpError("aux weights must be all given or all omitted")
            self.n_aux = self.w_aux[3].shape[1] if self.w_aux[3].ndim == 2 else -1
            for g in need:
                if self.w_aux[g].shape != (self.n_cell, self.n_aux):
                    raise OpError("aux weights must be [num_units, aux_input_size]")

    def check_state(self, batch: int, h: np.ndarray, c: np.ndarray) -> None:
        if h.shape != (batch, self.n_output):
            raise OpError("output state must be [batch, output_size]")
        if c.shape != (batch, self.n_cell):
            raise OpError("cell state must be [batch, num_units]")

    def step(self, x: np.ndarray, h: np.ndarray, c: np.ndarray, aux: np.ndarray | None = None):
        """One time step on [batch, ...] rows: (output_state, cell_state, gates scratch)."""
        pre = []
        for g in range(4):
            if g == 0 and self.cifg:
                pre.append(None)
                continue
            z = x @ self.w_x[g].T + h @ self.w_h[g].T
            if aux is not None and self.w_aux[g] is not None:
                z = z + aux @ self.w_aux[g].T
            if not self.layer_norm:
                z = z + self.bias[g]
            pre.append(z)

        def finish(g: int, z: np.ndarray) -> np.ndarray:
            if self.layer_norm:
                return _layer_norm(z) * self.ln[g] + self.bias[g]
            return z

        ci, cf, co = self.peep
        f = pre[1] + c * cf if self.peephole else pre[1]
        f = _sigmoid(finish(1, f))
        if self.cifg:
            i = 1.0 - f
        else:
            z = pre[0] + c * ci if self.peephole else pre[0]
            i = _sigmoid(finish(0, z))
        g_ = activate(finish(2, pre[2]), self.act)
        c_new = f * c + i * g_
        if self.cell_clip > 0:
            c_new = np.clip(c_new, -self.cell_clip, self.cell_clip)
        z = pre[3] + c_new * co if self.peephole else pre[3]
        o = _sigmoid(finish(3, z))
        out = o * activate(c_new, self.act)
        if self.proj_w is not None:
            out = out @ self.proj_w.T
            if self.proj_b is not None:
                out = out + self.proj_b
            if self.proj_clip > 0:
                out = np.clip(out, -self.proj_clip, self.proj_clip)
        scratch = [g_, f, o] if self.cifg else [i, g_, f, o]   # reference order: [input,] cell, forget, output
        return out, c_new, np.concatenate(scratch, axis=1)

    def run(self, x: np.ndarray, h: np.ndarray, c: np.ndarray, reverse: bool = False,
            aux: np.ndarray | None = None):
        """Time-major x [T, B, I]: (outputs [T, B, O], last output state, last cell state)."""
        steps, batch = x.shape[0], x.shape[1]
        if x.shape[2] != self.n_input:
            raise OpError("input size does not match the weights")
        if aux is not None and self.n_aux is not None and aux.shape[2] != self.n_aux:
            raise OpError("aux input size does not match the aux weights")
        self.check_state(batch, h, c)
        out = np.empty((steps, batch, self.n_output), dtype=np.float64)
        for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
            h, c, _ = self.step(x[t], h, c, None if aux is None or self.n_aux is None else aux[t])
            out[t] = h
        return out, h, c


def _f(ctx: OpContext, i: int) -> np.ndarray:
    return np.asarray(ctx.input(i), dtype=np.float64)


def _idx(base: int, ln: tuple[int, int, int, int] | None, aux: tuple[int, int, int, int] | None = None) -> CellIndex:
    b = base
    return CellIndex((b, b + 1, b + 2, b + 3), (b + 4, b + 5, b + 6, b + 7), (b + 8, b + 9, b + 10),
                     (b + 11, b + 12, b + 13, b + 14), b + 15, b + 16, ln, aux)


# ---- LSTM -------------------------------------------------------------------------------------

def _lstm(ctx: OpContext) -> list[np.ndarray]:
    ln = (23, 24, 25, 26) if ctx.num_inputs == 27 else None
    cell = Cell(ctx, _idx(1, ln), ctx.scalar(20), float(ctx.scalar(21)), float(ctx.scalar(22)))
    x, h, c = _f(ctx, 0), _f(ctx, 18), _f(ctx, 19)
    if x.ndim != 2 or x.shape[1] != cell.n_input:
        raise OpError("input must be [batch, input_size]")
    cell.check_state(x.shape[0], h, c)
    h, c, scratch = cell.step(x, h, c)
    return [scratch, h, c, h.copy()]


def _lstm_signatures():
    out = []
    for t, clip, v in ((F32, T.FLOAT32, HalVersion.V1_0), (F16, T.FLOAT16, HalVersion.V1_2)):
        base = [t] * 20 + [T.INT32, clip, clip]
        out.append(sig(base, [t] * 4, v))
        out.append(sig(base + [t] * 4, [t] * 4, HalVersion.V1_2))
    return out


# ---- UNIDIRECTIONAL_SEQUENCE_LSTM ------------------------------------------------------------

def _unidirectional(ctx: OpContext) -> list[np.ndarray]:
    cell = Cell(ctx, _idx(1, (24, 25, 26, 27)), ctx.scalar(20), float(ctx.scalar(21)), float(ctx.scalar(22)))
    time_major = bool(ctx.scalar(23))
    x = _f(ctx, 0)
    if x.ndim != 3:
        raise OpError("input must be 3-D")
    if not time_major:
        x = x.transpose(1, 0, 2)
    out, h, c = cell.run(x, _f(ctx, 18), _f(ctx, 19))
    if not time_major:
        out = out.transpose(1, 0, 2)
    return [out, h, c][: ctx.num_outputs]


def _uni_signatures():
    out = []
    for t, clip in ((F32, T.FLOAT32), (F16, T.FLOAT16)):
        ins = [t] * 20 + [T.INT32, clip, clip, T.BOOL] + [t] * 4
        out.append(sig(ins, [t], HalVersion.V1_2))
        out.append(sig(ins, [t] * 3, HalVersion.V1_3))
    return out


# ---- BIDIRECTIONAL_SEQUENCE_LSTM -------------------------------------------------------------

def _bidirectional(ctx: OpContext) -> list[np.ndarray]:
    act, cell_clip, proj_clip = ctx.scalar(48), float(ctx.scalar(49)), float(ctx.scalar(50))
    merge, time_major = bool(ctx.scalar(51)), bool(ctx.scalar(52))
    fw = Cell(ctx, _idx(1, (53, 54, 55, 56), (40, 41, 42, 43)), act, cell_clip, proj_clip)
    bw = Cell(ctx, _idx(18, (57, 58, 59, 60), (44, 45, 46, 47)), act, cell_clip, proj_clip)
    expected = (1, 5) if merge else (2, 6)
    if ctx.num_outputs not in expected:
        raise OpError("output count does not match merge_outputs")
    x = _f(ctx, 0)
    aux = _f(ctx, 39) if ctx.has_input(39) else None
    if x.ndim != 3 or (aux is not None and aux.ndim != 3):
        raise OpError("input and aux input must be 3-D")
    if not time_major:
        x = x.transpose(1, 0, 2)
        aux = aux.transpose(1, 0, 2) if aux is not None else None
    if aux is not None and aux.shape[:2] != x.shape[:2]:
        raise OpError("aux input must match the input's time and batch sizes")
    cross = fw.n_aux is not None
    if (bw.n_aux is not None) != cross:
        raise OpError("forward and backward aux weights must both be given or omitted")
    if cross and aux is None:
        raise OpError("aux weights given without an aux input")
    bw_x = aux if (aux is not None and not cross) else x   # 1.3 parallel linking feeds aux to bw
    fw_out, fw_h, fw_c = fw.run(x, _f(ctx, 35), _f(ctx, 36), aux=aux if cross else None)
    bw_out, bw_h, bw_c = bw.run(bw_x, _f(ctx, 37), _f(ctx, 38), reverse=True, aux=aux if cross else None)
    if not time_major:
        fw_out, bw_out = fw_out.transpose(1, 0, 2), bw_out.transpose(1, 0, 2)
    outs = [np.concatenate([fw_out, bw_out], axis=2)] if merge else [fw_out, bw_out]
    if ctx.num_outputs > 2:
        outs += [fw_h, fw_c, bw_h, bw_c]
    return outs


def _bi_signatures():
    out = []
    for t, clip in ((F32, T.FLOAT32), (F16, T.FLOAT16)):
        ins = [t] * 48 + [T.INT32, clip, clip, T.BOOL, T.BOOL] + [t] * 8
        for n, v in ((1, HalVersion.V1_2), (2, HalVersion.V1_2), (5, HalVersion.V1_3), (6, HalVersion.V1_3)):
            out.append(sig(ins, [t] * n, v))
    return out


register(OpSpec(OperationType.LSTM, _lstm_signatures(), _lstm))
register(OpSpec(OperationType.UNIDIRECTIONAL_SEQUENCE_LSTM, _uni_signatures(), _unidirectional))
register(OpSpec(OperationType.BIDIRECTIONAL_SEQUENCE_LSTM, _bi_signatures(), _bidirectional))
