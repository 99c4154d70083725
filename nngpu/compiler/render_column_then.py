"""A folded kernel's vector function (render_epilogue.py's nn_then_vN) where the kernel is not
lane-wise in its index but is along a row: the face detector's PAD+ADD+RELU reads x[r * 24 + c]
for columns c < 24 and 0 past them. Written in the kernel's row r and column c (render_epilogue's
_in_rows), each integer value is a scalar of the first lane's column whose slope along the
row is 0 or 1; then
- a load whose index has slope 1 is one vector load from the first lane's index, one of slope 0
  a broadcast;
- a comparison of integers has the same value on every lane when it has at the first lane's
  column and at the last (its two sides' difference changes by one a column, so it changes
  sign at most once): the function tests that first, and only then computes the vector with
  the first lane's conditions (a vector straddling the PAD's edge takes the lanes one by one);
- a select on such a condition is C's `?:`, which computes only the branch it takes (a load past
  the edge is never made).
A kernel with anything else (an integer of another slope, a cast, a helper, a select on lanes
whose branches load) has no such function: the caller takes its lanes one by one."""
from __future__ import annotations

from ..ir.expr import Binary, Const, Expr, Load, Select, Unary, Var
from ..ir.kernel import Kernel
from ..ir.vectorize import COMPARE, LOGICAL, VECTOR_BINARY, VECTOR_UNARY
from .render import CStyleRenderer
from .render_vector import VectorWriter

_INFIX = {"+", "-", "*", "/", "%", "<", "<=", ">", ">=", "==", "!=", "&&", "||"}
_SCALAR_INT = {"+", "-", "*", "/", "%", "min", "max"}


class NotAlongRow(Exception):
    """The kernel has a value this writer cannot compute for a vector of a row's columns."""


class ColumnThen(VectorWriter):
    """Writes nn_then_v`lanes` for a kernel in rows (Vars "r" and "c"): `key`'s load is `y`;
    `params` names the other buffers."""

    def __init__(self, r: CStyleRenderer, kernel: Kernel, key: int, lanes: int, params: dict[int, str]) -> None:
        super().__init__(r, kernel, lanes)
        self.key, self.params = key, params
        self.slopes: dict[int, int] = {}
        self.guards: list[Expr] = []   # comparisons whose sides' difference moves along the row
        self.eager = _outside_branches(kernel.value)

    def function(self, head: str, lane_by_lane: str) -> str | None:
        """The function's text after its first line `head`, or None where the kernel is not
        computable so. `lane_by_lane`: the statements that compute the vector lane by lane (for a
        vector across an edge)."""
        try:
            value = self.emit(self.kernel.value)
        except NotAlongRow:
            return None
        body = [*self.lines, f"    return {value};"]
        if not self.guards:
            return "\n".join([head, *body, "}"]) + "\n"
        n = self.lanes
        same = " && ".join(f"({self.scalar(g, 0)} == {self.scalar(g, n - 1)})" for g in self.guards)
        return "\n".join([head, f"    if ({same}) {{", *("    " + line for line in body), "    }",
                          lane_by_lane, "}"]) + "\n"

    # ---- integers and conditions: scalars of a lane ---------------------------------------------
    def slope(self, node: Expr) -> int:
        """How much the integer `node` grows from one column to the next: 0 or 1."""
        if id(node) in self.slopes:
            return self.slopes[id(node)]
        if isinstance(node, Const):
            s = 0
        elif node is self.kernel.index or isinstance(node, Var) and node.name == "c":
            s = 1
        elif isinstance(node, Var) and node.name == "r":
            s = 0
        elif isinstance(node, Binary) and node.op in _SCALAR_INT and node.dtype in ("int", "long"):
            a, b = self.slope(node.a), self.slope(node.b)
            s = a + b if node.op == "+" else a - b if node.op == "-" else 0 if a == b == 0 else -1
        elif isinstance(node, Unary) and node.op == "-" and node.dtype in ("int", "long"):
            s = -self.slope(node.x)
        else:
            s = -1
        if s not in (0, 1):
            raise NotAlongRow(node)
        self.slopes[id(node)] = s
        return s

    def scalar(self, node: Expr, lane: int) -> str:
        """An integer or condition's text at lane `lane` (its column c + lane)."""
        if isinstance(node, Const):
            return self.r.literal(node)
        if isinstance(node, Var):
            name = "i" if node is self.kernel.index else node.name
            return name if lane == 0 or name == "r" else f"({name} + {lane})"
        if isinstance(node, Unary):
            return f"({node.op}{self.scalar(node.x, lane)})"
        a, b = self.scalar(node.a, lane), self.scalar(node.b, lane)
        return f"({a} {node.op} {b})" if node.op in _INFIX else f"{node.op}({a}, {b})"

    def condition(self, node: Expr) -> bool:
        """Whether the condition `node` is one scalar for every lane (after the guard), checking
        its parts; False: a condition on the lanes' values."""
        if isinstance(node, Binary) and node.op in COMPARE and node.a.dtype != "float":
            if node.b.dtype == "float":
                raise NotAlongRow(node)
            if self.slope(node.a) != self.slope(node.b) and node not in self.guards:
                self.guards.append(node)
            return True
        if isinstance(node, Binary) and node.op in LOGICAL:
            a, b = self.condition(node.a), self.condition(node.b)
            if a != b:
                raise NotAlongRow(node)
            return a
        if isinstance(node, Unary) and node.op == "!":
            return self.condition(node.x)
        if isinstance(node, Const) and node.dtype == "bool":
            return True
        return False

    def unguarded_load(self, branch: Expr) -> bool:
        """Whether a select's branch loads what the scalar kernel loads only when it takes that
        branch: a load not computed whichever way the selects go, nor behind a select of its
        own (which guards it, or is checked itself)."""
        todo, seen = [branch], set()
        while todo:
            node = todo.pop()
            if id(node) in seen or id(node) in self.eager or isinstance(node, Select):
                continue
            seen.add(id(node))
            if isinstance(node, Load) and node.buffer.key != self.key:
                return True
            todo.extend(node.children())
        return False

    # ---- float values: vectors ------------------------------------------------------------------
    def temporary(self, node: Expr) -> bool:
        # never a value that only a select's branch computes (it may load what only that branch may)
        return super().temporary(node) and id(node) in self.eager

    def expression(self, node: Expr) -> str:
        r, n = self.r, self.lanes
        if isinstance(node, Const) and node.dtype == "float":
            return r.broadcast(r.literal(node), "float", n)
        if isinstance(node, Load):
            if node.buffer.key == self.key:
                return "y"
            if node.buffer.storage != "float":
                raise NotAlongRow(node)
            slope = self.slope(node.index)   # before its text: it checks what scalar() may meet
            ptr, index = self.params[node.buffer.key], self.scalar(node.index, 0)
            if slope == 1:
                return r.vector_load(ptr, index, n)
            return r.broadcast(f"{ptr}[{index}]", "float", n)
        if isinstance(node, Unary) and node.op in VECTOR_UNARY and node.dtype == "float":
            x = self.emit(node.x)
            return f"(-{x})" if node.op == "-" else f"{node.op}({x})"
        if isinstance(node, Binary) and node.dtype == "float" and node.op in VECTOR_BINARY:
            a, b = self.emit(node.a), self.emit(node.b)
            return f"({a} {node.op} {b})" if node.op in _INFIX else f"{node.op}({a}, {b})"
        if isinstance(node, Binary) and node.op in COMPARE and node.a.dtype == node.b.dtype == "float":
            return f"({self.emit(node.a)} {node.op} {self.emit(node.b)})"
        if isinstance(node, Binary) and node.op in LOGICAL and not self.condition(node):
            return f"({self.emit(node.a)} {node.op} {self.emit(node.b)})"
        if isinstance(node, Select) and node.dtype == "float":
            if self.condition(node.cond):   # one branch for every lane: C's ?: takes only it
                return f"({self.scalar(node.cond, 0)} ? {self.emit(node.a)} : {self.emit(node.b)})"
            if self.unguarded_load(node.a) or self.unguarded_load(node.b):
                raise NotAlongRow(node)   # lanes would load what only some of them may
            return r.vector_select(self.emit(node.cond), self.emit(node.a), self.emit(node.b))
        raise NotAlongRow(node)


def _outside_branches(root: Expr) -> set[int]:
    """The nodes computed whichever way every select goes (a select's branches are not): those
    a temporary may compute before the selects."""
    seen: set[int] = set()
    todo = [root]
    while todo:
        node = todo.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        todo.extend([node.cond] if isinstance(node, Select) else node.children())
    return seen
