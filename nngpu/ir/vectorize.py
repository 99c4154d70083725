"""Which generated kernels a target may run in explicit vectors: float elementwise work whose
every load reads the output's own element, an element of a row repeated along the output (index
i % C, a per-channel scale say), or one element all threads share. A target whose schedule sets
a vector width (OpenCL on CPU devices, where PoCL vectorises across work-items only what it can
prove, and never a math function) then gives each thread a vector of neighbouring outputs: the
renderer (compiler/render_vector.py) and the launch (ir/schedule.py) both ask vector_width, so
they cannot disagree."""
from __future__ import annotations

from .expr import Binary, Const, Expr, Load, Select, Unary, Var
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


def row_period(index: Expr, kernel: Kernel) -> int | None:
    """C where `index` is the output's index modulo the constant C (a row repeated along the
    output), else None."""
    if isinstance(index, Binary) and index.op == "%" and index.a is kernel.index and isinstance(index.b, Const):
        return int(index.b.value)
    return None


def _node_ok(node: Expr) -> bool:
    if isinstance(node, Const):
        return True
    if isinstance(node, Unary):
        return node.op in VECTOR_UNARY and node.dtype == "float"
    if isinstance(node, Binary):
        if node.op in COMPARE:
            return node.a.dtype == "float" and node.b.dtype == "float"
        if node.op in LOGICAL:
            return node.dtype == "bool"
        return node.op in VECTOR_BINARY and node.dtype == "float"
    if isinstance(node, Select):
        return node.dtype == "float" and node.cond.dtype == "bool"
    return False   # casts, reductions, helpers, an index used as a value: the scalar kernel


def _periods(kernel: Kernel) -> list[int] | None:
    """The row periods of the kernel's row loads if it is lane-wise, else None."""
    if kernel.out.storage != "float" or kernel.value.dtype != "float":
        return None
    periods: list[int] = []
    seen: set[int] = set()
    todo = [kernel.value]
    while todo:
        node = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, Load):   # its index is not a value: it is checked, not walked
            if node.buffer.storage != "float":
                return None
            if node.index is kernel.index or uniform(node.index):
                continue
            period = row_period(node.index, kernel)
            if period is None:
                return None
            periods.append(period)
        elif isinstance(node, Var) or not _node_ok(node):
            return None
        else:
            todo.extend(node.children())
    return periods


def vector_width(kernel: Kernel, widest: int) -> int:
    """The lanes each thread of `kernel` computes under a schedule with vectors up to `widest`:
    the widest of 16, 8, 4 (up to `widest`) that divides its size and every row period of its
    loads, if it is lane-wise (see the module's doc), else 1."""
    periods = _periods(kernel) if widest >= 4 else None
    if periods is None:
        return 1
    return next((w for w in (16, 8, 4) if w <= widest and kernel.size % w == 0
                 and all(p % w == 0 for p in periods)), 1)
