"""32-bit index arithmetic where it is proven exact (issue 23, part 4).

The IR writes index arithmetic in 64-bit "long". A kernel's values are bounded: the thread
index by the grid, loop counters by their loops, constants by themselves, a load of an 8- or
16-bit storage by its type. `ranges` carries those bounds through the expression DAG by interval
arithmetic (C's truncating `/` and `%` included); `narrow_indices` rewrites every long node whose
value, and every long operand's, is proven to fit in 32 bits as an "int" node. Such a node's C
operation then runs on ints whose result fits, so it is exact; a long node that keeps 64 bits
gets its narrowed operands cast back to long, so its arithmetic is the same as before.
Accumulators and helper calls (the fixed-point arithmetic) are never narrowed."""
from __future__ import annotations

from typing import Callable

from .expr import (Acc, Binary, Call, Cast, Const, Expr, Load, Loop, Reduce, ReduceOut, Select, Unary,
                   Var, walk)
from .kernel import Kernel

Range = tuple[int, int] | None   # [lo, hi], None: not bounded (or not an integer)

INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1
_INT32: Range = (INT_MIN, INT_MAX)
_STORAGE: dict[str, Range] = {"u8": (0, 255), "i8": (-128, 127), "u16": (0, 65535), "i16": (-32768, 32767),
                              "bool8": (0, 1), "int": _INT32}


def _fits(r: Range) -> bool:
    return r is not None and INT_MIN <= r[0] and r[1] <= INT_MAX


def _span(values: list[int]) -> Range:
    return min(values), max(values)


def _divide(a: Range, b: Range, op: str) -> Range:
    """C's truncating `/` and `%`, for divisors of one sign."""
    if a is None or b is None or b[0] <= 0 <= b[1]:
        return None
    if op == "/":   # C truncates toward zero; exact in Python integers at any size
        return _span([(abs(x) // abs(y)) * (1 if (x < 0) == (y < 0) else -1) for x in a for y in b])
    m = max(abs(b[0]), abs(b[1])) - 1            # |a % b| < |b|, with a's sign
    return (0 if a[0] >= 0 else -min(m, -a[0]), 0 if a[1] <= 0 else min(m, a[1]))


def _bits(a: Range, b: Range, op: str) -> Range:
    if a is None or b is None or a[0] < 0 or b[0] < 0:
        return None
    if op == "&":
        return 0, min(a[1], b[1])
    if op in ("|", "^"):
        return 0, (1 << max(a[1], b[1]).bit_length()) - 1
    if op == "<<":
        return (a[0] << b[0], a[1] << b[1]) if b[1] < 64 else None
    return a[0] >> b[1], a[1] >> b[0]            # >>


def _binary(op: str, a: Range, b: Range) -> Range:
    if op in ("<", "<=", ">", ">=", "==", "!=", "&&", "||"):
        return 0, 1
    if op in ("/", "%"):
        return _divide(a, b, op)
    if op in ("&", "|", "^", "<<", ">>"):
        return _bits(a, b, op)
    if a is None or b is None:
        return None
    if op == "+":
        return a[0] + b[0], a[1] + b[1]
    if op == "-":
        return a[0] - b[1], a[1] - b[0]
    if op == "*":
        return _span([x * y for x in a for y in b])
    return None                                   # a float function


class _Ranges:
    """The range of every integer node of one kernel (by id), computed once each."""

    def __init__(self, kernel: Kernel) -> None:
        self.memo: dict[int, Range] = {id(kernel.index): (0, kernel.size - 1)}
        self.binds: dict[int, Callable[[], Range]] = {}
        for node in walk(kernel.value):
            if isinstance(node, Reduce):
                for loop in node.loops:
                    self.binds[id(loop.var)] = lambda loop=loop: self._loop(loop)
                    for var, e in loop.lets:
                        self.binds[id(var)] = lambda e=e: self.of(e)
        for node in walk(kernel.value):
            self.of(node)

    def _loop(self, loop: Loop) -> Range:
        start, stop = (self.of(e) if isinstance(e, Expr) else (e, e) for e in (loop.start, loop.stop))
        return None if start is None or stop is None else (start[0], max(start[0], stop[1] - 1))

    def of(self, node: Expr) -> Range:
        key = id(node)
        if key not in self.memo:
            self.memo[key] = None        # a cycle through a loop's own bound: unbounded
            r = self._compute(node)
            if node.dtype == "int":      # C int: whatever it computes is an int
                r = r if _fits(r) else _INT32
            elif node.dtype == "bool":
                r = 0, 1
            elif node.dtype == "float":
                r = None
            self.memo[key] = r
        return self.memo[key]

    def _compute(self, node: Expr) -> Range:
        if isinstance(node, Const):
            return (int(node.value), int(node.value)) if node.dtype != "float" else None
        if isinstance(node, Var):
            bind = self.binds.get(id(node))
            return bind() if bind is not None else None
        if isinstance(node, Load):
            self.of(node.index)
            return _STORAGE.get(node.buffer.storage)
        if isinstance(node, Cast):
            inner = self.of(node.x)
            return inner if node.x.dtype in ("bool", "int", "long") else None
        if isinstance(node, Select):
            self.of(node.cond)
            a, b = self.of(node.a), self.of(node.b)
            return None if a is None or b is None else (min(a[0], b[0]), max(a[1], b[1]))
        if isinstance(node, Unary):
            x = self.of(node.x)
            return (-x[1], -x[0]) if node.op == "-" and x is not None else None
        if isinstance(node, Binary):
            return _binary(node.op, self.of(node.a), self.of(node.b))
        for child in node.children():     # Reduce, ReduceOut, Call: bounded only by their type
            self.of(child)
        return None


def ranges(kernel: Kernel) -> dict[int, Range]:
    """The proven range of each integer node of `kernel`, by id (None: not bounded)."""
    return _Ranges(kernel).memo


class _Narrower:
    def __init__(self, kernel: Kernel) -> None:
        self.range = ranges(kernel)
        self.new: dict[int, Expr] = {}

    def narrowed(self, node: Expr) -> bool:
        """Whether a long node becomes an int: its value fits, and so does every long operand's."""
        if node.dtype != "long" or isinstance(node, (Reduce, ReduceOut, Call)) or not _fits(self.range.get(id(node))):
            return False
        return all(self.map(c).dtype != "long" for c in node.children() if c.dtype == "long")

    def operand(self, child: Expr, keep_long: bool) -> Expr:
        """The rewritten operand; cast back to long for a parent that computes in 64 bits."""
        new = self.map(child)
        if not keep_long or child.dtype != "long" or new.dtype == "long":
            return new
        return Const(new.value, "long") if isinstance(new, Const) else Cast(new, "long")

    def map(self, node: Expr) -> Expr:
        key = id(node)
        if key not in self.new:
            new = self.new[key] = self._rebuild(node)
            if node.hint is not None:
                new.hint = node.hint
        return self.new[key]

    def _rebuild(self, node: Expr) -> Expr:
        narrow = self.narrowed(node)
        dtype = "int" if narrow else node.dtype
        keep = not narrow and node.dtype == "long"
        if isinstance(node, Const):
            return Const(node.value, dtype)
        if isinstance(node, Var):
            return Var(node.name, dtype)
        if isinstance(node, Load):
            return Load(node.buffer, self.map(node.index))
        if isinstance(node, Cast):
            inner = self.operand(node.x, keep)
            return inner if inner.dtype == dtype else Cast(inner, dtype)
        if isinstance(node, Select):
            out = Select(self.map(node.cond), self.operand(node.a, keep), self.operand(node.b, keep))
        elif isinstance(node, Unary):
            out = Unary(node.op, self.operand(node.x, keep), dtype)
        elif isinstance(node, Binary):
            out = Binary(node.op, self.operand(node.a, keep), self.operand(node.b, keep), dtype)
        elif isinstance(node, Call):
            return Call(node.helper, [self.map(a) for a in node.args])
        elif isinstance(node, ReduceOut):
            return self.map(node.reduce).out(node.k)
        elif isinstance(node, Reduce):
            return self._reduce(node)
        else:
            raise TypeError(f"no rewrite for {type(node).__name__}")
        out.dtype = dtype
        return out

    def _bound(self, e: Expr | int) -> Expr | int:
        return self.map(e) if isinstance(e, Expr) else e

    def _reduce(self, node: Reduce) -> Reduce:
        loops = [Loop(self.map(lp.var), self._bound(lp.stop), self._bound(lp.start),
                      [(self.map(v), self.map(e)) for v, e in lp.lets], [self.map(g) for g in lp.guards])
                 for lp in node.loops]
        return Reduce(loops, [Acc(self.map(a.init), self.map(a.body), a.combine, a.kahan, a.associative)
                              for a in node.accs])


def narrow_indices(kernel: Kernel) -> Kernel:
    """`kernel` with every long value proven to fit in 32 bits computed as an int."""
    n = _Narrower(kernel)
    for node in walk(kernel.value):   # children first: each rewrite finds its operands rewritten
        n.map(node)
    value = n.map(kernel.value)
    return Kernel(kernel.name, kernel.out, kernel.shape, n.map(kernel.index), value)
