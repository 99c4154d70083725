"""Small edits the graph rewrites share (rewrite.py, repeat_resize.py): who reads each tensor, and
new tensors appended to a graph."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from .reader import Operator, Tensor, TFLiteGraph
from .tensors import INT32


def consumers(g: TFLiteGraph, skip: set[int]) -> dict[int, list[Operator]]:
    """Tensor index -> the operators (not in `skip`) that read it."""
    users: dict[int, list[Operator]] = {}
    for op in g.operators:
        if op.index not in skip:
            for i in op.inputs:
                if i >= 0:
                    users.setdefault(i, []).append(op)
    return users


def new_tensor(g: TFLiteGraph, like: Tensor, **changes) -> Tensor:
    """A copy of `like` (with `changes`) appended to g's tensors."""
    t = replace(like, index=len(g.tensors), **changes)
    g.tensors.append(t)
    return t


def int32_constant(g: TFLiteGraph, name: str, value: np.ndarray) -> Tensor:
    return new_tensor(g, Tensor(0, name, list(value.shape), INT32), data=value.astype(np.int32))
