"""A lane-wise kernel (ir/vectorize.py) written in explicit vectors: thread t computes outputs
t * W .. t * W + W - 1 as one vector of W lanes, each lane the scalar kernel's expression
(loads of the output's own element or of a repeated row's become one vector load, a load every
thread shares and a constant are broadcast, `c ? a : b` is a lane select). The size is a
multiple of W, so no thread has a partial vector. The dialect spells the vectors
(CStyleRenderer's vector hooks)."""
from __future__ import annotations

from typing import Any

from ..ir.expr import Binary, Const, Expr, Helper, Load, Select, Unary, Var, use_counts, walk
from ..ir.kernel import Kernel
from ..ir.vectorize import row_period, uniform

_INFIX = {"+", "-", "*", "/", "<", "<=", ">", ">=", "==", "!=", "&&", "||"}


class VectorWriter:
    """Writes one lane-wise kernel of `lanes` lanes a thread."""

    def __init__(self, r: Any, kernel: Kernel, lanes: int) -> None:   # r: render.CStyleRenderer
        self.r, self.kernel, self.lanes = r, kernel, lanes
        self.params = {b.key: f"in{k}" for k, b in enumerate(kernel.inputs)}
        self.refs = use_counts(walk(kernel.value))
        self.lines: list[str] = []
        self.memo: dict[int, str] = {}

    @property
    def storages(self) -> set[str]:
        return {b.storage for b in self.kernel.inputs} | {self.kernel.out.storage}

    @property
    def helpers(self) -> list[Helper]:
        return []

    def body(self) -> str:
        k, r = self.kernel, self.r
        value = self.emit(k.value)
        sig = [r.param(b, self.params[b.key], True) for b in k.inputs] + [r.param(k.out, "out", False)]
        head = [f"{r.kernel_head(None)} {k.name}({', '.join(sig)}) {{",
                f"    int i = {r.gid} * {self.lanes};", f"    if (i >= {k.size}) return;"]
        store = r.vector_store("out", "i", value, self.lanes)
        return "\n".join(head + self.lines + [f"    {store}", "}"]) + "\n"

    def emit(self, node: Expr) -> str:
        """A vector (float lanes, or int lanes of -1 / 0 for a comparison) of node's value."""
        if id(node) in self.memo:
            return self.memo[id(node)]
        text = self.expression(node)
        if self.temporary(node):
            name = f"t{len(self.memo)}"
            kind = "float" if node.dtype == "float" else "int"
            self.lines.append(f"    {self.r.vector_type(kind, self.lanes)} {name} = {text};")
            text = name
        self.memo[id(node)] = text
        return text

    def temporary(self, node: Expr) -> bool:
        """Whether node's vector is computed once into a temporary: a value used more than once."""
        return self.refs.get(id(node), 0) > 1 and not isinstance(node, Const)

    def expression(self, node: Expr) -> str:
        r, n = self.r, self.lanes
        if isinstance(node, Const):
            return r.broadcast(r.literal(node), "float", n)
        if isinstance(node, Load):
            ptr = self.params[node.buffer.key]
            if node.index is self.kernel.index:
                return r.vector_load(ptr, "i", n)
            period = row_period(node.index, self.kernel)
            if period is not None:   # lanes i % C .. i % C + n - 1: C is a multiple of n
                return r.vector_load(ptr, f"(i % {period})", n)
            assert uniform(node.index)
            return r.broadcast(f"{ptr}[{r.literal(node.index)}]", "float", n)
        if isinstance(node, Unary):
            x = self.emit(node.x)
            return f"(-{x})" if node.op == "-" else f"{node.op}({x})"
        if isinstance(node, Binary):
            a, b = self.emit(node.a), self.emit(node.b)
            return f"({a} {node.op} {b})" if node.op in _INFIX else f"{node.op}({a}, {b})"
        if isinstance(node, Select):
            return r.vector_select(self.emit(node.cond), self.emit(node.a), self.emit(node.b))
        if isinstance(node, Var):
            raise TypeError("a lane-wise kernel uses its index only to load")
        raise TypeError(f"cannot render {type(node).__name__} in vectors")
