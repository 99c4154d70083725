"""Sequence operators: UNIDIRECTIONAL_SEQUENCE_LSTM / RNN, BIDIRECTIONAL_SEQUENCE_LSTM / RNN,
LSTM, RNN and SVDF, mapped to the NNAPI operations of the same names.

TFLite's inputs are NNAPI's first ones in the same order; NNAPI adds the options as scalars
(activation, clips, time_major, merge_outputs) and puts the layer-norm weights last. A state
tensor (a TFLite variable) starts at zero: the imported model is stateless, each execution
starts as the interpreter's first invocation does."""
from __future__ import annotations

import numpy as np

from ...hal.types import OperandLifeTime, OperandType, OperationType
from ..context import OpCtx
from ..tensors import nn_dims, operand_spec
from .common import registry

Op = OperationType
T = OperandType
L = OperandLifeTime
MAPPERS, mapper = registry()


def _in(c: OpCtx, k: int, like: int) -> int:
    """Input k: an omitted optional input is a NO_VALUE operand of the type of input `like`; a
    variable (state) tensor without data is a zero constant."""
    if not c.has(k):
        ref = c.b.operands[like]
        return c.b.operand(ref.type, [], lifetime=L.NO_VALUE)
    t = c.t_in(k)
    if t.is_variable and t.data is None and t.index not in c.table.cache:
        spec = operand_spec(t)
        dtype = np.float16 if spec.type == T.TENSOR_FLOAT16 else np.float32
        idx = c.b.constant(spec.type, np.zeros(nn_dims(t.shape), dtype), scale=spec.scale,
                           zero_point=spec.zero_point)
        c.table.cache[t.index] = idx
        c.table.warnings.append(f"operator #{c.op.index} {c.op.name}: state tensor {t.name} starts at zero on "
                                f"every execution (the interpreter carries it over between invocations)")
        return idx
    return c.inp(k, as_float=c.hybrid())


def _inputs(c: OpCtx, ks) -> list[int]:
    x = c.inp(0)
    return [x] + [_in(c, k, x) for k in ks if k != 0]


def _act_clip(c: OpCtx) -> list[int]:
    o = c.opts
    return [c.b.i32(int(o.FusedActivationFunction())), c.b.f32(float(o.CellClip())), c.b.f32(float(o.ProjClip()))]


@mapper("UNIDIRECTIONAL_SEQUENCE_LSTM")
def _uni_lstm(c: OpCtx) -> None:
    ins = _inputs(c, range(20)) + _act_clip(c) + [c.b.boolean(bool(c.opts.TimeMajor()))]
    x = ins[0]
    ins += [_in(c, k, x) for k in range(20, 24)]  # layer-norm weights
    c.emit(Op.UNIDIRECTIONAL_SEQUENCE_LSTM, ins, [c.out()])


@mapper("LSTM")
def _lstm(c: OpCtx) -> None:
    o = c.opts
    if o is not None and o.KernelType() != 0:
        c.unsupported("the basic LSTM kernel type")
    outs = [c.out(k) for k in range(len(c.op.outputs))]
    if len(outs) != 1:
        c.unsupported("LSTM with state outputs")
    # NNAPI LSTM has four outputs (scratch, output state, cell state, output): TFLite's is the last.
    x = c.inp(0)
    ins = _inputs(c, range(20)) + _act_clip(c) + [_in(c, k, x) for k in range(20, 24)]
    t_state, t_cell = c.t_in(18), c.t_in(19)
    batch, units = t_state.shape[0], t_cell.shape[-1]
    scratch = c.b.operand(c.b.operands[x].type, [batch, units * (4 if c.has(1) else 3)])  # CIFG: 3 gates
    state = c.b.operand(c.b.operands[x].type, nn_dims(t_state.shape))
    cell = c.b.operand(c.b.operands[x].type, nn_dims(t_cell.shape))
    c.emit(Op.LSTM, ins, [scratch, state, cell, outs[0]])


@mapper("BIDIRECTIONAL_SEQUENCE_LSTM")
def _bi_lstm(c: OpCtx) -> None:
    o = c.opts
    x = c.inp(0)
    ins = _inputs(c, range(48)) + _act_clip(c) + [c.b.boolean(bool(o.MergeOutputs())),
                                                  c.b.boolean(bool(o.TimeMajor()))]
    # TFLite's bidirectional LSTM has no layer normalization: NNAPI's 8 weights are omitted.
    ins += [c.b.operand(c.b.operands[x].type, [], lifetime=L.NO_VALUE) for _ in range(8)]
    c.emit(Op.BIDIRECTIONAL_SEQUENCE_LSTM, ins, [c.out(k) for k in range(len(c.op.outputs))])


def _rnn_common(c: OpCtx) -> list[int]:
    return [c.b.i32(int(c.opts.FusedActivationFunction()))]


@mapper("UNIDIRECTIONAL_SEQUENCE_RNN")
def _uni_rnn(c: OpCtx) -> None:
    ins = _inputs(c, range(5)) + _rnn_common(c) + [c.b.i32(int(bool(c.opts.TimeMajor())))]
    c.emit(Op.UNIDIRECTIONAL_SEQUENCE_RNN, ins, [c.out()])


@mapper("RNN")
def _rnn(c: OpCtx) -> None:
    # NNAPI RNN outputs (hidden state out, output); TFLite's single output is both.
    ins = _inputs(c, range(5)) + _rnn_common(c)
    out = c.out()
    state = c.b.like(out)
    c.emit(Op.RNN, ins, [state, out])


@mapper("BIDIRECTIONAL_SEQUENCE_RNN")
def _bi_rnn(c: OpCtx) -> None:
    o = c.opts
    ins = _inputs(c, range(12)) + _rnn_common(c) + [c.b.boolean(bool(o.TimeMajor())),
                                                    c.b.boolean(bool(o.MergeOutputs()))]
    c.emit(Op.BIDIRECTIONAL_SEQUENCE_RNN, ins, [c.out(k) for k in range(len(c.op.outputs))])


@mapper("SVDF")
def _svdf(c: OpCtx) -> None:
    # TFLite (input, weights_feature, weights_time, bias, state); NNAPI adds rank and activation
    # and outputs (state out, output).
    o = c.opts
    ins = _inputs(c, range(5)) + [c.b.i32(int(o.Rank())), c.b.i32(int(o.FusedActivationFunction()))]
    out = c.out()
    t_state = c.t_in(4)
    state = c.b.operand(c.b.operands[ins[0]].type, nn_dims(t_state.shape))
    c.emit(Op.SVDF, ins, [state, out])
