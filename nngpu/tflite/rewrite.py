"""The graph rewrites made before any operator is mapped, in the order they run:

1. fold_weights: DENSIFY / DEQUANTIZE of a constant become the unpacked constant (fold.py).
2. fold_known_values: SHAPE of a tensor whose shape is known at import becomes that constant,
   and the integer shape arithmetic on constants after it (STRIDED_SLICE, PACK, CONCATENATION,
   ...) is evaluated (fold.evaluate). A file stores 1 for an extent the converter saw as
   dynamic: a RESHAPE whose new shape became constant gets its output shape from it, and the
   common operators' outputs get theirs from their inputs (infer.py).
3. repeat_to_resize (repeat_resize.py): a chain of rank-5 shape operators (EXPAND_DIMS or
   RESHAPE, TILE or BROADCAST_TO) that repeats the rows and columns of an NHWC tensor (Keras 3
   UpSampling2D "nearest", beyond NNAPI's rank 4) becomes RESIZE_NEAREST_NEIGHBOR, when float32
   resize arithmetic gives exactly that repeat.
4. narrow_int64_indices: ARG_MAX / ARG_MIN with an int64 output compute int32 (NNAPI has no
   int64); the tensor remembers int64 as the type its user sees (Tensor.shown_type).
5. copy_passthrough: a graph output that is an input, a constant or another output gets its own
   tensor through a RESHAPE to its shape (an NNAPI operand has one lifetime).
6. drop_dead: operators whose outputs nothing uses (left by 2 and 3) are skipped.

rewrite_graph runs them all and returns the indexes of the operators the importer skips."""
from __future__ import annotations

import numpy as np

from .fold import FoldError, evaluate, fold_constants
from .graph_edit import int32_constant, new_tensor
from .infer import infer_shape
from .reader import Operator, TFLiteGraph
from .repeat_resize import repeat_to_resize
from .tensors import INT32, INT64

_SIDE_EFFECTS = frozenset({"ASSIGN_VARIABLE", "CALL_ONCE"})


def fold_weights(g: TFLiteGraph) -> set[int]:
    return set(fold_constants(g))


def fold_known_values(g: TFLiteGraph, skip: set[int]) -> set[int]:
    known_shape = set(g.inputs)  # tensors whose stored shape is the run-time one
    folded = set()
    for op in g.operators:
        if op.index in skip:
            continue
        ts = [g.tensors[i] for i in op.inputs if i >= 0]
        outs = [g.tensors[i] for i in op.outputs]
        if op.name == "SHAPE" and ts and (not ts[0].dynamic or ts[0].index in known_shape):
            dtype = np.int64 if outs[0].type == INT64 else np.int32
            outs[0].data = np.asarray(ts[0].shape, dtype)
        elif op.name == "RESHAPE" and len(ts) > 1 and ts[1].data is not None and ts[0].data is None:
            shape = [int(d) for d in ts[1].data.reshape(-1)]
            size = int(np.prod(ts[0].shape, dtype=np.int64))
            if -1 in shape:
                rest = int(np.prod([d for d in shape if d != -1], dtype=np.int64))
                shape[shape.index(-1)] = size // rest if rest else 0
            outs[0].shape = shape
            known_shape.add(outs[0].index)
            continue
        elif (value := evaluate(op, g.tensors)) is not None:
            outs[0].data = value
            outs[0].shape = list(value.shape)
        else:
            if all(t.index in known_shape or not t.dynamic for t in ts):
                if all(not t.dynamic for t in outs):
                    known_shape.update(t.index for t in outs)
                elif len(outs) == 1 and (shape := infer_shape(op, ts)) is not None:
                    outs[0].shape = shape  # the stored shape has 1 for each dynamic extent
                    known_shape.add(outs[0].index)
            continue
        folded.add(op.index)
    return folded


def narrow_int64_indices(g: TFLiteGraph, skip: set[int]) -> None:
    for op in g.operators:
        if op.index not in skip and op.name in ("ARG_MAX", "ARG_MIN"):
            out = g.tensors[op.outputs[0]]
            if out.type == INT64:
                out.type, out.shown_type = INT32, INT64


def copy_passthrough(g: TFLiteGraph, skip: set[int]) -> None:
    produced = {o for op in g.operators if op.index not in skip for o in op.outputs}
    seen: set[int] = set()
    for k, t_index in enumerate(g.outputs):
        src = g.tensors[t_index]
        if t_index in produced and t_index not in seen and t_index not in g.inputs:
            seen.add(t_index)
            continue
        copy = new_tensor(g, src, data=None, is_variable=False)
        shape = int32_constant(g, f"{src.name}/copy_shape", np.asarray(src.shape or [1]))
        g.operators.append(Operator(len(g.operators), "RESHAPE", False, [t_index, shape.index], [copy.index]))
        g.outputs[k] = copy.index


def drop_dead(g: TFLiteGraph, skip: set[int]) -> set[int]:
    needed = set(g.outputs)
    dead = set()
    for op in reversed(g.operators):
        if op.index in skip:
            continue
        if op.name in _SIDE_EFFECTS or any(o in needed for o in op.outputs):
            needed.update(i for i in op.inputs if i >= 0)
        else:
            dead.add(op.index)
    return dead


def rewrite_graph(g: TFLiteGraph) -> set[int]:
    """Run the rewrites on g in place; the indexes of the operators to skip."""
    skip = fold_weights(g)
    skip |= fold_known_values(g, skip)
    repeat_to_resize(g, skip)
    narrow_int64_indices(g, skip)
    copy_passthrough(g, skip)
    return skip | drop_dead(g, skip)


__all__ = ["FoldError", "rewrite_graph"]
