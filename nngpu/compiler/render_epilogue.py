"""An elementwise kernel written as a C function that another kernel calls as it stores: a GEMM
folding in its one consumer (compiler/gemm_fold.py, kernels/gemm.cl THEN). The consumer's
loads of the producer's element become the function's argument `y`, its index the argument
`i`; its other buffers follow, in the kernel's parameter order. Written by the renderer that
would have written the kernel alone: the scalar writer as `nn_then(y, i, ...)` and, for a target
with vectors, `nn_then_v4/8/16(y, i, ...)` on a vector of the neighbouring elements i .. i + n - 1
- the vector writer where the kernel would run in vectors of n lanes and n divides the row the
caller stores (so its row loads stay within a row), else each lane by the scalar function."""
from __future__ import annotations

from ..ir.expr import Expr, Load, walk
from ..ir.kernel import Kernel
from ..ir.schedule import Schedule
from ..ir.vectorize import vector_width
from .render import CStyleRenderer, KernelWriter
from .render_vector import VectorWriter

LANES = (4, 8, 16)   # the vectors gemm.cl's CPU kernels store


def reads_only_own_element(kernel: Kernel, key: int) -> bool:
    """Whether every load of buffer `key` in the kernel reads the kernel's own element."""
    loads = [n for n in walk(kernel.value) if isinstance(n, Load) and n.buffer.key == key]
    return bool(loads) and all(n.index is kernel.index for n in loads)


def render_then(r: CStyleRenderer, kernel: Kernel, key: int, row: int, vectors: bool) -> str:
    """The C source of the kernel as a function of buffer `key`'s element: #defines THEN,
    THEN_PARAMS and THEN_ARGS (the other buffers, each with a leading comma), the preludes and
    helpers it uses, `nn_then` and, with `vectors`, `nn_then_v4`, `_v8` and `_v16`. `row`: the
    length of the rows the caller stores vectors within."""
    scalar = _ScalarThen(r, kernel, key)
    text = scalar.function()
    head = [*r.prelude(scalar.storages), *r.render_helpers(scalar.helpers)]
    params = "".join(f", {p}" for p in scalar.signature)
    args = "".join(f", {scalar.params[b.key]}" for b in scalar.others)
    lines = ["#define THEN", f"#define THEN_PARAMS {params}", f"#define THEN_ARGS {args}", *head, text]
    for n in LANES if vectors else ():
        if vector_width(kernel, n) == n and row % n == 0:
            lines.append(_VectorThen(r, kernel, key, n).function(scalar.signature))
        else:
            lines.append(_lane_by_lane(r, n, scalar.index_type, params, args))
    return "\n".join(lines) + "\n"


class _ScalarThen(KernelWriter):
    def __init__(self, r: CStyleRenderer, kernel: Kernel, key: int) -> None:
        super().__init__(r, kernel, Schedule())
        self.key = key
        self.others = [b for b in kernel.inputs if b.key != key]
        self.params = {b.key: f"in{k}" for k, b in enumerate(self.others)}
        self.taken |= {"y", *self.params.values()}
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
        params = ", ".join(["float y", f"{self.index_type} i", *self.signature])
        return "\n".join([f"{_qualified(self.r)}float nn_then({params}) {{", *self.levels[0].lines,
                          f"    return {value};", "}"]) + "\n"


class _VectorThen(VectorWriter):
    def __init__(self, r: CStyleRenderer, kernel: Kernel, key: int, lanes: int) -> None:
        super().__init__(r, kernel, lanes)
        self.key = key
        self.params = {b.key: f"in{k}" for k, b in enumerate(b for b in kernel.inputs if b.key != key)}

    def expression(self, node: Expr) -> str:
        if isinstance(node, Load) and node.buffer.key == self.key:
            return "y"
        return super().expression(node)

    def function(self, signature: list[str]) -> str:
        value = self.emit(self.kernel.value)
        vec = self.r.vector_type("float", self.lanes)
        params = ", ".join([f"{vec} y", f"{self.r.types[self.kernel.index.dtype]} i", *signature])
        return "\n".join([f"{_qualified(self.r)}{vec} nn_then_v{self.lanes}({params}) {{", *self.lines,
                          f"    return {value};", "}"]) + "\n"


def _lane_by_lane(r: CStyleRenderer, n: int, index: str, params: str, args: str) -> str:
    vec = r.vector_type("float", n)
    return "\n".join([
        f"{_qualified(r)}{vec} nn_then_v{n}({vec} y, {index} i{params}) {{",
        f"    float lane[{n}];",
        f"    {r.vector_store('lane', '0', 'y', n)}",
        f"    for (int j = 0; j < {n}; ++j) lane[j] = nn_then(lane[j], i + j{args});",
        f"    return {r.vector_load('lane', '0', n)};",
        "}"]) + "\n"


def _qualified(r: CStyleRenderer) -> str:
    return f"{r.helper_qualifier} " if r.helper_qualifier else ""
