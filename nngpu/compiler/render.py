"""One C renderer for the kernel IR; each backend subclasses it for its dialect (backends/).

The base class walks a kernel's expression DAG and writes C: a node used more than once (or
named by a hint) becomes a temporary, computed once in the innermost scope that needs it; a
Reduce becomes a loop nest; helper functions and a dialect's preludes are emitted only when the
kernel uses them. Dialects differ only in qualifiers, the thread index, the 64-bit type and how
float16 is loaded and stored."""
from __future__ import annotations

import math
import string
from dataclasses import dataclass, field

from ..ir.expr import (Binary, Buffer, Call, Cast, Const, Expr, Helper, Load, Loop, Reduce, ReduceOut, Select,
                       Unary, Var, all_children, bound_by, use_counts, walk)
from ..ir.kernel import Kernel
from ..ir.narrow import INT_MAX
from ..ir.schedule import Schedule, constant_bounds, constant_prefix
from .render_vector import VectorWriter

_INFIX = {"+", "-", "*", "/", "%", "<", "<=", ">", ">=", "==", "!=", "&&", "||", "&", "|", "^", "<<", ">>"}


def float_literal(x: float) -> str:
    if math.isnan(x):
        return "(0.0f / 0.0f)"
    if math.isinf(x):
        return "(1.0f / 0.0f)" if x > 0 else "(-1.0f / 0.0f)"
    text = repr(float(x))
    literal = f"{text}f" if ("e" in text or "." in text) else f"{text}.0f"
    return f"({literal})" if x < 0 else literal


def finite_or_zero(comp: str) -> str:
    """A compensated sum's correction, dropped once it is not finite: past an infinity (or an
    overflow) it would be inf - inf, and turn the sum's inf into NaN; the reference's sum keeps
    the inf (and a NaN is in the sum itself)."""
    return f"((fabs({comp}) <= 3.402823466e+38f) ? {comp} : 0.0f)"


class CStyleRenderer:
    kernel_prefix = ""
    buffer_qualifier = ""
    restrict = "restrict"
    gid = ""
    helper_qualifier = ""
    long_type = "long"
    long_suffix = "L"
    storage_types = {"float": "float", "half": "half", "int": "int", "bool8": "uchar", "u8": "uchar",
                     "i8": "char", "i16": "short", "u16": "ushort"}

    # a work-group's index and a thread's index in it, its barrier and its local arrays: for the
    # schedules that give a reduction a work-group (None: the dialect has none)
    group_id: str | None = None
    local_id: str | None = None
    barrier: str | None = None
    local_qualifier: str | None = None
    # written before a reduction's loop of a constant trip count up to `unroll_max` (None: none)
    unroll: str | None = None
    unroll_max = 16

    @property
    def types(self) -> dict[str, str]:
        return {"bool": "int", "int": "int", "long": self.long_type, "float": "float"}

    # ---- dialect hooks --------------------------------------------------------------------
    def prelude(self, storages: set[str]) -> list[str]:
        return []

    def load(self, ptr: str, storage: str, index: str) -> str:
        if storage == "bool8":
            return f"({ptr}[{index}] != 0)"
        if storage in ("u8", "i8", "i16", "u16"):
            return f"((int){ptr}[{index}])"
        return f"{ptr}[{index}]"

    def store(self, ptr: str, storage: str, index: str, value: str) -> str:
        if storage == "bool8":
            return f"{ptr}[{index}] = (uchar)(({value}) ? 1 : 0);"
        if storage in ("u8", "i8", "i16", "u16"):
            return f"{ptr}[{index}] = ({self.storage_types[storage]})({value});"
        return f"{ptr}[{index}] = {value};"

    # vectors of `n` lanes, for schedules with a vector width (a dialect that has them)
    def vector_type(self, kind: str, n: int) -> str:
        raise NotImplementedError(f"{type(self).__name__} writes no vectors")

    def vector_load(self, ptr: str, index: str, n: int) -> str:
        raise NotImplementedError(f"{type(self).__name__} writes no vectors")

    def vector_store(self, ptr: str, index: str, value: str, n: int) -> str:
        raise NotImplementedError(f"{type(self).__name__} writes no vectors")

    def vector_select(self, cond: str, a: str, b: str) -> str:
        raise NotImplementedError(f"{type(self).__name__} writes no vectors")

    def broadcast(self, scalar: str, kind: str, n: int) -> str:
        raise NotImplementedError(f"{type(self).__name__} writes no vectors")

    def param(self, buffer: Buffer, name: str, const: bool) -> str:
        q = "const " if const else ""
        return f"{self.buffer_qualifier}{q}{self.storage_types[buffer.storage]}* {self.restrict} {name}"

    # ---- the walk ---------------------------------------------------------------------------
    def literal(self, c: Const) -> str:
        if c.dtype == "float":
            return float_literal(c.value)
        if c.dtype == "bool":
            return "1" if c.value else "0"
        v = int(c.value)
        if c.dtype == "long":
            return f"{v}{self.long_suffix}" if v >= 0 else f"({v}{self.long_suffix})"
        if v == -(1 << 31):
            return "(-2147483647 - 1)"
        return str(v) if v >= 0 else f"({v})"

    def kernel_head(self, declared: int | None) -> str:
        """What comes before a kernel's name: the qualifiers, and the work-group size declared to
        the compiler where the schedule declares it (the dialect's own attribute)."""
        return self.kernel_prefix

    def frame(self, kernel: Kernel, params: list[str], schedule: Schedule) -> tuple[list[str], list[str]]:
        """The lines before and after a kernel's body: thread i computes output i, or with
        several outputs a thread, outputs i, i + grid, ... (the body one level deeper)."""
        declared = schedule.group if schedule.declare_group else None
        head = [f"{self.kernel_head(declared)} {kernel.name}({', '.join(params)}) {{"]
        index = self.types[kernel.index.dtype]
        if schedule.per_thread == 1:
            return head + [f"    {index} i = {self.gid};", f"    if (i >= {kernel.size}) return;"], ["}"]
        stride = schedule.grid(kernel.size).total
        if kernel.size + stride > INT_MAX:  # the last increment must not overflow
            index = self.long_type
        return head + [f"    for ({index} i = {self.gid}; i < {kernel.size}; i += {stride}) {{"], ["    }", "}"]

    def render(self, kernel: Kernel, schedule: Schedule | None = None) -> str:
        return self.render_unit([kernel], schedule)

    def render_unit(self, kernels: list[Kernel], schedule: Schedule | None = None) -> str:
        """One translation unit: every kernel, with the preludes and helpers they use once."""
        schedule = schedule or Schedule()
        head: list[str] = []
        bodies = []
        for kernel in kernels:
            lanes = schedule.lanes(kernel)
            writer = VectorWriter(self, kernel, lanes) if lanes > 1 else KernelWriter(self, kernel, schedule)
            body = writer.body()
            for part in [*self.prelude(writer.storages), *self.render_helpers(writer.helpers)]:
                if part not in head:
                    head.append(part)
            bodies.append(body)
        return "\n".join(head + bodies)

    def render_helpers(self, helpers: list[Helper]) -> list[str]:
        words = {"i64": self.long_type, "u64": f"unsigned {self.long_type}", "L": self.long_suffix,
                 "UL": f"U{self.long_suffix}", "qualifier": self.helper_qualifier}
        return [string.Template(h.source).substitute(words).strip("\n") for h in helpers]


def _helpers_in_order(nodes: list[Expr]) -> list[Helper]:
    order: list[Helper] = []

    def add(h: Helper) -> None:
        if h in order:
            return
        for dep in h.needs:
            add(dep)
        order.append(h)

    for node in nodes:
        if isinstance(node, Call):
            add(node.helper)
    return order


@dataclass(eq=False)
class _Level:
    """A scope of the kernel being written: the kernel body, a loop body or a select branch."""

    lines: list[str]              # where its statements go
    depth: int
    bound: set[int]               # the variables (ids) it binds
    barrier: bool = False         # a select branch: nothing in it is computed outside it
    at: int | None = None         # while a child loop is open: where hoisted statements go
    memo: dict[int, str] = field(default_factory=dict)


class KernelWriter:
    """Writes one kernel. Every node is computed once, in the outermost scope where what it
    uses is bound (loop-invariant values are hoisted out of loops), but never outside the select
    branch that guards it."""

    def __init__(self, r: CStyleRenderer, kernel: Kernel, schedule: Schedule) -> None:
        self.r, self.kernel, self.schedule = r, kernel, schedule
        self.nodes = walk(kernel.value)
        self.refs = use_counts(self.nodes)
        self.deps: dict[int, frozenset[int]] = {}
        self._add_uses(self.nodes)
        self.params = {b.key: f"in{k}" for k, b in enumerate(kernel.inputs)}
        self.names: dict[int, str] = {id(kernel.index): "i"}
        self.taken = {"i", "out", *self.params.values()}
        # with a work-group per output, its threads share this reduction (ir/schedule.py)
        self.block = schedule.block_reduce(kernel)
        looped = schedule.per_thread > 1 and self.block is None
        self.levels = [_Level([], 2 if looped else 1, {id(kernel.index)})]
        self.open: list[_Level] = list(self.levels)   # every level not closed, hoisting included
        if self.block is not None:
            self.lid, self.part = self.fresh("lid"), self.fresh("part")
            self.comp = self.fresh("partc") if self.block.accs[0].kahan else None

    @property
    def storages(self) -> set[str]:
        return {b.storage for b in self.kernel.inputs} | {self.kernel.out.storage}

    @property
    def helpers(self) -> list[Helper]:
        return _helpers_in_order(self.nodes)

    def body(self) -> str:
        """The kernel function (its preludes and helpers are the caller's)."""
        k, r = self.kernel, self.r
        value = self.emit(k.value)
        store = r.store("out", k.out.storage, "i", value)
        self.line(store if self.block is None else f"if ({self.lid} == 0) {store}")
        sig = [r.param(b, self.params[b.key], True) for b in k.inputs] + [r.param(k.out, "out", False)]
        head, tail = r.frame(k, sig, self.schedule) if self.block is None else self.block_frame(sig)
        return "\n".join(head + self.levels[0].lines + tail) + "\n"

    def block_frame(self, params: list[str]) -> tuple[list[str], list[str]]:
        """A work-group per output: group i computes output i, its threads' parts of the
        reduction meeting in local arrays (the grid has exactly one group per output)."""
        k, r, group = self.kernel, self.r, self.schedule.reduce_group
        t = r.types[self.block.accs[0].init.dtype]
        declared = group if self.schedule.declare_group else None
        head = [f"{r.kernel_head(declared)} {k.name}({', '.join(params)}) {{",
                f"    {r.local_qualifier} {t} {self.part}[{group}];"]
        if self.comp:
            head.append(f"    {r.local_qualifier} {t} {self.comp}[{group}];")
        head += [f"    {r.types[k.index.dtype]} i = {r.group_id};", f"    int {self.lid} = {r.local_id};"]
        return head, ["}"]

    def enter(self, loops: list[Loop]) -> None:
        """A level inside loops whose counters are named: their lets and guards, in order."""
        parent = self.levels[-1]
        bound = {id(loop.var) for loop in loops} | {id(var) for loop in loops for var, _ in loop.lets}
        level = _Level(parent.lines, parent.depth + 1, bound)
        self.levels.append(level)
        self.open.append(level)
        types = self.r.types
        for loop in loops:
            for var, expr in loop.lets:
                name = self.fresh(var.name)
                self.line(f"{types[var.dtype]} {name} = {self.emit(expr)};")
                self.names[id(var)] = name
            for guard in loop.guards:
                self.line(f"if (!{self.emit(guard)}) continue;")

    def open_shared(self, loops: list[Loop], bounds: list[tuple[int, int]]) -> _Level:
        """The loops a work-group shares, as one flattened range that each thread walks in steps
        of the group: each counter is recovered from the flat index. Returns the parent level."""
        parent, types = self.levels[-1], self.r.types
        parent.at = len(parent.lines)
        extents = [stop - start for start, stop in bounds]
        f = self.fresh("f")
        inner = math.prod(extents)
        self.line(f"for (int {f} = {self.lid}; {f} < {inner}; {f} += {self.schedule.reduce_group}) {{")
        for k, (loop, (start, _)) in enumerate(zip(loops, bounds)):
            inner //= extents[k]
            div = f if inner == 1 else f"{f} / {inner}"
            index = div if k == 0 else f"{div} % {extents[k]}" if inner == 1 else f"({div}) % {extents[k]}"
            v = self.fresh(loop.var.name)
            self.names[id(loop.var)] = v
            parent.lines.append("    " * (parent.depth + 1) + f"{types[loop.var.dtype]} {v} = {start} + {index};")
        self.enter(loops)
        return parent

    def emit_tree(self, red: Reduce, acc: str, comp: str | None) -> str:
        """After a work-group's threads folded their parts of `red` into `acc` (Kahan: with
        `comp`): the parts combined by halving, each step behind the group's barrier; the
        group's total, which every thread reads."""
        r, part, lid, group = self.r, self.part, self.lid, self.schedule.reduce_group
        a = red.accs[0]
        t = r.types[a.init.dtype]
        self.line(f"{part}[{lid}] = {acc};" + (f" {self.comp}[{lid}] = {comp};" if comp else ""))
        self.line(r.barrier)
        half = self.fresh("width")   # not "half": a type in OpenCL C
        self.line(f"for (int {half} = {group // 2}; {half} > 0; {half} >>= 1) {{")
        self.line(f"    if ({lid} < {half}) {{")
        if comp:  # (s, c) pairs: s + e is x + y exactly (TwoSum), and the true sum is s - c
            x, y, s, d, e = (self.fresh(n) for n in ("x", "y", "s", "d", "e"))
            pc = self.comp
            self.line(f"        {t} {x} = {part}[{lid}], {y} = {part}[{lid} + {half}];")
            self.line(f"        {t} {s} = {x} + {y}, {d} = {s} - {x};")
            self.line(f"        {t} {e} = ({x} - ({s} - {d})) + ({y} - {d});")
            c = self.fresh("c")
            self.line(f"        {t} {c} = ({pc}[{lid}] + {pc}[{lid} + {half}]) - {e};")
            self.line(f"        {part}[{lid}] = {s}; {pc}[{lid}] = {finite_or_zero(c)};")
        else:
            update = a.combine(_named(f"{part}[{lid}]", a.init.dtype), _named(f"{part}[{lid} + {half}]", a.init.dtype))
            self.line(f"        {part}[{lid}] = {self.emit(update)};")
        self.line("    }")
        self.line(f"    {r.barrier}")
        self.line("}")
        total = self.fresh("total")
        self.line(f"{t} {total} = {part}[0]" + (f" - {self.comp}[0];" if comp else ";"))
        return total

    def line(self, text: str) -> None:
        level = self.levels[-1]
        level.lines.append("    " * level.depth + text)

    def fresh(self, base: str) -> str:
        name, n = base, 1
        while name in self.taken:
            name, n = f"{base}{n}", n + 1
        self.taken.add(name)
        return name

    def lookup(self, node: Expr) -> str | None:
        for level in reversed(self.levels):
            if id(node) in level.memo:
                return level.memo[id(node)]
        return None

    # ---- placement --------------------------------------------------------------------------
    def _add_uses(self, nodes: list[Expr]) -> None:
        """Record the variables each node depends on (`nodes` children first)."""
        for n in nodes:
            if id(n) in self.deps:
                continue
            used = frozenset({id(n)}) if isinstance(n, Var) else frozenset().union(
                *(self.deps[id(c)] for c in all_children(n)))
            self.deps[id(n)] = used - bound_by(n) if isinstance(n, Reduce) else used

    def uses(self, node: Expr) -> frozenset[int]:
        """The variables (ids) a node's value depends on."""
        if id(node) not in self.deps:  # built while rendering (an accumulator update)
            self._add_uses(walk(node))
        return self.deps[id(node)]

    def home(self, node: Expr) -> int:
        """The outermost level the node can be computed at."""
        need, bound = self.uses(node), set()
        floor = max((k for k, lv in enumerate(self.levels) if lv.barrier), default=0)
        for k, level in enumerate(self.levels):
            bound |= level.bound
            if need <= bound:
                return max(k, floor)
        return len(self.levels) - 1

    def emit_at(self, k: int, node: Expr) -> str:
        """Emit `node` at level k, before the loop that the current level is inside."""
        saved, target = self.levels, self.levels[k]
        stand_in = _Level([], target.depth, target.bound, target.barrier, None, target.memo)
        self.levels = saved[:k] + [stand_in]
        self.open.append(stand_in)
        try:
            text = self.emit(node)
        finally:
            self.levels = saved
            self.open.remove(stand_in)
        at = target.at
        target.lines[at:at] = stand_in.lines
        for level in self.open:  # insertion points at or after this one move down
            if level.lines is target.lines and level.at is not None and level.at >= at:
                level.at += len(stand_in.lines)
        return text

    # ---- expressions ------------------------------------------------------------------------
    def emit(self, node: Expr) -> str:
        if isinstance(node, Const):
            return self.r.literal(node)
        if isinstance(node, Var):
            return self.names.get(id(node), node.name)
        found = self.lookup(node)
        if found is not None:
            return found
        home = self.home(node)
        if home < len(self.levels) - 1:
            return self.emit_at(home, node)
        if isinstance(node, (Reduce, ReduceOut)):
            self.emit_reduce(node.reduce if isinstance(node, ReduceOut) else node)
            return self.lookup(node)
        text = self.emit_select(node) if isinstance(node, Select) else self.expression(node)
        if self.lookup(node) is None and (node.hint or self.refs.get(id(node), 0) > 1):
            return self.bind(node, text)
        return text

    def bind(self, node: Expr, text: str | None) -> str:
        """A temporary holding node's value (declared only when `text` is None)."""
        name = self.fresh(node.hint or "t")
        ctype = self.r.types[node.dtype]
        self.line(f"{ctype} {name};" if text is None else f"{ctype} {name} = {text};")
        self.levels[-1].memo[id(node)] = name
        return name

    def expression(self, node: Expr) -> str:
        r = self.r
        if isinstance(node, Load):
            return r.load(self.params[node.buffer.key], node.buffer.storage, self.emit(node.index))
        if isinstance(node, Binary):
            a, b = self.emit(node.a), self.emit(node.b)
            return f"({a} {node.op} {b})" if node.op in _INFIX else f"{node.op}({a}, {b})"
        if isinstance(node, Unary):
            x = self.emit(node.x)
            return f"({node.op}{x})" if node.op in ("-", "!") else f"{node.op}({x})"
        if isinstance(node, Cast):
            return f"(({r.types[node.dtype]}){self.emit(node.x)})"
        if isinstance(node, Call):
            return f"{node.helper.name}({', '.join(self.emit(a) for a in node.args)})"
        raise TypeError(f"cannot render {type(node).__name__}")

    def branch(self, node: Expr) -> tuple[str, list[str]]:
        """A select branch rendered in a level of its own: (its value, the statements it needs)."""
        level = _Level([], self.levels[-1].depth + 1, set(), barrier=True)
        self.levels.append(level)
        self.open.append(level)
        try:
            return self.emit(node), level.lines
        finally:
            self.levels.pop()
            self.open.remove(level)

    def emit_select(self, node: Select) -> str:
        """`c ? a : b`; as if / else when a branch needs statements, so that what a branch
        computes (a load that is only valid there) is never evaluated for the other."""
        cond = self.emit(node.cond)
        (a, a_lines), (b, b_lines) = self.branch(node.a), self.branch(node.b)
        if not a_lines and not b_lines:
            return f"({cond} ? {a} : {b})"
        name = self.bind(node, None)
        self.line(f"if ({cond}) {{")
        self.levels[-1].lines.extend(a_lines)
        self.line(f"    {name} = {a};")
        self.line("} else {")
        self.levels[-1].lines.extend(b_lines)
        self.line(f"    {name} = {b};")
        self.line("}")
        return name

    def emit_reduce(self, red: Reduce) -> None:
        types = self.r.types
        accs = []
        for acc in red.accs:
            name = self.fresh("acc")
            self.line(f"{types[acc.init.dtype]} {name} = {self.emit(acc.init)};")
            comp = self.fresh("comp") if acc.kahan else None
            if comp:
                self.line(f"{types[acc.init.dtype]} {comp} = 0.0f;")
            accs.append((name, comp))
        outer = self.levels[-1]
        outer.memo[id(red)] = accs[0][0]
        for k, out in red._outs.items():
            outer.memo[id(out)] = accs[k][0]
        opened = []
        shared = red is self.block
        flat = constant_prefix(red) if shared else []
        if flat:
            opened.append(self.open_shared(red.loops[:len(flat)], flat))
        for loop in red.loops[len(flat):]:
            start = self.emit(loop.start) if isinstance(loop.start, Expr) else str(loop.start)
            stop = self.emit(loop.stop) if isinstance(loop.stop, Expr) else str(loop.stop)
            v = self.fresh(loop.var.name)
            self.names[id(loop.var)] = v
            parent = self.levels[-1]
            parent.at = len(parent.lines)
            bounds = constant_bounds(loop)
            short = bounds is not None and bounds[1] - bounds[0] <= self.r.unroll_max
            hint = f"{self.r.unroll} " if self.r.unroll and short else ""
            self.line(f"{hint}for ({types[loop.var.dtype]} {v} = {start}; {v} < {stop}; ++{v}) {{")
            self.enter([loop])
            opened.append(parent)
        for acc, (name, comp) in zip(red.accs, accs):
            value = self.emit(acc.body)
            t = types[acc.init.dtype]
            if comp:
                y, s = self.fresh("y"), self.fresh("s")
                self.line(f"{{ {t} {y} = {value} - {comp}; {t} {s} = {name} + {y}; "
                          f"{comp} = ({s} - {name}) - {y}; {comp} = {finite_or_zero(comp)}; {name} = {s}; }}")
                continue
            if not value.isidentifier():
                v = self.fresh("v")
                self.line(f"{types[acc.body.dtype]} {v} = {value};")
                value = v
            update = acc.combine(_named(name, acc.init.dtype), _named(value, acc.body.dtype))
            self.line(f"{name} = {self.emit(update)};")
        for parent in reversed(opened):
            self.open.remove(self.levels.pop())
            self.line("}")
            parent.at = None
        if shared:
            outer.memo[id(red)] = self.emit_tree(red, *accs[0])


def _named(name: str, dtype: str) -> Var:
    return Var(name, dtype)
