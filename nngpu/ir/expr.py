"""Kernel IR expressions: typed values over a kernel's coordinates.

Four compute types: "bool", "int" (32-bit), "long" (64-bit) and "float" (32-bit). Nodes are
plain objects compared by identity: a node built once and used twice is one value, which the
renderer computes once. Operators build nodes (`a + b`, `a < b`, `x.where(a, b)`); integer
`/` and `%` are C's (truncating), so index arithmetic reads as it will run.

Leaves are constants, variables (coordinates, loop counters) and loads from kernel buffers; a
`Reduce` is a loop nest accumulating one or more values (conv and pool windows, reductions);
a `Call` invokes a helper function that the renderer emits once per kernel, only when used."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

_RANK = {"bool": 0, "int": 1, "long": 2, "float": 3}


class Expr:
    """A typed value. `hint` names the temporary the renderer gives it (it then always gets one)."""

    __slots__ = ("dtype", "hint")

    def __init__(self, dtype: str) -> None:
        assert dtype in _RANK, dtype
        self.dtype = dtype
        self.hint: str | None = None

    def children(self) -> Sequence["Expr"]:
        return ()

    def named(self, hint: str) -> "Expr":
        self.hint = hint
        return self

    def cast(self, dtype: str) -> "Expr":
        if dtype == self.dtype:
            return self
        if isinstance(self, Const):
            return Const(_PY[dtype](self.value), dtype)
        return Cast(self, dtype)

    def where(self, a, b) -> "Expr":
        """`self ? a : b` (self is a condition)."""
        return select(self, a, b)

    def eq(self, o) -> "Expr":
        return binary("==", self, o)

    def ne(self, o) -> "Expr":
        return binary("!=", self, o)

    def __add__(self, o): return binary("+", self, o)
    def __radd__(self, o): return binary("+", o, self)
    def __sub__(self, o): return binary("-", self, o)
    def __rsub__(self, o): return binary("-", o, self)
    def __mul__(self, o): return binary("*", self, o)
    def __rmul__(self, o): return binary("*", o, self)
    def __truediv__(self, o): return binary("/", self, o)
    def __rtruediv__(self, o): return binary("/", o, self)
    def __mod__(self, o): return binary("%", self, o)
    def __lt__(self, o): return binary("<", self, o)
    def __le__(self, o): return binary("<=", self, o)
    def __gt__(self, o): return binary(">", self, o)
    def __ge__(self, o): return binary(">=", self, o)
    def __and__(self, o): return binary("&&" if self.dtype == "bool" else "&", self, o)
    def __or__(self, o): return binary("||" if self.dtype == "bool" else "|", self, o)
    def __lshift__(self, o): return binary("<<", self, o)
    def __rshift__(self, o): return binary(">>", self, o)
    def __neg__(self): return unary("-", self)
    def __invert__(self): return unary("!", self)
    __hash__ = object.__hash__


_PY = {"bool": bool, "int": int, "long": int, "float": float}


class Const(Expr):
    __slots__ = ("value",)

    def __init__(self, value, dtype: str) -> None:
        super().__init__(dtype)
        self.value = _PY[dtype](value)


class Var(Expr):
    """A named variable bound by the kernel or a loop."""

    __slots__ = ("name",)

    def __init__(self, name: str, dtype: str = "long") -> None:
        super().__init__(dtype)
        self.name = name


@dataclass(eq=False)
class Buffer:
    """A kernel parameter: one device buffer of `storage` elements ("float", "half", "int",
    "bool8", "u8", "i8", "i16", "u16"). `key` identifies the tensor it holds for the compiler."""

    key: int
    storage: str

    @property
    def dtype(self) -> str:
        return STORAGE_COMPUTE[self.storage]


STORAGE_COMPUTE = {"float": "float", "half": "float", "int": "int", "bool8": "bool", "u8": "int", "i8": "int",
                   "i16": "int", "u16": "int"}


class Load(Expr):
    __slots__ = ("buffer", "index")

    def __init__(self, buffer: Buffer, index: Expr) -> None:
        super().__init__(buffer.dtype)
        self.buffer, self.index = buffer, as_expr(index, "long")

    def children(self):
        return (self.index,)


class Unary(Expr):
    """A prefix operator ("-", "!") or a math function ("exp", "floor", ...)."""

    __slots__ = ("op", "x")

    def __init__(self, op: str, x: Expr, dtype: str | None = None) -> None:
        super().__init__(dtype or x.dtype)
        self.op, self.x = op, x

    def children(self):
        return (self.x,)


class Binary(Expr):
    __slots__ = ("op", "a", "b")

    def __init__(self, op: str, a: Expr, b: Expr, dtype: str) -> None:
        super().__init__(dtype)
        self.op, self.a, self.b = op, a, b

    def children(self):
        return (self.a, self.b)


class Select(Expr):
    __slots__ = ("cond", "a", "b")

    def __init__(self, cond: Expr, a: Expr, b: Expr) -> None:
        super().__init__(a.dtype)
        self.cond, self.a, self.b = cond, a, b

    def children(self):
        return (self.cond, self.a, self.b)


class Cast(Expr):
    __slots__ = ("x",)

    def __init__(self, x: Expr, dtype: str) -> None:
        super().__init__(dtype)
        self.x = x

    def children(self):
        return (self.x,)


@dataclass(frozen=True, eq=False)
class Helper:
    """A device function: C source with $i64 / $u64 for the 64-bit types, $L / $UL for their
    literal suffixes and $qualifier for the dialect's function qualifier; `needs` are helpers
    it calls."""

    name: str
    result: str
    source: str
    needs: tuple["Helper", ...] = ()


class Call(Expr):
    __slots__ = ("helper", "args")

    def __init__(self, helper: Helper, args: Sequence[Expr]) -> None:
        super().__init__(helper.result)
        self.helper, self.args = helper, tuple(args)

    def children(self):
        return self.args


@dataclass(eq=False)
class Loop:
    """`for (var = start; var < stop; ++var)`: `lets` are bound at each iteration, then the
    iteration is skipped unless every `guard` holds."""

    var: Var
    stop: Expr | int
    start: Expr | int = 0
    lets: list[tuple[Var, Expr]] = field(default_factory=list)
    guards: list[Expr] = field(default_factory=list)


@dataclass(eq=False)
class Acc:
    """One accumulator of a Reduce: starts at `init`, takes `body` at each iteration through
    `combine(acc, body)`, or with compensated (Kahan) summation when `kahan` is set. With
    `associative`, combine is associative and commutative with `init` its identity, so partial
    accumulators may be combined in any order (a work-group's tree, ir/schedule.py)."""

    init: Expr
    body: Expr
    combine: Callable[[Expr, Expr], Expr] | None = None
    kahan: bool = False
    associative: bool = False


class Reduce(Expr):
    """A loop nest with accumulators; its value is the first accumulator (`out(k)` the k-th)."""

    __slots__ = ("loops", "accs", "_outs")

    def __init__(self, loops: Sequence[Loop], accs: Sequence[Acc]) -> None:
        super().__init__(accs[0].init.dtype)
        self.loops, self.accs = list(loops), list(accs)
        self._outs: dict[int, ReduceOut] = {}

    def out(self, k: int) -> "Expr":
        if k == 0:
            return self
        if k not in self._outs:
            self._outs[k] = ReduceOut(self, k)
        return self._outs[k]


class ReduceOut(Expr):
    __slots__ = ("reduce", "k")

    def __init__(self, reduce: Reduce, k: int) -> None:
        super().__init__(reduce.accs[k].init.dtype)
        self.reduce, self.k = reduce, k

    def children(self):
        return (self.reduce,)


def reduce_sum(loops: Sequence[Loop], body: Expr, kahan: bool = False) -> Reduce:
    return Reduce(loops, [Acc(Const(0, body.dtype), body, lambda a, v: a + v, kahan, associative=True)])


# ---- constructors with constant folding ---------------------------------------------------

def const(value, dtype: str) -> Const:
    return Const(value, dtype)


def as_expr(x, dtype: str = "long") -> Expr:
    """A Python number as a constant of `dtype` (bools stay bool); an Expr as it is."""
    if isinstance(x, Expr):
        return x
    if isinstance(x, bool):
        return Const(x, "bool")
    return Const(x, "float" if isinstance(x, float) else dtype)


def _promote(a: str, b: str) -> str:
    return a if _RANK[a] >= _RANK[b] else b


_COMPARE_FOLD = {"<": lambda x, y: x < y, "<=": lambda x, y: x <= y, ">": lambda x, y: x > y,
                 ">=": lambda x, y: x >= y, "==": lambda x, y: x == y, "!=": lambda x, y: x != y}
_COMPARE = set(_COMPARE_FOLD)
_INT_FOLD = {"+": lambda x, y: x + y, "-": lambda x, y: x - y, "*": lambda x, y: x * y, "/": None, "%": None}


def binary(op: str, a, b) -> Expr:
    if not isinstance(a, Expr) and not isinstance(b, Expr):
        raise TypeError("binary needs an Expr operand")
    if not isinstance(a, Expr):
        a = as_expr(a, b.dtype if b.dtype != "bool" else "int")
    if not isinstance(b, Expr):
        b = as_expr(b, a.dtype if a.dtype != "bool" else "int")
    if op in ("&&", "||"):
        return _fold_logical(op, a, b)
    if op in _COMPARE and isinstance(a, Const) and isinstance(b, Const):
        return Const(_COMPARE_FOLD[op](a.value, b.value), "bool")
    if op in _COMPARE and a.dtype != "float" and same_value(a, b):
        # an integer equals itself (a float may be NaN); C compilers warn at x >= x
        return Const(op in ("<=", ">=", "=="), "bool")
    dtype = "bool" if op in _COMPARE else _promote(a.dtype, b.dtype)
    if op in ("<<", ">>"):
        dtype = a.dtype
    if dtype in ("int", "long") and op in _INT_FOLD:
        folded = _fold_int(op, a, b, dtype)
        if folded is not None:
            return folded
    return Binary(op, a, b, dtype)


def same_value(a: Expr, b: Expr, _seen: dict[tuple[int, int], bool] | None = None) -> bool:
    """Whether `a` and `b` compute the same value in every thread: one node, equal constants, or
    loads of one element of one tensor (a kernel never writes what it reads) and operators over
    the same values. Each pair of nodes is compared once (`_seen`), so shared subexpressions cost
    no more than a tree's walk."""
    if a is b:
        return True
    if type(a) is not type(b) or a.dtype != b.dtype:
        return False
    if isinstance(a, Const):
        return a.value == b.value
    seen = {} if _seen is None else _seen
    if (id(a), id(b)) not in seen:
        seen[id(a), id(b)] = False   # while comparing: a DAG has no cycle, so never read then
        if isinstance(a, Load):   # one key: one parameter
            same = a.buffer.key == b.buffer.key and same_value(a.index, b.index, seen)
        elif isinstance(a, (Unary, Binary, Cast, Select)):
            same = getattr(a, "op", None) == getattr(b, "op", None) and all(
                same_value(x, y, seen) for x, y in zip(a.children(), b.children()))
        else:
            same = False   # variables of loops, reductions, helper calls: only the node itself
        seen[id(a), id(b)] = same
    return seen[id(a), id(b)]


def _fold_logical(op: str, a: Expr, b: Expr) -> Expr:
    """&& and || with a constant side reduce to the other side or a constant."""
    for known, other in ((a, b), (b, a)):
        if isinstance(known, Const):
            if op == "&&":
                return other.cast("bool") if known.value else Const(False, "bool")
            return Const(True, "bool") if known.value else other.cast("bool")
    return Binary(op, a, b, "bool")


def _fold_int(op: str, a: Expr, b: Expr, dtype: str) -> Expr | None:
    """Integer identities that keep generated index arithmetic short (x + 0, x * 1, x * 0,
    x / 1, x % 1)."""
    ca = a.value if isinstance(a, Const) else None
    cb = b.value if isinstance(b, Const) else None
    if op in ("/", "%"):
        return (a.cast(dtype) if op == "/" else Const(0, dtype)) if cb == 1 else None
    if ca is not None and cb is not None and abs(ca) < 1 << 30 and abs(cb) < 1 << 30:
        return Const(_INT_FOLD[op](ca, cb), dtype)
    if op == "+" and cb == 0 or op == "-" and cb == 0 or op == "*" and cb == 1:
        return a if a.dtype == dtype else a.cast(dtype)
    if op == "+" and ca == 0 or op == "*" and ca == 1:
        return b if b.dtype == dtype else b.cast(dtype)
    if op == "*" and (ca == 0 or cb == 0):
        return Const(0, dtype)
    return None


def unary(op: str, x: Expr) -> Expr:
    if op == "!":
        return Unary("!", x, "bool")
    if op == "-" and isinstance(x, Const):
        return Const(-x.value, x.dtype)
    return Unary(op, x)


def select(cond: Expr, a, b) -> Expr:
    """`cond ? a : b`; Python numbers become constants of the other branch's type (int when
    both are numbers)."""
    if not isinstance(a, Expr) and not isinstance(b, Expr):
        a = as_expr(a, "int")
    a = as_expr(a, b.dtype) if not isinstance(a, Expr) else a
    b = as_expr(b, a.dtype) if not isinstance(b, Expr) else b
    dtype = _promote(a.dtype, b.dtype)
    return Select(cond, a.cast(dtype), b.cast(dtype))


def fn(name: str, *args: Expr) -> Expr:
    """A float math function of the C library: exp, log, sqrt, tanh, floor, fmax, pow, ..."""
    if len(args) == 1:
        return Unary(name, args[0])
    a, b = args
    return Binary(name, as_expr(a, "float"), as_expr(b, "float"), "float")


def clamp(x: Expr, lo, hi) -> Expr:
    """lo <= x <= hi by comparisons (integers; for floats use fmin / fmax)."""
    x = select(x < lo, lo, x)
    return select(x > hi, hi, x)


def walk(root: Expr) -> list[Expr]:
    """Every node reachable from `root` (Reduce bodies included), each once, children first."""
    seen: set[int] = set()
    order: list[Expr] = []
    stack: list[tuple[Expr, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        if done:
            order.append(node)
            continue
        if id(node) in seen:
            continue
        seen.add(id(node))
        stack.append((node, True))
        for child in reversed(list(all_children(node))):
            if id(child) not in seen:
                stack.append((child, False))
    return order


def use_counts(nodes: list[Expr]) -> dict[int, int]:
    """How many operand slots of `nodes` refer to each node (by id): a writer binds a node used
    more than once to a temporary."""
    refs: dict[int, int] = {}
    for node in nodes:
        for child in node.children():
            refs[id(child)] = refs.get(id(child), 0) + 1
    return refs


def all_children(node: Expr):
    """A node's operands, and for a Reduce everything its loops and accumulators use."""
    yield from node.children()
    if isinstance(node, Reduce):
        for loop in node.loops:
            for e in (loop.stop, loop.start):
                if isinstance(e, Expr):
                    yield e
            for var, e in loop.lets:
                yield e
            yield from loop.guards
        for acc in node.accs:
            yield acc.init
            yield acc.body


def bound_by(red: Reduce) -> set[int]:
    """The variables (ids) a Reduce binds: its loop counters and their lets."""
    return {id(v) for loop in red.loops for v in [loop.var, *(var for var, _ in loop.lets)]}
