"""A zero PAD of rows and columns that only a convolution reads becomes that convolution's own
padding, before any plan is made: the padded tensor is never written (Keras' ZeroPadding2D before
a stride-2 layer, MediaPipe's PAD before a VALID depthwise convolution).

CONV_2D and DEPTHWISE_CONV_2D on NHWC take the PAD's input with explicit padding: the PAD's rows
and columns plus their own (implicit VALID, or explicit). PAD fills with zero, or for quantized
tensors with the zero point, which is what a convolution's padding reads, so the answer is the
same bits; PAD keeps its input's scale and zero point, which is checked. It folds only where the
reference accepts the sum (each side below the dilated filter extent) and everything it reads is
a constant. The new scalars live in a small pool of their own, so the model's operand values are
not copied."""
from __future__ import annotations

from collections import Counter
from dataclasses import replace

import numpy as np

from ..hal.types import DataLocation, Model_1_3, Operand, OperandLifeTime, OperandType, Operation, OperationType
from ..memory import allocate_shared
from ..modelutil import read_constant

_CONSTANT = (OperandLifeTime.CONSTANT_COPY, OperandLifeTime.CONSTANT_REFERENCE)
_IMPLICIT_INPUTS = {OperationType.CONV_2D: (7, 10), OperationType.DEPTHWISE_CONV_2D: (8, 11)}
_VALID = 2


def _value(model: Model_1_3, i: int) -> np.ndarray | None:
    operand = model.main.operands[i]
    return read_constant(model, operand) if operand.lifetime in _CONSTANT else None


def _row_column_pads(model: Model_1_3, pad: Operation) -> tuple[int, int, int, int] | None:
    """(left, right, top, bottom) of a PAD that pads only rows and columns of a rank-4 tensor."""
    amounts = _value(model, pad.inputs[1])
    if amounts is None or amounts.shape != (4, 2) or (amounts < 0).any() or amounts[0].any() or amounts[3].any():
        return None
    (top, bottom), (left, right) = amounts[1].tolist(), amounts[2].tolist()
    return left, right, top, bottom


def _own_padding(model: Model_1_3, op: Operation) -> tuple[tuple[int, int, int, int], int] | None:
    """(the convolution's explicit padding, the index of its first input after the padding), for
    an NHWC convolution whose padding is VALID or explicit constants; None otherwise."""
    implicit, explicit_count = _IMPLICIT_INPUTS[op.type]
    values = [_value(model, i) for i in op.inputs[3:]]
    if any(v is None for v in values):
        return None
    n = len(op.inputs)
    is_implicit = n == implicit or (n == implicit + 3 and values[implicit - 3].dtype == np.bool_)
    nchw_at = implicit if is_implicit else explicit_count
    if n > nchw_at and bool(values[nchw_at - 3]):
        return None
    if is_implicit:
        return ((0, 0, 0, 0), 4) if int(values[0]) == _VALID else None
    return tuple(int(v) for v in values[:4]), 7  # type: ignore[return-value]


def _dilation(model: Model_1_3, op: Operation) -> tuple[int, int]:
    implicit, explicit_count = _IMPLICIT_INPUTS[op.type]
    n = len(op.inputs)
    if n in (implicit + 3, explicit_count + 3):
        return int(_value(model, op.inputs[-1])), int(_value(model, op.inputs[-2]))  # (h, w)
    return 1, 1


def _folded_padding(model: Model_1_3, pad: Operation, op: Operation) -> tuple[list[int], int] | None:
    g = model.main
    x, padded = g.operands[pad.inputs[0]], g.operands[pad.outputs[0]]
    if (x.type, x.scale, x.zeroPoint) != (padded.type, padded.scale, padded.zeroPoint) or len(x.dimensions) != 4:
        return None
    extra, own = _row_column_pads(model, pad), _own_padding(model, op)
    filt = g.operands[op.inputs[1]].dimensions
    if extra is None or own is None or len(filt) != 4:
        return None
    dil_h, dil_w = _dilation(model, op)
    ext_h, ext_w = (filt[1] - 1) * dil_h + 1, (filt[2] - 1) * dil_w + 1
    total = [a + b for a, b in zip(own[0], extra)]  # left, right, top, bottom
    if max(total[:2]) >= ext_w or max(total[2:]) >= ext_h:
        return None  # the reference refuses padding as large as the filter
    return total, own[1]


def fold_pads(model: Model_1_3) -> Model_1_3:
    """The model with each such PAD folded into its convolution (the model itself if none is)."""
    g = model.main
    producer = {o: k for k, op in enumerate(g.operations) for o in op.outputs}
    uses = Counter(i for op in g.operations for i in op.inputs)
    folds: dict[int, tuple[int, list[int], int]] = {}   # conv → (its PAD, padding, first input after it)
    for k, op in enumerate(g.operations):
        p = producer.get(op.inputs[0]) if op.type in _IMPLICIT_INPUTS and op.inputs else None
        if p is None or g.operations[p].type != OperationType.PAD:
            continue
        t = g.operations[p].outputs[0]
        if uses[t] != 1 or t in g.outputIndexes:
            continue
        done = _folded_padding(model, g.operations[p], op)
        if done is not None:
            folds[k] = (p, *done)
    if not folds:
        return model
    pool = allocate_shared(16 * len(folds))
    operands = list(g.operands)
    operations = list(g.operations)
    for n, (k, (p, total, rest)) in enumerate(folds.items()):
        pool.write(16 * n, np.asarray(total, np.int32))
        first = len(operands)
        operands += [Operand(OperandType.INT32, [], 1, 0.0, 0, OperandLifeTime.CONSTANT_REFERENCE,
                             DataLocation(len(model.pools), 16 * n + 4 * j, 4)) for j in range(4)]
        op = g.operations[k]
        operations[k] = Operation(op.type, [g.operations[p].inputs[0], *op.inputs[1:3], *range(first, first + 4),
                                            *op.inputs[rest:]], list(op.outputs))
    dropped = {p for p, _, _ in folds.values()}
    main = replace(g, operands=operands, operations=[op for k, op in enumerate(operations) if k not in dropped])
    return replace(model, main=main, pools=[*model.pools, pool])
