"""A zero PAD of rows and columns that only convolutions read becomes each one's own padding,
before any plan is made: the padded tensor is never written (Keras' ZeroPadding2D before a
stride-2 layer, MediaPipe's PAD before a VALID depthwise convolution, or before two: the pose
detector's).

CONV_2D and DEPTHWISE_CONV_2D on NHWC take the PAD's input with explicit padding: the PAD's rows
and columns plus their own (implicit VALID, or explicit). PAD fills with zero, or for quantized
tensors with the zero point, which is what a convolution's padding reads, so the answer is the
same bits; PAD keeps its input's scale and zero point, which is checked. It folds only where the
reference accepts the sum (each side below the dilated filter extent) and everything it reads is
a constant. The new scalars live in a small pool of their own, so the model's operand values are
not copied."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..hal.types import DataLocation, Model_1_3, Operand, OperandLifeTime, OperandType, Operation, OperationType
from ..memory import allocate_shared
from ..modelutil import read_constant
from ..ops import load_all
from ..ops.lib.conv_common import PADDING_VALID
from ..ops.registry import OpContext, OpError

_CONSTANT = (OperandLifeTime.CONSTANT_COPY, OperandLifeTime.CONSTANT_REFERENCE)
_CONVOLUTIONS = frozenset({OperationType.CONV_2D, OperationType.DEPTHWISE_CONV_2D})


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


def _folded_padding(model: Model_1_3, pad: Operation, op: Operation) -> tuple[list[int], int] | None:
    """(the convolution's explicit padding with the PAD's added, the index of its first input after
    its padding), read by the convolution's own parameter parser from its constant inputs."""
    g = model.main
    x, padded = g.operands[pad.inputs[0]], g.operands[pad.outputs[0]]
    extra, filt = _row_column_pads(model, pad), g.operands[op.inputs[1]].dimensions
    scalars = [_value(model, i) for i in op.inputs[3:]]  # the parser reads no tensor's value
    if ((x.type, x.scale, x.zeroPoint) != (padded.type, padded.scale, padded.zeroPoint) or extra is None
            or len(x.dimensions) != 4 or len(filt) != 4 or any(v is None for v in scalars)):
        return None
    try:
        p = OpContext(op, g.operands, [None, None, None, *scalars]).params
    except OpError:
        return None
    if p.nchw or p.pad.code not in (None, PADDING_VALID):
        return None
    own = (p.pad.left, p.pad.right, p.pad.top, p.pad.bottom)
    ext_h, ext_w = (filt[1] - 1) * p.dil_h + 1, (filt[2] - 1) * p.dil_w + 1
    total = [a + b for a, b in zip(own, extra)]  # left, right, top, bottom
    if max(total[:2]) >= ext_w or max(total[2:]) >= ext_h:
        return None  # the reference refuses padding as large as the filter
    return total, 4 if p.pad.code is not None else 7


def fold_pads(model: Model_1_3) -> Model_1_3:
    """The model with each such PAD folded into its convolutions (the model itself if none is)."""
    load_all()  # the convolutions' parameter parsers
    g = model.main
    readers: dict[int, list[tuple[int, int]]] = {}   # tensor → (operation, input position) reading it
    for k, op in enumerate(g.operations):
        for position, i in enumerate(op.inputs):
            readers.setdefault(i, []).append((k, position))
    folds: dict[int, tuple[int, list[int], int]] = {}   # conv → (its PAD, padding, first input after it)
    for p, pad in enumerate(g.operations):
        t = pad.outputs[0] if pad.type == OperationType.PAD and pad.outputs else None
        reads = readers.get(t, [])
        # every reader a convolution taking it as its input (the pose detector's feed two)
        if not reads or t in g.outputIndexes or any(position != 0 or g.operations[k].type not in _CONVOLUTIONS
                                                    for k, position in reads):
            continue
        done = {k: _folded_padding(model, pad, g.operations[k]) for k, _ in reads}
        if all(d is not None for d in done.values()):
            folds.update((k, (p, *d)) for k, d in done.items())
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
