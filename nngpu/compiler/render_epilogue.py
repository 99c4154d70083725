"""An elementwise kernel written as a C function that another kernel calls as it stores: a GEMM
folding in its one consumer (compiler/gemm_fold.py, kernels/gemm.cl THEN). The consumer's
loads of the producer's element become the function's argument `y`, its index the argument
`i`, given with its row `r` and column `c` in the caller's rows (i = r * row + c, c < row:
the scalar function takes its divisions of i by multiples of the row from them, the integer
divisions a caller that knows both need not do); the consumer's other buffers follow, in the
kernel's parameter order. Written by the renderer that would have written the kernel alone: the
scalar writer as `nn_then(y, i, r, c, ...)` and, for a target with vectors,
`nn_then_v4/8/16(y, i, r, c, ...)` on a vector of the neighbouring elements i .. i + n - 1 of
one row - the vector writer where the kernel would run in vectors of n lanes and n divides the
row (so its row loads stay within a row), else the vector writer along a row where the
kernel is computable so (render_column_then.py: the face detector's PAD+ADD+RELU), else each lane
by the scalar function."""
from __future__ import annotations

from ..ir.expr import Binary, Call, Cast, Const, Expr, Load, Select, Unary, Var, binary, const, walk
from ..ir.kernel import Kernel
from ..ir.schedule import Schedule
from ..ir.vectorize import vector_width
from .render import CStyleRenderer, KernelWriter
from .render_column_then import ColumnThen
from .render_vector import VectorWriter

LANES = (4, 8, 16)   # the vectors its callers store (gemm.cl on CPU devices, the templates)


def reads_only_own_element(kernel: Kernel, key: int) -> bool:
    """Whether every load of buffer `key` in the kernel reads the kernel's own element."""
    loads = [n for n in walk(kernel.value) if isinstance(n, Load) and n.buffer.key == key]
    return bool(loads) and all(n.index is kernel.index for n in loads)


def render_then(r: CStyleRenderer, kernel: Kernel, key: int, row: int, vectors: bool) -> str:
    """The C source of the kernel as a function of buffer `key`'s element: #defines THEN,
    THEN_PARAMS and THEN_ARGS (the other buffers, each with a leading comma), the preludes and
    helpers it uses, `nn_then` and, with `vectors`, `nn_then_v4`, `_v8` and `_v16`. `row`: the
    length of the rows the caller stores vectors within."""
    head, body = then_source(r, kernel, key, row, vectors)
    return "\n".join([*head, *body]) + "\n"


def then_source(r: CStyleRenderer, kernel: Kernel, key: int, row: int, vectors: bool,
                macro: str = "THEN") -> tuple[list[str], list[str]]:
    """render_then's source as (the preludes and helpers, one an item, so that a unit calling two
    folded kernels holds each once; the rest). Another `macro` than THEN names the #defines so
    (FIRST: FIRST, FIRST_PARAMS, FIRST_ARGS), the functions nn_first, nn_first_v4, ... and the
    other buffers first_in0, ...: a second folded kernel beside THEN's (compiler/squeeze_excite.py)."""
    name, param = ("nn_then", "in") if macro == "THEN" else (f"nn_{macro.lower()}", f"{macro.lower()}_in")
    in_rows = _in_rows(kernel, row)
    scalar = _ScalarThen(r, in_rows, key, name, param)
    head = [*r.prelude(scalar.storages), *r.render_helpers(scalar.helpers)]
    params = "".join(f", {p}" for p in scalar.signature)
    args = "".join(f", {scalar.params[b.key]}" for b in scalar.others)
    lines = [f"#define {macro}", f"#define {macro}_PARAMS {params}", f"#define {macro}_ARGS {args}",
             scalar.function()]
    for n in LANES if vectors else ():
        if vector_width(kernel, n) == n and row % n == 0:
            lines.append(_VectorThen(r, kernel, key, n, name, param).function(scalar.signature))
            continue
        vec = r.vector_type("float", n)
        first = f"{_qualified(r)}{vec} {name}_v{n}({vec} y, {scalar.index_type} i, int r, int c{params}) {{"
        lanes = _lane_by_lane(r, n, args, name)
        along = ColumnThen(r, in_rows, key, n, scalar.params).function(first, lanes)
        lines.append(along or "\n".join([first, lanes, "}"]) + "\n")
    return head, lines


def _in_rows(kernel: Kernel, row: int) -> Kernel:
    """The kernel with i / d and i % d, for its index i and d a multiple of `row`, computed from
    the row r and column c of i (Vars "r" and "c"): r / (d / row), and (r % (d / row)) * row + c."""
    i = kernel.index
    if i.dtype != "int":
        return kernel
    r, c = Var("r", "int"), Var("c", "int")
    memo: dict[int, Expr] = {}

    def rows(node: Expr) -> Expr:
        if id(node) in memo:
            return memo[id(node)]
        out = node
        if (isinstance(node, Binary) and node.op in ("/", "%") and node.a is i and isinstance(node.b, Const)
                and int(node.b.value) > 0 and int(node.b.value) % row == 0):
            q = const(int(node.b.value) // row, "int")
            out = binary("/", r, q) if node.op == "/" else binary("+", binary("*", binary("%", r, q), row), c)
        elif isinstance(node, Binary):
            a, b = rows(node.a), rows(node.b)
            out = node if a is node.a and b is node.b else Binary(node.op, a, b, node.dtype)
        elif isinstance(node, Unary):
            x = rows(node.x)
            out = node if x is node.x else Unary(node.op, x, node.dtype)
        elif isinstance(node, Cast):
            x = rows(node.x)
            out = node if x is node.x else Cast(x, node.dtype)
        elif isinstance(node, Select):
            cond, a, b = rows(node.cond), rows(node.a), rows(node.b)
            out = node if cond is node.cond and a is node.a and b is node.b else Select(cond, a, b)
        elif isinstance(node, Load):
            index = rows(node.index)
            out = node if index is node.index else Load(node.buffer, index)
        elif isinstance(node, Call):
            args = [rows(a) for a in node.args]
            out = node if all(a is b for a, b in zip(args, node.args)) else Call(node.helper, args)
        if out is not node and out.hint is None:
            out.hint = node.hint
        memo[id(node)] = out
        return out
    return Kernel(kernel.name, kernel.out, kernel.shape, i, rows(kernel.value))


class _ScalarThen(KernelWriter):
    def __init__(self, r: CStyleRenderer, kernel: Kernel, key: int, name: str, param: str) -> None:
        super().__init__(r, kernel, Schedule())
        self.key, self.name = key, name
        self.others = [b for b in kernel.inputs if b.key != key]
        self.params = {b.key: f"{param}{k}" for k, b in enumerate(self.others)}
        self.taken |= {"y", "r", "c", *self.params.values()}
        self.index_type = r.types[kernel.index.dtype]

    @property
    def signature(self) -> list[str]:
        return [self.r.param(b, self.params[b.key], True) for b in self.others]

    def expression(self, node: Expr) -> str:
        if isinstance(node, Load) and node.buffer.key == self.key:
            return "y"
        return super().expression(node)

    def function(self) -> str:
        value = self.emit(self.kernel.value)
        params = ", ".join(["float y", f"{self.index_type} i", "int r", "int c", *self.signature])
        return "\n".join([f"{_qualified(self.r)}float {self.name}({params}) {{", *self.levels[0].lines,
                          f"    return {value};", "}"]) + "\n"


class _VectorThen(VectorWriter):
    def __init__(self, r: CStyleRenderer, kernel: Kernel, key: int, lanes: int, name: str, param: str) -> None:
        super().__init__(r, kernel, lanes)
        self.key, self.name = key, name
        self.params = {b.key: f"{param}{k}" for k, b in enumerate(b for b in kernel.inputs if b.key != key)}

    def expression(self, node: Expr) -> str:
        if isinstance(node, Load) and node.buffer.key == self.key:
            return "y"
        return super().expression(node)

    def function(self, signature: list[str]) -> str:
        value = self.emit(self.kernel.value)
        vec = self.r.vector_type("float", self.lanes)
        params = ", ".join([f"{vec} y", f"{self.r.types[self.kernel.index.dtype]} i", "int r", "int c", *signature])
        return "\n".join([f"{_qualified(self.r)}{vec} {self.name}_v{self.lanes}({params}) {{", *self.lines,
                          f"    return {value};", "}"]) + "\n"


def _lane_by_lane(r: CStyleRenderer, n: int, args: str, name: str) -> str:
    """The statements of nn_then_vN (`name`_vN) that take its lanes one by one, through nn_then."""
    return "\n".join([
        f"    float lane[{n}];",
        f"    {r.vector_store('lane', '0', 'y', n)}",
        f"    for (int j = 0; j < {n}; ++j) lane[j] = {name}(lane[j], i + j, r, c + j{args});",
        f"    return {r.vector_load('lane', '0', n)};"])


def _qualified(r: CStyleRenderer) -> str:
    return f"{r.helper_qualifier} " if r.helper_qualifier else ""
