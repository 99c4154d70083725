"""The kernel IR: what device implementations describe and the renderer writes as C.

- expr.py: typed expressions (loads, arithmetic, select, casts, helper calls, Reduce loops);
- tensor.py: tensors as buffers or fused Computes, coordinates, broadcasting;
- window.py: the convolution / pooling window, defined once;
- fixedpoint.py: the reference's quantized fixed-point arithmetic as device helpers;
- kernel.py: a kernel storing one Compute; storage.py: operand types in buffers."""
from .expr import (Acc, Buffer, Call, Const, Expr, Helper, Load, Loop, Reduce, Var, as_expr, clamp, const, fn,
                   reduce_sum, select)
from .tensor import BufferTensor, Compute, Coords, Stored, Tensor, broadcast, elementwise, linear, size_of, strides

__all__ = ["Acc", "Buffer", "BufferTensor", "Call", "Compute", "Const", "Coords", "Expr", "Helper", "Load", "Loop",
           "Reduce", "Stored", "Tensor", "Var", "as_expr", "broadcast", "clamp", "const", "elementwise", "fn", "linear",
           "reduce_sum", "select", "size_of", "strides"]
