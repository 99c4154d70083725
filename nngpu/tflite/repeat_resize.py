"""Nearest upsampling written as rank-5 shape operations becomes RESIZE_NEAREST_NEIGHBOR.

Keras 3's UpSampling2D ("nearest") converts to a chain that NNAPI cannot run as written (rank 5
is beyond its rank 4): an axis of 1 inserted into the NHWC tensor (EXPAND_DIMS, or a RESHAPE that
does the same), TILE or BROADCAST_TO along it, and a RESHAPE that merges it into H or W; TensorFlow
2.21 writes the H and W repeats one after the other, the middle RESHAPE merging one inserted axis
and inserting the next. Whatever the chain's steps, it is replaced when it is exactly a repeat of
rows and columns: the chain is run on the element indices of its input and compared with
np.repeat, and RESIZE_NEAREST_NEIGHBOR's float32 source index gives exactly that repeat. The
last RESHAPE becomes the RESIZE; the operators before it, left unused, are dropped."""
from __future__ import annotations

import numpy as np

from .graph_edit import consumers, int32_constant
from .reader import Operator, Tensor, TFLiteGraph

_SHAPE_OPS = frozenset({"RESHAPE", "EXPAND_DIMS", "TILE", "BROADCAST_TO"})
_MAX_ELEMENTS = 1 << 24   # a longer chain output is left alone rather than simulated


def _resize_is_repeat(n: int, k: int) -> bool:
    """RESIZE_NEAREST_NEIGHBOR's float32 source index floor(dst * n / (n*k)) is dst // k."""
    dst = np.arange(n * k, dtype=np.float32)
    src = np.minimum(np.floor(dst * (np.float32(n) / np.float32(n * k))), n - 1)
    return bool(np.array_equal(src.astype(np.int64), np.arange(n * k) // k))


def _chain(g: TFLiteGraph, last: Operator, producer: dict[int, Operator],
           users: dict[int, list[Operator]]) -> list[Operator] | None:
    """The shape operators from a rank-4 tensor to `last`'s input through rank-5 tensors only,
    each used once, first to last; None when `last` ends no such chain."""
    chain: list[Operator] = []
    t = last.inputs[0]
    while len(g.tensors[t].shape) == 5:
        op = producer.get(t)
        if op is None or op.name not in _SHAPE_OPS or len(users.get(t, [])) != 1:
            return None
        if any(i >= 0 and g.tensors[i].data is None for i in op.inputs[1:]):
            return None   # multiples, axes and shapes must be constants
        chain.insert(0, op)
        t = op.inputs[0]
    return chain if len(g.tensors[t].shape) == 4 and any(op.name in ("TILE", "BROADCAST_TO") for op in chain) else None


def _run(g: TFLiteGraph, ops: list[Operator], value: np.ndarray) -> np.ndarray:
    for op in ops:
        out = g.tensors[op.outputs[0]].shape
        if op.name == "TILE":
            value = np.tile(value, [int(m) for m in g.tensors[op.inputs[1]].data.reshape(-1)])
        elif op.name == "BROADCAST_TO":
            value = np.broadcast_to(value, out)
        else:
            value = value.reshape(out)
        if list(value.shape) != list(out):
            raise ValueError("the chain's stored shapes disagree with its operators")
    return value


def _scales(x: Tensor, out: Tensor) -> tuple[int, int] | None:
    n, h, w, c = x.shape
    if len(out.shape) != 4 or out.shape[0] != n or out.shape[3] != c or h == 0 or w == 0:
        return None
    if out.shape[1] % h or out.shape[2] % w:
        return None
    return out.shape[1] // h, out.shape[2] // w


def repeat_to_resize(g: TFLiteGraph, skip: set[int]) -> set[int]:
    """Rewrite every such chain in place; the indexes of the operators that became a RESIZE."""
    producer = {o: op for op in g.operators if op.index not in skip for o in op.outputs}
    users = consumers(g, skip)
    replaced = set()
    for op in g.operators:
        if op.index in skip or op.name != "RESHAPE" or len(g.tensors[op.outputs[0]].shape) != 4:
            continue
        chain = _chain(g, op, producer, users)
        x, out = (g.tensors[chain[0].inputs[0]], g.tensors[op.outputs[0]]) if chain else (None, None)
        scales = _scales(x, out) if chain else None
        if scales is None or int(np.prod(out.shape)) > _MAX_ELEMENTS:
            continue
        index = np.arange(int(np.prod(x.shape)), dtype=np.int64).reshape(x.shape)
        try:
            got = _run(g, [*chain, op], index)
        except ValueError:
            continue
        kh, kw = scales
        if not np.array_equal(got, index.repeat(kh, axis=1).repeat(kw, axis=2)):
            continue
        if not (_resize_is_repeat(x.shape[1], kh) and _resize_is_repeat(x.shape[2], kw)):
            continue
        size = int32_constant(g, f"{out.name}/resize_size", np.asarray(out.shape[1:3]))
        op.name, op.inputs, op.options = "RESIZE_NEAREST_NEIGHBOR", [x.index, size.index], None
        replaced.add(op.index)
    return replaced


__all__ = ["repeat_to_resize"]
