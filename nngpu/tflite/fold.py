"""Fold the constant subgraphs that only unpack weights, as the TFLite NNAPI delegate does:
DENSIFY of a sparse constant and DEQUANTIZE of a float16 / quantized constant become plain
float32 (or dense) constants: the operators' outputs get the data, and the importer skips them."""
from __future__ import annotations

import numpy as np

from .reader import Sparsity, TFLiteGraph, Tensor

FOLDABLE = frozenset({"DEQUANTIZE", "DENSIFY"})


class FoldError(ValueError):
    """A constant that cannot be unpacked (malformed sparsity metadata)."""


def densify(t: Tensor) -> np.ndarray:
    """The dense value of a sparse constant (TACO format: traversal order, block map, and per
    level a dense size or CSR segments/indices), computed level by level without per-value loops."""
    s: Sparsity = t.sparsity
    rank = len(t.shape)
    order = s.traversal_order or list(range(rank + len(s.block_map)))
    if len(s.dims) != len(order):
        raise FoldError(f"{t.name}: {len(s.dims)} dim_metadata for {len(order)} traversal levels")
    pos = np.zeros(1, np.int64)            # position of each node within its level
    coords = np.zeros((len(order), 1), np.int64)
    sizes = [0] * len(order)               # extent of each expanded dimension
    for level, (dim, meta) in enumerate(zip(order, s.dims)):
        if meta.dense:
            n = meta.dense_size
            pos = (pos[:, None] * n + np.arange(n)).reshape(-1)
            coords = np.repeat(coords, n, axis=1)
            coords[level] = np.tile(np.arange(n), len(pos) // max(n, 1))
            sizes[dim] = n
        else:
            seg, idx = meta.segments, meta.indices
            if seg is None or idx is None or pos.size and pos.max() + 1 >= len(seg):
                raise FoldError(f"{t.name}: sparse level {level} lacks segments or indices")
            counts = seg[pos + 1] - seg[pos]
            starts = np.repeat(seg[pos], counts)
            within = np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
            pos = starts + within
            coords = np.repeat(coords, counts, axis=1)
            coords[level] = idx[pos]
            sizes[dim] = 0  # filled from the tensor shape below
    # Expanded dim d (d < rank) is the block index of original dim d when d is blocked.
    block_sizes = {orig: sizes[rank + k] for k, orig in enumerate(s.block_map)}
    by_dim = {dim: coords[level] for level, dim in enumerate(order)}
    dense_idx = np.zeros(coords.shape[1], np.int64)
    for d in range(rank):
        c = by_dim[d] * block_sizes.get(d, 1)
        if d in block_sizes:
            c = c + by_dim[rank + s.block_map.index(d)]
        dense_idx = dense_idx * t.shape[d] + c
    values = t.data.reshape(-1)
    if len(values) < len(pos) or (pos.size and pos.max() >= len(values)):
        raise FoldError(f"{t.name}: {len(values)} stored values for {len(pos)} positions")
    out = np.zeros(int(np.prod(t.shape, dtype=np.int64)), dtype=values.dtype)
    out[dense_idx] = values[pos]
    return out.reshape(t.shape)


def dequantize(t: Tensor) -> np.ndarray:
    """float32 value of a float16 or quantized constant (per-tensor or per-channel)."""
    data = t.data
    if t.quant is None or data.dtype.kind == "f":
        return data.astype(np.float32)
    q = t.quant
    shape = [1] * data.ndim
    if q.per_channel:
        shape[q.dim] = -1
    scale = q.scales.reshape(shape).astype(np.float32)
    zp = q.zero_points.reshape(shape)
    return ((data.astype(np.int64) - zp) * scale).astype(np.float32)


def fold_constants(graph: TFLiteGraph) -> list[int]:
    """Evaluate every DENSIFY / DEQUANTIZE whose input is constant; returns the folded operator
    indexes (their outputs now carry data)."""
    folded = []
    tensors = graph.tensors
    for op in graph.operators:
        if op.name not in FOLDABLE or not op.inputs or op.inputs[0] < 0:
            continue
        src = tensors[op.inputs[0]]
        if src.data is None or op.outputs[0] in graph.outputs:
            continue
        dst = tensors[op.outputs[0]]
        if op.name == "DENSIFY":
            if src.sparsity is None:
                value = src.data.reshape(src.shape)
            else:
                value = densify(src)
        else:
            if src.sparsity is not None:  # a sparse input must be densified first
                continue
            value = dequantize(src)
        dst.data = np.ascontiguousarray(value.reshape(dst.shape) if dst.shape else value)
        folded.append(op.index)
    return folded
