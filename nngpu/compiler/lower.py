"""Model → PlanSpec: shapes, fusion groups, generated kernel sources and a buffer plan.

The spec is backend-independent (it names a dialect, not a device): the runner compiles it on a
backend, and the NVRTC test renders it for CUDA without a GPU. Models whose shapes are not static
(unknown input extents, shapes that depend on input values, control flow) get no spec and run on
the host reference."""
from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field

import numpy as np

from .interpreter import GraphRunner
from ..hal.types import DataLocation, Operand, OperandLifeTime, OperandType, OperationType, Subgraph
from ..modelutil import fully_specified
from ..ops.dtypes import dtype_of, is_tensor
from ..ops.registry import OpContext
from . import templates
from .elementwise import expression
from .fusion import Group, fuse
from .memory_plan import plan_buffers
from .render import C_TYPES, DIALECTS, coordinates, index_expr

log = logging.getLogger("nngpu.compiler")

_CONTROL_FLOW = {OperationType.IF, OperationType.WHILE}


@dataclass
class KernelStep:
    name: str
    source: str
    global_size: int
    args: list[int]                  # operand indexes, in parameter order
    ops: list[int]                   # operation indexes it computes
    kind: str = "elementwise"


@dataclass
class LibraryStep:
    """A backend library call (GEMM): args are the A, B, C operand ids."""

    kind: str
    args: list[int]
    m: int
    n: int
    k: int


@dataclass
class HostStep:
    op: int                          # operation index, run by the reference kernel
    inputs: list[int]
    outputs: list[int]


@dataclass
class PlanSpec:
    dialect: str
    shapes: dict[int, tuple[int, ...]]        # every tensor operand's static shape
    steps: list[KernelStep | LibraryStep | HostStep]
    device_tensors: set[int]                  # operands that live in device buffers
    constants: list[int]                      # device tensors uploaded once at prepare
    operands: list                            # the model's operands, then derived constants
    derived: dict[int, np.ndarray] = field(default_factory=dict)  # e.g. filters in kernel layout
    aliases: dict[int, int] = field(default_factory=dict)  # reshaped operand → the buffer it views
    aliased_ops: list[int] = field(default_factory=list)   # reshapes that need no step
    buffer_of: dict[int, int] = field(default_factory=dict)   # operand → buffer slot
    slot_sizes: list[int] = field(default_factory=list)

    @property
    def kernels(self) -> list[KernelStep]:
        return [s for s in self.steps if isinstance(s, KernelStep)]

    def counts(self) -> tuple[int, int]:
        """(operations computed by device kernels, operations run on the host)."""
        device = sum(len(s.ops) for s in self.kernels) + len(self.aliased_ops)
        return device, sum(1 for s in self.steps if isinstance(s, HostStep))


def _dummy_inputs(runner: GraphRunner, fill: int) -> list[np.ndarray] | None:
    out = []
    for idx in runner.model.main.inputIndexes:
        operand = runner.model.main.operands[idx]
        if not fully_specified(operand.type, operand.dimensions):
            return None
        shape = tuple(operand.dimensions) if is_tensor(operand.type) else ()
        out.append(np.full(shape, fill, dtype=dtype_of(operand.type)))
    return out


def static_shapes(runner: GraphRunner) -> dict[int, tuple[int, ...]] | None:
    """Every operand's shape, when two dummy runs (zeros, ones) agree; else None."""
    traces = []
    for fill in (0, 1):
        inputs = _dummy_inputs(runner, fill)
        if inputs is None:
            return None
        try:
            with np.errstate(all="ignore"):
                traces.append(runner.trace(inputs))
        except Exception as e:  # values that only make sense at run time: no static plan
            log.info("no static shapes: dummy run failed: %s", e)
            return None
    a, b = traces
    shapes = {}
    for idx, v in a.items():
        if v is None:
            continue
        if b.get(idx) is None or b[idx].shape != v.shape:
            return None
        shapes[idx] = tuple(v.shape)
    return shapes


def _context(runner: GraphRunner, k: int, folded: dict[int, np.ndarray]) -> OpContext:
    graph = runner.model.main
    op = graph.operations[k]
    values = [folded[i] if i in folded else runner.constant(i) for i in op.inputs]
    return OpContext(op, graph.operands, values, runner.relaxed)


def fold_constants(runner: GraphRunner) -> dict[int, np.ndarray]:
    """Values of the operations whose inputs are all constants (or folded), computed once."""
    graph = runner.model.main
    known: dict[int, np.ndarray] = {}
    for k, op in enumerate(graph.operations):
        if op.type in _CONTROL_FLOW:
            continue
        values = [known[i] if i in known else runner.constant(i) for i in op.inputs]
        omitted = [graph.operands[i].lifetime == OperandLifeTime.NO_VALUE for i in op.inputs]
        if any(v is None and not o for v, o in zip(values, omitted)):
            continue
        try:
            with np.errstate(all="ignore"):
                outs = runner.run_operation(k, values)
        except Exception:  # fails at run time too: leave it to the execution to report
            continue
        known.update(zip(op.outputs, outs))
    return known


def _as_constant(o: Operand) -> Operand:
    return Operand(o.type, list(o.dimensions), o.numberOfConsumers, o.scale, o.zeroPoint,
                   OperandLifeTime.CONSTANT_COPY, DataLocation(), o.extraParams)


def lower(runner: GraphRunner, dialect: str, fuse_ops: bool = True) -> PlanSpec | None:
    """The plan of a prepared model for `dialect`, or None when it must run on the host."""
    graph = runner.model.main
    if any(op.type in _CONTROL_FLOW for op in graph.operations):
        return None
    shapes = static_shapes(runner)
    if shapes is None:
        return None
    d = DIALECTS[dialect]
    folded = fold_constants(runner)
    skip = {k for k, op in enumerate(graph.operations) if all(o in folded for o in op.outputs)}
    aliases, aliased_ops = _aliases(graph, skip)
    skip |= set(aliased_ops)
    exprs = {}
    heavy = {}
    for k in range(len(graph.operations)):
        if k in skip:
            continue
        ctx = _context(runner, k, folded)
        e = expression(ctx)
        if e is not None and all(graph.operands[o].type in C_TYPES for o in graph.operations[k].outputs):
            exprs[k] = e
            continue
        t = templates.match(ctx, shapes)
        if t is not None:
            heavy[k] = t
    groups = fuse(graph, exprs, heavy, shapes, fuse_ops, skip)
    steps: list[KernelStep | LibraryStep | HostStep] = []
    device_tensors: set[int] = set()
    # Folded values are constants from here on: uploaded once, never sharing a buffer.
    operands = [_as_constant(o) if i in folded else o for i, o in enumerate(graph.operands)]
    derived: dict[int, np.ndarray] = dict(folded)
    for t in heavy.values():
        _resolve_keys(t, operands, derived, shapes)
    view = Subgraph(operands, graph.operations, graph.inputIndexes, graph.outputIndexes)
    for item in groups:
        if isinstance(item, Group):
            head = heavy[item.head] if item.head is not None else None
            group_steps = [_render_before(d, b) for b in head.before] if head else []
            group_steps.append(_render_group(d, view, item, exprs, heavy, shapes))
            for step in group_steps:
                steps.append(step)
                device_tensors.update(step.args)
        else:
            op = graph.operations[item]
            steps.append(HostStep(item, list(op.inputs), list(op.outputs)))
    device_tensors |= {aliases[i] for i in device_tensors if i in aliases}  # the buffer an alias views
    constants = sorted(i for i in device_tensors
                       if operands[i].lifetime in (OperandLifeTime.CONSTANT_COPY, OperandLifeTime.CONSTANT_REFERENCE))
    spec = PlanSpec(dialect, shapes, steps, device_tensors, constants, operands, derived, aliases=aliases,
                    aliased_ops=aliased_ops)
    plan_buffers(spec, view)
    return spec


_VIEWS = {OperationType.RESHAPE, OperationType.SQUEEZE, OperationType.EXPAND_DIMS}


def _aliases(graph: Subgraph, taken: set[int]) -> tuple[dict[int, int], list[int]]:
    """RESHAPE / SQUEEZE / EXPAND_DIMS outputs that can share their input's buffer (the bytes are
    the same): operand → the operand whose buffer it views, and the ops that need no step."""
    aliases: dict[int, int] = {}
    ops = []
    outputs = set(graph.outputIndexes)
    for k, op in enumerate(graph.operations):
        if k in taken or op.type not in _VIEWS:
            continue
        src, out = op.inputs[0], op.outputs[0]
        if out in outputs or graph.operands[src].type != graph.operands[out].type:
            continue
        aliases[out] = aliases.get(src, src)
        ops.append(k)
    return aliases, ops


def _resolve_keys(t, operands: list, derived: dict, shapes: dict) -> None:
    """Give a template's derived constants and temporaries (negative keys) operand ids of their
    own, after the model's operands, and rewrite the keys wherever the template uses them."""
    ids: dict[int, int] = {}
    for key, (source, value) in t.derived.items():
        ids[key] = len(operands)
        src = operands[source]
        operands.append(Operand(src.type, list(value.shape), 0, src.scale, src.zeroPoint,
                                OperandLifeTime.CONSTANT_COPY, DataLocation(), src.extraParams))
        derived[ids[key]] = np.ascontiguousarray(value.astype(dtype_of(src.type)))
        shapes[ids[key]] = tuple(value.shape)
    for key, shape in t.temps.items():
        ids[key] = len(operands)
        operands.append(Operand(OperandType.TENSOR_FLOAT32, list(shape), 1, 0.0, 0, OperandLifeTime.TEMPORARY_VARIABLE))
        shapes[ids[key]] = tuple(shape)
    fix = lambda i: ids.get(i, i)  # noqa: E731
    t.tensor_inputs = [fix(i) for i in t.tensor_inputs]
    for b in t.before:
        if isinstance(b, templates.Gemm):
            b.a, b.b, b.c = fix(b.a), fix(b.b), fix(b.c)
        else:
            b.inputs, b.out = [fix(i) for i in b.inputs], fix(b.out)


def _render_before(d, b) -> KernelStep | LibraryStep:
    """A step that fills a template's temporary: a GEMM call or a generated fill kernel."""
    if isinstance(b, templates.Gemm):
        return LibraryStep("gemm", [b.a, b.b, b.c], b.m, b.n, b.k)
    names = [f"in{k}" for k in range(len(b.inputs))]
    sig = [d.param("float", n, True) for n in names] + [d.param("float", "out", False)]
    lines = [d.prelude, f"{d.kernel} {b.name}({', '.join(sig)}) {{", f"    long i = {d.gid};",
             f"    if (i >= {b.size}) return;"]
    lines += ["    " + s for s in b.body(names, d)]
    lines.append("    " + d.store("float", "out", "i", "acc"))
    lines.append("}")
    return KernelStep(b.name, "\n".join(lines) + "\n", b.size, [*b.inputs, b.out], [], "fill")


def _render_group(d, graph, group: Group, exprs, heavy, shapes) -> KernelStep:
    """One kernel for a fusion group: an optional heavy head (conv, pool, ...) computing the
    first value, then the elementwise chain applied to it, stored once."""
    out_idx = group.output
    out_shape = shapes[out_idx]
    params: list[int] = []           # external tensors read, in parameter order
    names: dict[int, str] = {}

    def param(operand_index: int) -> str:
        if operand_index not in names:
            names[operand_index] = f"in{len(params)}"
            params.append(operand_index)
        return names[operand_index]

    body: list[str] = []
    values: dict[int, str] = {}      # operand → C variable holding its value at this element
    head = None
    if group.head is not None:
        head = heavy[group.head]
        op = graph.operations[group.head]
        pnames = [param(i) for i in head.tensor_inputs]
        body.extend(head.body(pnames, d))
        values[op.outputs[0]] = "acc"
    for n, k in enumerate(group.ops):
        op = graph.operations[k]
        positions, fn = exprs[k]
        args = []
        for p in positions:
            idx = op.inputs[p]
            if idx in values:
                args.append(values[idx])
            else:
                ctype = C_TYPES[graph.operands[idx].type]
                src = index_expr(shapes[idx], out_shape)
                args.append(d.load(ctype, param(idx), src))
        var = f"t{n}"
        body.append(f"{d.compute_type(C_TYPES[graph.operands[op.outputs[0]].type])} {var} = {fn(args)};")
        values[op.outputs[0]] = var
    out_ctype = C_TYPES[graph.operands[out_idx].type]
    name = f"nn_{'_'.join(graph.operations[k].type.name.lower() for k in group.all_ops)[:60]}_{group.all_ops[0]}"
    sig = [d.param(C_TYPES[graph.operands[i].type], names[i], True) for i in params]
    sig.append(d.param(out_ctype, "out", False))
    size = int(np.prod(out_shape)) if out_shape else 1
    lines = [d.prelude, templates.helpers(d), f"{d.kernel} {name}({', '.join(sig)}) {{",
             f"    long i = {d.gid};", f"    if (i >= {size}) return;"]
    if head is not None or any(re.search(r"\bc\d+\b", b) for b in body):
        lines += ["    " + s for s in coordinates(out_shape)]  # only when an index needs them
    lines += ["    " + s for s in body]
    lines.append("    " + d.store(out_ctype, "out", "i", values[out_idx]))
    lines.append("}")
    return KernelStep(name, "\n".join(lines) + "\n", size, params + [out_idx], group.all_ops,
                      "fused" if len(group.all_ops) > 1 else (head.kind if head else "elementwise"))
