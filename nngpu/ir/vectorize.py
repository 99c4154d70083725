"""Which generated kernels a target may run in explicit vectors: float elementwise work whose
every load reads either the output's own element or one element all threads share. A target
whose schedule sets a vector width (OpenCL on CPU devices, where PoCL vectorises across
work-items only what it can prove, and never a math function) then gives each thread a
vector of neighbouring outputs: the renderer (compiler/render_vector.py) and the launch
(ir/schedule.py) both ask vector_width, so they cannot disagree."""
from __future__ import annotations

from .expr import Binary, Const, Expr, Load, Select, Unary, Var, walk
from .kernel import Kernel

# Math functions that OpenCL defines lane by lane on float vectors, with the scalar's meaning.
VECTOR_UNARY = frozenset({"-", "exp", "log", "sqrt", "rsqrt", "tanh", "sin", "cos", "floor", "ceil", "fabs",
                          "round", "rint", "trunc"})
VECTOR_BINARY = frozenset({"+", "-", "*", "/", "fmin", "fmax", "pow"})
COMPARE = frozenset({"<", "<=", ">", ">=", "==", "!="})
LOGICAL = frozenset({"&&", "||"})


def uniform(index: Expr) -> bool:
    """An index that names one element for every thread: a constant."""
    return isinstance(index, Const)


def _lane_wise(kernel: Kernel) -> bool:
    if kernel.out.storage != "float":
        return False
    loads: list[Load] = []
    for node in walk(kernel.value):
        if isinstance(node, Load):
            loads.append(node)
        elif isinstance(node, Const):
            continue
        elif isinstance(node, Var):
            if node is not kernel.index:
                return False
        elif isinstance(node, Unary):
            if node.op not in VECTOR_UNARY or node.dtype != "float":
                return False
        elif isinstance(node, Binary):
            if node.op in COMPARE:
                if node.a.dtype != "float" or node.b.dtype != "float":
                    return False
            elif node.op in LOGICAL:
                if node.dtype != "bool":
                    return False
            elif node.op not in VECTOR_BINARY or node.dtype != "float":
                return False
        elif isinstance(node, Select):
            if node.dtype != "float" or node.cond.dtype != "bool":
                return False
        else:
            return False   # casts, reductions, helpers: the scalar kernel
    return all(load.buffer.storage == "float" and (load.index is kernel.index or uniform(load.index))
               for load in loads) and kernel.value.dtype == "float"


def vector_width(kernel: Kernel, widest: int) -> int:
    """The lanes each thread of `kernel` computes under a schedule with vectors up to `widest`:
    the widest of 16, 8, 4 (up to `widest`) that divides its size if it is lane-wise (see the
    module's doc), else 1."""
    if widest < 4 or not _lane_wise(kernel):
        return 1
    return next((w for w in (16, 8, 4) if w <= widest and kernel.size % w == 0), 1)
