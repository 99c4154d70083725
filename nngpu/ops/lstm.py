"""Float LSTM: LSTM (one step, 23- or 27-input form), UNIDIRECTIONAL_SEQUENCE_LSTM and
BIDIRECTIONAL_SEQUENCE_LSTM.

One cell implementation (`Cell.step`) covers CIFG, peephole, projection, clipping, layer
normalization and the auxiliary input, following the reference LSTMStep: without layer norm the
gate bias is added before the activation; with it, after normalizing and scaling. The time loop
is sequential; each step is a few batched matmuls. float16 is computed in float32/64 throughout
(the reference converts once, runs every step in float32 and converts back). The shape
functions hold every shape rule (`cell_dims`: the weights against each other); the references
call them first.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..hal.types import OperandType as T
from ..hal.types import OperationType
from .lib.recurrent import Shape, activate, aux_input, check_activation, sequence_input
from .registry import HalVersion, OpContext, OpError, OpSpec, register, sig

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


@dataclass(frozen=True)
class CellDims:
    """One direction's sizes, from its weights' shapes."""
    n_cell: int
    n_input: int
    n_output: int
    cifg: bool
    n_aux: int | None                         # aux input size; None without aux weights

    @property
    def scratch(self) -> int:
        """LSTM's scratch buffer columns: one block per gate computed (CIFG has no input gate)."""
        return self.n_cell * (3 if self.cifg else 4)


def cell_dims(node: OpContext, idx: CellIndex) -> CellDims:
    """One direction's sizes, checking which weights are given and their shapes against each
    other as the reference does."""
    def shapes(indices) -> list[Shape | None]:
        if indices is None:
            return [None] * 4
        return [node.in_shape(i) if node.given(i) else None for i in indices]

    w_x, w_h, peep, bias = shapes(idx.w_x), shapes(idx.w_h), shapes(idx.peep), shapes(idx.bias)
    ln, w_aux = shapes(idx.ln), shapes(idx.w_aux)
    proj_w, proj_b = shapes((idx.proj_w, idx.proj_b))
    for g in (1, 2, 3):
        if w_x[g] is None or w_h[g] is None or bias[g] is None:
            raise OpError(f"{GATES[g]} gate weights and bias are required")
    if len(w_x[3]) != 2:
        raise OpError("input-to-output weights must be 2-D")
    n_cell, n_input = w_x[3]
    if len(w_h[3]) != 2 or w_h[3][0] != n_cell:
        raise OpError("recurrent-to-output weights must be [num_units, output_size]")
    n_output = w_h[3][1]
    cifg = w_x[0] is None
    if (w_h[0] is None) != cifg:
        raise OpError("input-to-input and recurrent-to-input weights must both be given or omitted")
    if cifg and bias[0] is not None:
        raise OpError("CIFG LSTM takes no input gate bias")
    if not cifg and bias[0] is None:
        raise OpError("input gate bias is required without CIFG")
    for g in range(4):
        if w_x[g] is not None and w_x[g] != (n_cell, n_input):
            raise OpError(f"input-to-{GATES[g]} weights must be [num_units, input_size]")
        if w_h[g] is not None and w_h[g] != (n_cell, n_output):
            raise OpError(f"recurrent-to-{GATES[g]} weights must be [num_units, output_size]")
        if bias[g] is not None and bias[g] != (n_cell,):
            raise OpError(f"{GATES[g]} gate bias must be [num_units]")
        if ln[g] is not None and ln[g] != (n_cell,):
            raise OpError(f"{GATES[g]} layer norm weights must be [num_units]")
    if any(p is not None and p != (n_cell,) for p in peep):
        raise OpError("peephole weights must be [num_units]")
    ci, cf, co = (p is not None for p in peep)
    if not ((ci or cifg) and cf and co or not (ci or cf or co)):
        raise OpError("peephole weights must be all given or all omitted")
    # Layer norm is on when its forget/cell/output weights are given (input's only without CIFG).
    rest = [w is not None for w in ln[1:]]
    if any(rest) and not all(rest) or (all(rest) and not cifg and ln[0] is None):
        raise OpError("layer normalization weights must be all given or all omitted")
    if proj_w is not None and proj_w != (n_output, n_cell):
        raise OpError("projection weights must be [output_size, num_units]")
    if proj_b is not None:
        if proj_w is None:
            raise OpError("projection bias without projection weights")
        if proj_b != (n_output,):
            raise OpError("projection bias must be [output_size]")
    n_aux = None
    if any(w is not None for w in w_aux):
        need = [1, 2, 3] if cifg else [0, 1, 2, 3]
        if any(w_aux[g] is None for g in need):
            raise OpError("aux weights must be all given or all omitted")
        n_aux = w_aux[3][1] if len(w_aux[3]) == 2 else -1
        if any(w_aux[g] != (n_cell, n_aux) for g in need):
            raise OpError("aux weights must be [num_units, aux_input_size]")
    return CellDims(n_cell, n_input, n_output, cifg, n_aux)


def _check_state(node: OpContext, h: int, c: int, batch: int, d: CellDims) -> None:
    """The output state (input h) and cell state (input c) against the batch and the cell."""
    if node.in_shape(h) != (batch, d.n_output):
        raise OpError("output state must be [batch, output_size]")
    if node.in_shape(c) != (batch, d.n_cell):
        raise OpError("cell state must be [batch, num_units]")


def _opt(ctx: OpContext, i: int | None) -> np.ndarray | None:
    if i is None or not ctx.has_input(i):
        return None
    return np.asarray(ctx.input(i), dtype=np.float64)


class Cell:
    """One direction's weights (their shapes checked by `cell_dims` first): which tensors are
    given says which parts of the cell are on."""

    def __init__(self, ctx: OpContext, idx: CellIndex, act: int, cell_clip: float, proj_clip: float):
        check_activation(act)
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
        self.cifg = self.w_x[0] is None
        self.peephole = self.peep[2] is not None
        self.layer_norm = self.ln[1] is not None
        self.has_aux = self.w_aux[3] is not None

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
        steps = x.shape[0]
        out = np.empty((steps,) + h.shape, dtype=np.float64)
        for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
            h, c, _ = self.step(x[t], h, c, aux[t] if aux is not None and self.has_aux else None)
            out[t] = h
        return out, h, c


def _f(ctx: OpContext, i: int) -> np.ndarray:
    return np.asarray(ctx.input(i), dtype=np.float64)


def _idx(base: int, ln: tuple[int, int, int, int] | None, aux: tuple[int, int, int, int] | None = None) -> CellIndex:
    b = base
    return CellIndex((b, b + 1, b + 2, b + 3), (b + 4, b + 5, b + 6, b + 7), (b + 8, b + 9, b + 10),
                     (b + 11, b + 12, b + 13, b + 14), b + 15, b + 16, ln, aux)


# ---- LSTM -------------------------------------------------------------------------------------

def _lstm_index(node: OpContext) -> CellIndex:
    return _idx(1, (23, 24, 25, 26) if node.num_inputs == 27 else None)


def _lstm_shape(node: OpContext) -> list[Shape]:
    """scratch [batch, 3 or 4 * num_units], output state, cell state, output."""
    d = cell_dims(node, _lstm_index(node))
    x = node.in_shape(0)
    if len(x) != 2 or x[1] != d.n_input:
        raise OpError("input must be [batch, input_size]")
    batch = x[0]
    _check_state(node, 18, 19, batch, d)
    return [(batch, d.scratch), (batch, d.n_output), (batch, d.n_cell), (batch, d.n_output)]


def _lstm(ctx: OpContext) -> list[np.ndarray]:
    _lstm_shape(ctx)
    cell = Cell(ctx, _lstm_index(ctx), ctx.scalar(20), float(ctx.scalar(21)), float(ctx.scalar(22)))
    h, c, scratch = cell.step(_f(ctx, 0), _f(ctx, 18), _f(ctx, 19))
    return [scratch, h, c, h.copy()]


def _lstm_signatures():
    out = []
    for t, clip, v in ((F32, T.FLOAT32, HalVersion.V1_0), (F16, T.FLOAT16, HalVersion.V1_2)):
        base = [t] * 20 + [T.INT32, clip, clip]
        out.append(sig(base, [t] * 4, v))
        out.append(sig(base + [t] * 4, [t] * 4, HalVersion.V1_2))
    return out


# ---- UNIDIRECTIONAL_SEQUENCE_LSTM ------------------------------------------------------------

_UNI = _idx(1, (24, 25, 26, 27))


def _unidirectional_shape(node: OpContext) -> list[Shape]:
    """output [*input's time and batch, output_size], then (1.3) output state and cell state."""
    d = cell_dims(node, _UNI)
    x, batch = sequence_input(node, 0, bool(node.scalar(23)))
    if x[2] != d.n_input:
        raise OpError("input size does not match the weights")
    _check_state(node, 18, 19, batch, d)
    return [x[:2] + (d.n_output,), (batch, d.n_output), (batch, d.n_cell)][: node.num_outputs]


def _unidirectional(ctx: OpContext) -> list[np.ndarray]:
    _unidirectional_shape(ctx)
    cell = Cell(ctx, _UNI, ctx.scalar(20), float(ctx.scalar(21)), float(ctx.scalar(22)))
    time_major = bool(ctx.scalar(23))
    x = _f(ctx, 0)
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

_FW = _idx(1, (53, 54, 55, 56), (40, 41, 42, 43))
_BW = _idx(18, (57, 58, 59, 60), (44, 45, 46, 47))


def _bidirectional_shape(node: OpContext) -> list[Shape]:
    """The forward and backward outputs (one concatenated output when merged) shaped like the
    input with each direction's output size last, then (1.3) each direction's output state and
    cell state."""
    merge = bool(node.scalar(51))
    if node.num_outputs not in ((1, 5) if merge else (2, 6)):
        raise OpError("output count does not match merge_outputs")
    fw, bw = cell_dims(node, _FW), cell_dims(node, _BW)
    x, batch = sequence_input(node, 0, bool(node.scalar(52)))
    aux, bw_in = aux_input(node, 39, x, fw.n_aux is not None, bw.n_aux is not None)
    for d, n_in, h, c in ((fw, x[2], 35, 36), (bw, bw_in, 37, 38)):
        if n_in != d.n_input:
            raise OpError("input size does not match the weights")
        if d.n_aux is not None and aux[2] != d.n_aux:
            raise OpError("aux input size does not match the aux weights")
        _check_state(node, h, c, batch, d)
    seq = x[:2]
    outs = [seq + (fw.n_output + bw.n_output,)] if merge else [seq + (fw.n_output,), seq + (bw.n_output,)]
    if node.num_outputs > 2:
        outs += [(batch, fw.n_output), (batch, fw.n_cell), (batch, bw.n_output), (batch, bw.n_cell)]
    return outs


def _bidirectional(ctx: OpContext) -> list[np.ndarray]:
    _bidirectional_shape(ctx)
    act, cell_clip, proj_clip = ctx.scalar(48), float(ctx.scalar(49)), float(ctx.scalar(50))
    merge, time_major = bool(ctx.scalar(51)), bool(ctx.scalar(52))
    fw = Cell(ctx, _FW, act, cell_clip, proj_clip)
    bw = Cell(ctx, _BW, act, cell_clip, proj_clip)
    x = _f(ctx, 0)
    aux = _f(ctx, 39) if ctx.has_input(39) else None
    if not time_major:
        x = x.transpose(1, 0, 2)
        aux = aux.transpose(1, 0, 2) if aux is not None else None
    bw_x = aux if (aux is not None and not fw.has_aux) else x   # 1.3 parallel linking feeds aux to bw
    fw_out, fw_h, fw_c = fw.run(x, _f(ctx, 35), _f(ctx, 36), aux=aux)
    bw_out, bw_h, bw_c = bw.run(bw_x, _f(ctx, 37), _f(ctx, 38), reverse=True, aux=aux)
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


register(OpSpec(OperationType.LSTM, _lstm_signatures(), _lstm, shape=_lstm_shape))
register(OpSpec(OperationType.UNIDIRECTIONAL_SEQUENCE_LSTM, _uni_signatures(), _unidirectional,
                shape=_unidirectional_shape))
register(OpSpec(OperationType.BIDIRECTIONAL_SEQUENCE_LSTM, _bi_signatures(), _bidirectional,
                shape=_bidirectional_shape))
