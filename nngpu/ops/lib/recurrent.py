"""What the recurrent families (RNN, LSTM) share: sequence and auxiliary input shapes, and the
activations a recurrent cell may name."""
from __future__ import annotations

import numpy as np

from ..registry import OpContext, OpError

ACTIVATIONS = {0, 1, 2, 3, 4, 6}


Shape = tuple[int, ...]


def sequence_input(node: OpContext, i: int, time_major: bool) -> tuple[Shape, int]:
    """The 3-D sequence input i's shape and its batch size."""
    x = node.in_shape(i)
    if len(x) != 3:
        raise OpError("input must be 3-D")
    return x, x[1] if time_major else x[0]


def aux_input(node: OpContext, i: int, x: Shape, fw_aux: bool, bw_aux: bool) -> tuple[Shape | None, int]:
    """A bidirectional op's optional aux input i (None when not given), checked against the
    input shape `x` and whether each direction has aux weights; and the backward direction's
    input size: with an aux input but no aux weights the aux input feeds the backward
    direction (1.3 parallel linking), otherwise both read the input."""
    if fw_aux != bw_aux:
        raise OpError("forward and backward aux weights must both be given or both omitted")
    if not node.given(i):
        if fw_aux:
            raise OpError("aux weights given without an aux input")
        return None, x[2]
    aux = node.in_shape(i)
    if len(aux) != 3 or aux[:2] != x[:2]:
        raise OpError("aux input must be 3-D with the input's time and batch sizes")
    return aux, x[2] if fw_aux else aux[2]


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


def check_activation(act: int) -> None:
    if act not in ACTIVATIONS:
        raise OpError(f"unsupported activation {act}")
