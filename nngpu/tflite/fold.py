"""Values known at import: the constant subgraphs that only unpack weights, as the TFLite NNAPI
delegate folds them (DENSIFY of a sparse constant and DEQUANTIZE of a float16 / quantized
constant become plain float32 or dense constants), and the integer shape arithmetic that
rewrite.py folds (EVALUATORS: STRIDED_SLICE, PACK, CONCATENATION, ... of constants). A folded
operator's outputs get the data, and the importer skips it."""
from __future__ import annotations

import numpy as np

from .reader import NP_DTYPES, Sparsity, Tensor, TFLiteGraph

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


# ---- evaluating shape arithmetic at import ------------------------------------------------------
def _strided_slice(x: np.ndarray, begin, end, strides, o) -> np.ndarray:
    if o is not None and (o.EllipsisMask() or o.NewAxisMask()):
        raise FoldError("STRIDED_SLICE with ellipsis / new-axis masks")
    bm, em, sm = (o.BeginMask(), o.EndMask(), o.ShrinkAxisMask()) if o is not None else (0, 0, 0)
    index = []
    for d in range(len(begin)):
        b = None if bm >> d & 1 else int(begin[d])
        e = None if em >> d & 1 else int(end[d])
        index.append(b if sm >> d & 1 else slice(b, e, int(strides[d])))
    return np.asarray(x[tuple(index)])


def _axis_opt(o, name: str = "Axis") -> int:
    return int(getattr(o, name)()) if o is not None else 0


# operator -> f(inputs, options): the small integer ops of shape computations.
EVALUATORS = {
    "STRIDED_SLICE": lambda v, o: _strided_slice(v[0], v[1], v[2], v[3], o),
    "PACK": lambda v, o: np.stack(v, axis=_axis_opt(o)),
    "CONCATENATION": lambda v, o: np.concatenate([np.atleast_1d(a) for a in v], axis=_axis_opt(o)),
    "RESHAPE": lambda v, o: v[0].reshape([int(d) for d in np.asarray(v[1]).reshape(-1)]),
    "GATHER": lambda v, o: np.take(v[0], v[1], axis=_axis_opt(o)),
    "CAST": lambda v, o: v[0],  # the output dtype is applied by the caller
    "ADD": lambda v, o: v[0] + v[1], "SUB": lambda v, o: v[0] - v[1], "MUL": lambda v, o: v[0] * v[1],
    "FLOOR_DIV": lambda v, o: v[0] // v[1], "FLOOR_MOD": lambda v, o: v[0] % v[1],
    "BROADCAST_ARGS": lambda v, o: np.asarray(np.broadcast_shapes(tuple(v[0]), tuple(v[1]))),
    "SQUEEZE": lambda v, o: np.squeeze(v[0]),
    "EXPAND_DIMS": lambda v, o: np.expand_dims(v[0], int(np.asarray(v[1]).reshape(-1)[0])),
    "FILL": lambda v, o: np.full([int(d) for d in v[0]], np.asarray(v[1]).reshape(-1)[0]),
    "RANGE": lambda v, o: np.arange(v[0].item(), v[1].item(), v[2].item()),
    "REDUCE_PROD": lambda v, o: np.prod(v[0], axis=tuple(int(a) for a in np.atleast_1d(v[1]))),
    "SLICE": lambda v, o: v[0][tuple(slice(int(b), None if int(s) < 0 else int(b) + int(s))
                                     for b, s in zip(v[1], v[2]))],
}


def evaluate(op, tensors: list[Tensor]) -> np.ndarray | None:
    """The value of an integer / bool operator whose inputs are all constant, or None."""
    fn = EVALUATORS.get(op.name)
    ins = [tensors[i] for i in op.inputs if i >= 0]
    if fn is None or len(op.outputs) != 1 or any(t.data is None or t.quant is not None for t in ins):
        return None
    out = tensors[op.outputs[0]]
    dtype = NP_DTYPES.get(out.type)
    if dtype is None or dtype.kind not in "iub" or out.quant is not None:
        return None
    try:
        value = np.asarray(fn([t.data for t in ins], op.options)).astype(dtype)
    except (ValueError, IndexError, TypeError) as e:
        raise FoldError(f"operator #{op.index} {op.name} on constants: {e}") from e
    return value
