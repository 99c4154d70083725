"""One segment of a model → a SegmentSpec: steps (kernels, GEMM calls, host operations and the
transfers between them), the tensors they use and their buffer plan.

Shapes come from infer.py. Each operation that is not folded is placed on the device when one
of its spec's device implementations builds, else on the host reference. fusion.py decides
which outputs stay inside their consumer's kernel; the rest are stored, one kernel each.
The spec is lowered for a target (compiler/target.py), not a device: the plan compiles it on a
backend, and the NVRTC test and `nngpu kernels` render it without one."""
from __future__ import annotations

import logging
import numpy as np

from ..backends.base import Backend, ProgramSet
from ..hal.types import Subgraph
from ..ir.expr import Buffer
from ..ir.kernel import store
from ..ir.narrow import narrow_indices
from ..ir.storage import STORAGE_DTYPE, storage_of
from ..ir.tensor import BufferTensor, Compute, Stored, Tensor
from ..ops.lib.dtypes import is_tensor
from ..ops.node import NeedsValue, OpNode
from ..ops.registry import Alias, OpError
from ..runtime.interpreter import GraphRunner
from ..runtime.plan import Plan
from .fusion import Result, View, inlined_outputs, results_of
from .gemm_fold import fold_column_scales, fold_elementwise_consumers, fold_residual_adds
from .infer import Inference, infer, initial_known
from .library import element_types, has_template, specialise
from .memory_plan import plan_slots
from .pool_fold import fold_sibling_pools
from .relaxed_storage import float16_temporaries
from .squeeze_excite import fold_squeeze_excite
from .steps import (NO_DATA, GemmStep, HostStep, KernelStep, Known, SegmentSpec, Step, Stop, TemplateStep, TensorInfo,
                    Transfer)
from .target import Target

log = logging.getLogger("nngpu.compiler")

PACK_BELOW_K, PACK_FROM_M = 512, 8  # a constant B given transposed is packed for such GEMMs (_Builder.gemm)


class _Builder:
    """Creates the tensors and steps device implementations ask for (OpNode.constant, ...)."""

    def __init__(self, lowering: "_Lowering", op: int) -> None:
        self.low = lowering
        self.op = op                  # the operation whose implementation asks
        self.steps: list[Step] = []
        self.constants: dict[int, np.ndarray] = {}
        self.temps: dict[int, TensorInfo] = {}

    def constant(self, value: np.ndarray, operand_type: int) -> BufferTensor:
        key = self.low.new_id()
        storage = storage_of(operand_type)
        self.constants[key] = value.astype(STORAGE_DTYPE[storage], copy=False)
        self.temps[key] = TensorInfo(tuple(value.shape), storage, pinned=True)
        return BufferTensor(Buffer(key, storage), value.shape)

    def temp(self, shape: tuple[int, ...], storage: str) -> BufferTensor:
        key = self.low.new_id()
        self.temps[key] = TensorInfo(shape, storage)
        return BufferTensor(Buffer(key, storage), shape)

    def storage_of_output(self, i: int) -> str:
        return self.low.storage_of(self.low.graph.operations[self.op].outputs[i])

    def _values_storage(self, values: bool) -> str:
        """A float temporary's storage: float16 where it holds values (not a statistic) of a relaxed
        model on a target that stores its temporaries so."""
        return "half" if values and self.low.relaxed_storage else "float"

    def materialize(self, compute: Compute, name: str, values: bool = False) -> BufferTensor:
        t = self.temp(compute.shape, self._values_storage(values) if compute.dtype == "float" else "int")
        self.steps.append(self.low.kernel_step(f"nn_{name}", t.buffer, compute, [self.op]))
        return t

    def has_library(self, kind: str) -> bool:
        return has_template(self.low.target, kind)

    def gemm_min_work(self) -> int:
        return self.low.target.gemm_min_work

    def _output(self) -> BufferTensor:
        """The operation's (one) output, for a library kernel that writes it in place."""
        return self.low.tensor_of(self.low.graph.operations[self.op].outputs[0])

    def library(self, kind: str, inputs: list[BufferTensor], size: int, defines: dict[str, object],
                temp: tuple[int, ...] | None = None, then_row: int | None = None,
                group: int | None = None, values: bool = False) -> BufferTensor:
        out = self._output() if temp is None else self.temp(temp, self._values_storage(values))
        defines = {**defines, **element_types(kind, [t.buffer.storage for t in [*inputs, out]])}
        name = self.low.unique_name(_kernel_name(self.low.graph, [self.op]))
        source = specialise(self.low.target, kind, name, defines)
        args = [t.buffer.key for t in inputs] + [out.buffer.key]
        self.steps.append(TemplateStep(name, source, size, args, [self.op], self.low.target.schedule.flat(size, group),
                                       then_row, kind, defines))
        return out

    def gemm(self, a: BufferTensor, b: BufferTensor, m: int, n: int, k: int, b_transposed: bool = False,
             epilogue: tuple[BufferTensor, tuple[float, float]] | None = None,
             relaxed: bool = False) -> BufferTensor | Stored:
        half = (relaxed and a.buffer.storage == "half" and self.low.target.gemm_half_inputs
                and b.buffer.key in self.constants)
        if half:   # a float16 temporary read as it is stored, times its weights stored so
            b = self._half_constant(b)
        else:
            a, b = self._float(a, "gemm_a"), self._float(b, "gemm_b")
        key, ldb = b.buffer.key, None
        row_stride = self.low.target.gemm_row_stride
        stride = n if row_stride is None else row_stride(n)
        pack_bytes = self.low.target.gemm_pack_bytes
        if (b_transposed and key in self.constants and m >= PACK_FROM_M
                and (k < PACK_BELOW_K or k * stride * self.constants[key].itemsize <= pack_bytes)):
            # a short K: B packed as [K, N], a small copy, for the row-blocked schedules (on PoCL
            # twice as fast as dot products along K up to K = 384; slower for M < 8); a longer
            # one where the target packs copies of its size (else B is read where it is); its
            # rows padded with zeros to the target's stride (a GEMM on PoCL with N = 28: 153 us
            # with a scalar tail of 4 columns, 47 us padded to 32)
            packed = np.zeros((k, stride), self.constants[key].dtype)
            packed[:, :n] = self.constants[key].reshape(n, k).T
            self.constants[key] = packed
            self.temps[key] = TensorInfo((k, stride), self.temps[key].storage, pinned=True)
            b_transposed, ldb = False, (stride if stride != n else None)
        out = self._output()
        stored = out.buffer.storage
        if (epilogue is not None and self.low.target.gemm_epilogue
                and (stored == "float" or (stored == "half" and self.low.target.gemm_half_output))):
            bias, bounds = epilogue
            args = [a.buffer.key, b.buffer.key, bias.buffer.key, out.buffer.key]
            self.steps.append(GemmStep(args, m, n, k, [self.op], b_transposed, bounds, ldb=ldb, relaxed=relaxed,
                                       half=half))
            return Stored(out)
        c = self.temp((m, n), "float")
        self.steps.append(GemmStep([a.buffer.key, b.buffer.key, c.buffer.key], m, n, k, [self.op], b_transposed,
                                   ldb=ldb, relaxed=relaxed, half=half))
        return c

    def _half_constant(self, t: BufferTensor) -> BufferTensor:
        """This builder's float32 constant `t` stored as float16 instead."""
        key = t.buffer.key
        with np.errstate(over="ignore"):   # past float16's range: infinite, as relaxed allows
            self.constants[key] = self.constants[key].astype(np.float16)
        self.temps[key] = TensorInfo(self.temps[key].shape, "half", pinned=True)
        return BufferTensor(Buffer(key, "half"), t.shape)

    def _float(self, t: BufferTensor, name: str) -> BufferTensor:
        """`t`, or a float32 copy of a float16 one (a relaxed temporary)."""
        if t.buffer.storage != "half":
            return t
        return self.materialize(Compute(t.shape, "float", t.load), name)


Built = tuple[list[Result], _Builder]


class _Lowering:
    """The state of one segment's lowering: ids for new tensors, rendering, building."""

    def __init__(self, runner: GraphRunner, start: int, known: Known, target: Target) -> None:
        self.runner, self.target, self.known, self.start = runner, target, known, start
        self.graph: Subgraph = runner.model.main
        self.next_id = max(len(self.graph.operands), known.next_id)
        self.names: set[str] = set()   # kernel names are unique in a segment: one program holds them
        self.relaxed_storage = target.relaxed_storage and runner.context.relaxed   # relaxed_storage.py

    def new_id(self) -> int:
        """An id for a derived constant or temporary, after the model's operands."""
        self.next_id += 1
        self.known.next_id = self.next_id
        return self.next_id - 1

    def storage_of(self, t: int) -> str:
        """Operand t's buffer storage: its type's, or float16 for a relaxed temporary (Known.half)."""
        return "half" if t in self.known.half else storage_of(self.graph.operands[t].type)

    def tensor_of(self, idx: int) -> BufferTensor:
        return BufferTensor(Buffer(idx, self.storage_of(idx)), self.known.shapes[idx])

    def unique_name(self, name: str) -> str:
        unique, n = name, 1
        while unique in self.names:
            unique, n = f"{name}_{n}", n + 1
        self.names.add(unique)
        return unique

    def kernel_step(self, name: str, out: Buffer, value: Tensor, ops: list[int]) -> KernelStep:
        unique = self.unique_name(name)
        kernel = narrow_indices(store(unique, out, value))
        args = [b.key for b in kernel.inputs] + [out.key]
        return KernelStep(kernel, self.target, args, ops)

    def inputs_of(self, node: OpNode, fused: dict[int, Compute]) -> list[Tensor | None]:
        ins: list[Tensor | None] = []
        for i, idx in enumerate(node.operation.inputs):
            operand = self.graph.operands[idx]
            if not node.given(i) or not is_tensor(operand.type) or storage_of(operand.type, None) is None:
                ins.append(None)
            else:
                ins.append(fused.get(idx) or self.tensor_of(idx))
        return ins

    def build(self, node: OpNode, fused: dict[int, Compute]) -> Built | None:
        """The first device implementation of `node` that builds, with its side effects."""
        if not all(storage_of(self.graph.operands[o].type, None) for o in node.operation.outputs):
            return None
        if node.spec.alias == Alias.VIEW:  # input 0's bytes under the output's shape
            return [View(0)], _Builder(self, node.index)
        for impl in node.spec.candidates(node):
            builder = _Builder(self, node.index)
            node.builder = builder
            try:
                results = results_of(impl.build(node, self.inputs_of(node, fused)), node.num_outputs)
            except (OpError, NeedsValue, ValueError) as e:  # it declines this node; anything else is a bug
                log.debug("operation %d: %s does not build: %s", node.index, impl.name, e)
                continue
            finally:
                node.builder = None
            return results, builder
        return None


def lower_segment(runner: GraphRunner, start: int, known: Known, target: Target, fuse: bool = True) -> SegmentSpec:
    """The segment of the main graph from operation `start`, given what is known there."""
    known = known.copy()
    known.half = float16_temporaries(runner.model.main, runner.context.relaxed, target)
    inference = infer(runner, start, known)
    low = _Lowering(runner, start, known, target)
    trial: dict[int, Built] = {}
    for k in inference.ops:
        if k not in inference.folded and k not in inference.host_only:
            built = low.build(inference.nodes[k], {})
            if built is not None:
                trial[k] = built
    inline = inlined_outputs(runner, inference, set(trial), known, fuse)
    return _Emitter(low, inference).emit(trial, inline, fuse)


class _Emitter:
    """Writes the steps in operation order, with the transfers each placement needs."""

    def __init__(self, low: _Lowering, inference: Inference) -> None:
        self.low, self.inf = low, inference
        self.graph, self.known = low.graph, low.known
        self.steps: list[Step] = []
        self.tensors: dict[int, TensorInfo] = {}
        self.constants: dict[int, np.ndarray] = {}
        self.aliases: dict[int, int] = {}
        self.fused: dict[int, Compute] = {}
        self.fused_ops: dict[int, list[int]] = {}   # fused operand → the operations its Compute evaluates
        self.device_ops: set[int] = set()
        self.host_ops = 0

    def ensure_device(self, t: int) -> None:
        known = self.known
        if t in known.on_device or t >= len(self.graph.operands):
            return
        if t in self.fused:  # a consumer went to the host: store the Compute after all
            self.store(t, self.fused.pop(t), self.fused_ops.pop(t))
            return
        info = TensorInfo(known.shapes[t], self.low.storage_of(t))
        if t in known.values:
            self.constants[t] = np.ascontiguousarray(known.values[t])
            info.pinned = True
        else:
            self.steps.append(Transfer(t, True))
        self.tensors[t] = info
        known.on_device.add(t)

    def ensure_host(self, t: int) -> None:
        known = self.known
        if t in known.on_host or t in known.values or self.graph.operands[t].lifetime in NO_DATA:
            return
        self.ensure_device(t)  # a fused value is stored first
        self.steps.append(Transfer(t, False))
        known.on_host.add(t)

    def store(self, t: int, compute: Compute, ops: list[int]) -> None:
        out = Buffer(t, self.low.storage_of(t))
        outputs = self.graph.operations[ops[0]].outputs  # ops[0]: the operation producing t
        name = _kernel_name(self.graph, ops) + (f"_out{outputs.index(t)}" if len(outputs) > 1 else "")
        step = self.low.kernel_step(name, out, compute, sorted(ops))
        for a in step.args[:-1]:
            self.ensure_device(a)
        self.steps.append(step)
        self.tensors[t] = TensorInfo(self.known.shapes[t], out.storage)
        self.known.on_device.add(t)
        self.device_ops.update(ops)

    def host(self, k: int) -> None:
        op = self.graph.operations[k]
        for i in op.inputs:
            self.ensure_host(i)
        shapes = [None if k in self.inf.host_only else self.known.shapes[o] for o in op.outputs]
        self.steps.append(HostStep(k, list(op.inputs), list(op.outputs), shapes))
        self.known.on_host.update(op.outputs)
        self.host_ops += 1

    def device(self, k: int, built: Built) -> None:
        op = self.graph.operations[k]
        node = self.inf.nodes[k]
        results, builder = built
        self.tensors.update(builder.temps)
        self.constants.update(builder.constants)
        for step in builder.steps:
            for a in step.args[:-1]:
                self.ensure_device(a)
            self.steps.append(step)
        ops = [k] + [o for i in op.inputs if i in self.fused for o in self.fused_ops[i]]
        for t, result in zip(op.outputs, results):
            if isinstance(result, View):
                source = op.inputs[result.input]
                if (source not in self.fused and t not in self.graph.outputIndexes
                        and self.low.storage_of(source) == self.low.storage_of(t)):   # one buffer, one storage
                    self.ensure_device(source)
                    self.aliases[t] = self.aliases.get(source, source)
                    self.known.on_device.add(t)
                    self.device_ops.add(k)
                    continue
                result = result.compute(self.low.inputs_of(node, self.fused), self.known.shapes[t])
            if isinstance(result, Stored):  # a library kernel wrote the output itself
                self.tensors[t] = TensorInfo(self.known.shapes[t], result.tensor.buffer.storage)
                self.known.on_device.add(t)
                self.device_ops.add(k)
                continue
            if t in self.inline:
                self.fused[t], self.fused_ops[t] = result, ops
            else:
                self.store(t, result, ops)
        for i in op.inputs:  # consumed: a fused producer's Compute is now part of this one
            self.fused.pop(i, None)

    def emit(self, trial: dict[int, Built], inline: set[int], fuse: bool) -> SegmentSpec:
        self.inline = inline
        for k in self.inf.ops:
            if k in self.inf.folded:
                continue
            built = trial.get(k)
            if built is not None and any(i in self.fused for i in self.graph.operations[k].inputs):
                built = self.low.build(self.inf.nodes[k], self.fused)  # again, its producers inlined
            if built is None:
                self.host(k)
            else:
                self.device(k, built)
        stop = self.inf.stop
        for t in (stop.values if stop else ()):
            self.ensure_host(t)
        for t in list(self.fused):  # nothing consumed them in this segment
            self.ensure_device(t)
        known, needed = self.known, _needed_after(self.graph, stop)
        if fuse and self.low.target.gemm_epilogue:
            stored = set(self.tensors)
            self.steps = fold_residual_adds(self.steps, self.tensors, self.aliases, needed)
            self.steps = fold_elementwise_consumers(self.steps, self.tensors, self.aliases, needed, self.low.target)
            self.steps = fold_column_scales(self.steps, self.tensors, self.aliases, needed)
            self.steps = fold_squeeze_excite(self.steps, self.tensors, self.aliases, needed, self.low.target,
                                             self.constants, self.low.new_id)
            self.steps = fold_sibling_pools(self.steps, self.low.target)
            known.on_device -= stored - set(self.tensors)   # GEMM outputs an ADD took over
        spec = SegmentSpec(self.low.start, self.low.target, self.steps, self.tensors, self.constants,
                           self.aliases, stop=stop, known=known, device_ops=len(self.device_ops),
                           host_ops=self.host_ops)
        plan_slots(spec, self.graph, needed)
        return spec



def lower_model(runner: GraphRunner, target: Target, fuse: bool = True) -> SegmentSpec | None:
    """The first segment for the model's declared input shapes (None when some are unknown)."""
    shapes = declared_input_shapes(runner)
    if shapes is None:
        return None
    return lower_segment(runner, 0, initial_known(runner, shapes), target, fuse)


def trace_segments(runner: GraphRunner, values: dict[int, np.ndarray], target: Target,
                   fuse: bool = True) -> list[SegmentSpec]:
    """The segments a plan compiles for one execution whose operand values (a reference trace)
    are `values`: each barrier is answered from them, as the plan answers it at run time."""
    graph = runner.model.main
    known = initial_known(runner, {i: tuple(np.shape(values[i])) for i in graph.inputIndexes if values.get(i) is not None})
    segments = [lower_segment(runner, 0, known, target, fuse)]
    while segments[-1].stop is not None:
        stop, known = segments[-1].stop, segments[-1].known.copy()
        known.values.update({t: values[t] for t in stop.values})
        known.shapes.update({t: tuple(np.shape(values[t])) for t in stop.shapes})
        segments.append(lower_segment(runner, stop.at, known, target, fuse))
    return segments


def host_segment(runner: GraphRunner, start: int, known: Known, target: Target) -> SegmentSpec:
    """Every operation from `start` on the host reference, with the downloads they need."""
    ops = list(range(start, len(runner.model.main.operations)))
    inference = Inference(ops=ops, host_only=set(ops))
    return _Emitter(_Lowering(runner, start, known.copy(), target), inference).emit({}, set(), False)


def _kernel_name(graph: Subgraph, ops: list[int]) -> str:
    ops = sorted(ops)
    return f"nn_{'_'.join(graph.operations[k].type.name.lower() for k in ops)[:60]}_{ops[0]}"


def _needed_after(graph: Subgraph, stop: Stop | None) -> set[int]:
    """Operands still read after the segment: by later operations, a barrier or as outputs."""
    needed = set(graph.outputIndexes)
    if stop is not None:
        needed |= set(stop.values)
        for op in graph.operations[stop.at:]:
            needed.update(op.inputs)
    return needed


def declared_input_shapes(runner: GraphRunner) -> dict[int, tuple[int, ...]] | None:
    """The main graph's input shapes from the model, when every one is fully specified."""
    graph = runner.model.main
    shapes = {}
    for idx in graph.inputIndexes:
        operand = graph.operands[idx]
        if not is_tensor(operand.type):
            shapes[idx] = ()
        elif operand.dimensions and all(d > 0 for d in operand.dimensions):
            shapes[idx] = tuple(operand.dimensions)
        else:
            return None
    return shapes


class SegmentLowering:
    """The Lowering a device plan (runtime/plan.py) compiles its segments with: one model's
    segments for one target."""

    def __init__(self, runner: GraphRunner, target: Target, fuse: bool = True) -> None:
        self.runner, self.target, self.fuse = runner, target, fuse

    def initial_known(self, input_shapes: dict[int, tuple[int, ...]]) -> Known:
        return initial_known(self.runner, input_shapes)

    def segment(self, start: int, known: Known) -> SegmentSpec:
        return lower_segment(self.runner, start, known, self.target, self.fuse)

    def host_segment(self, start: int, known: Known) -> SegmentSpec:
        return host_segment(self.runner, start, known, self.target)

    def declared_input_shapes(self) -> dict[int, tuple[int, ...]] | None:
        return declared_input_shapes(self.runner)


def device_plan(runner: GraphRunner, backend: Backend, fuse: bool = True, specialise: bool = True,
                programs: ProgramSet | None = None) -> Plan:
    """A prepared model's executor on a device backend (one with a target)."""
    if backend.target is None:
        raise ValueError(f"the {backend.name} backend compiles no kernels")
    return Plan(runner, backend, SegmentLowering(runner, backend.target, fuse), specialise, programs)
