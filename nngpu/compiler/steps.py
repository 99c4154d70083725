"""What the compiler hands the runtime: a segment's steps (kernels, GEMM calls, host operations,
transfers), its tensors and buffer plan, and what is known where a segment starts or stops; and
the numpy plan's bound operations. Data only: the runtime runs them (nngpu/runtime)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..hal.types import OperandLifeTime
from ..ir.kernel import Kernel
from ..ir.schedule import Grid
from ..ir.storage import STORAGE_DTYPE
from ..ops.registry import Kernel as BoundKernel

if TYPE_CHECKING:
    from .target import Target

NO_DATA = {OperandLifeTime.NO_VALUE, OperandLifeTime.SUBGRAPH}


@dataclass
class Known:
    """What the compiler knows at the start of a segment."""

    shapes: dict[int, tuple[int, ...]]
    values: dict[int, np.ndarray]                 # constants, folded values, specialised values
    on_device: set[int] = field(default_factory=set)   # operands earlier segments left on the device
    on_host: set[int] = field(default_factory=set)     # operands with a host value at run time
    next_id: int = 0                                   # above every tensor id earlier segments gave
    half: frozenset[int] = frozenset()                 # float32 operands stored as float16 (relaxed_storage.py)

    def copy(self) -> "Known":
        return Known(dict(self.shapes), dict(self.values), set(self.on_device), set(self.on_host), self.next_id,
                     self.half)


@dataclass(frozen=True)
class Stop:
    """Where a segment ends: the next one starts at operation `at`, specialised on the run-time
    values of `values` and the shapes of `shapes`."""

    at: int
    values: tuple[int, ...] = ()
    shapes: tuple[int, ...] = ()


@dataclass
class KernelStep:
    kernel: Kernel
    target: Target
    args: list[int]             # tensors: the kernel's inputs in parameter order, then its output
    ops: list[int]              # the operations it computes

    @property
    def name(self) -> str:
        return self.kernel.name

    @property
    def source(self) -> str:
        """The kernel alone as C (the plan compiles a segment's kernels as one unit)."""
        return self.target.render(self.kernel)

    @property
    def tensors(self) -> list[int]:
        """The device tensors the step touches (for the buffer plan)."""
        return self.args

    @property
    def written(self) -> list[int]:
        """The tensors it writes: its last arg."""
        return self.args[-1:]

    @property
    def size(self) -> int:
        return self.kernel.size

    @property
    def grid(self) -> Grid:
        """Its launch, by the target's schedule (which framed its source)."""
        return self.target.schedule.launch(self.kernel)


@dataclass
class GemmStep:
    """C[m, n] = A[m, k] @ B[k, n] by the backend's library; with b_transposed, B is stored as
    [n, k] (a weight matrix in the model's own layout, read in place). With bounds, the GEMM's
    epilogue stores clamp(C + bias[column], lo, hi): args are then A, B, bias, C. With residual
    bounds as well (lo2, hi2: an ADD folded in, compiler/gemm_fold.py) it stores
    clamp(clamp(C + bias, lo, hi) + R, lo2, hi2), R [m, n]: args are A, B, bias, R, C. With
    `then` instead (the C source of an elementwise kernel folded in, compiler/render_epilogue.py)
    it stores that kernel's value of clamp(C + bias, lo, hi): args are A, B, bias, the kernel's
    other buffers, C."""

    args: list[int]             # A, B, C (A, B, bias, C with bounds; A, B, bias, R, C with residual)
    m: int
    n: int
    k: int
    ops: list[int]              # the operations it computes (for profiles and dumps)
    b_transposed: bool = False
    bounds: tuple[float, float] | None = None
    residual: tuple[float, float] | None = None
    then: str | None = None
    folded: tuple[Kernel, int] | None = None   # with `then`: the kernel folded in and the buffer it reads of C
    ldb: int | None = None      # B's row stride where its rows are padded past n (Target.gemm_row_stride)
    scale_a: bool = False       # A's element (r, k) is multiplied by S[k] as it is read: S is the last arg before C
    relaxed: bool = False       # the model allows float16 range and precision (Backend.gemm)
    half: bool = False          # A and B are float16 (Target.gemm_half_inputs); C: half_storages

    @property
    def tensors(self) -> list[int]:
        return self.args

    def half_storages(self, tensors: dict[int, "TensorInfo"]) -> tuple[bool, bool]:
        """Whether C, and the scale, are float16 as `tensors` (a segment's) store them: asked at
        binding, since a fold may have made C another operation's output, and the scale is a fold's."""
        scale, c = (tensors[t].storage == "half" for t in self.args[-2:])
        return c, self.scale_a and scale

    @property
    def written(self) -> list[int]:
        """The tensors it writes: C."""
        return self.args[-1:]


@dataclass
class TemplateStep:
    """A hand-written kernel from kernels/ specialised by #defines (compiler/library.py): compiled
    as a translation unit of its own and launched over `grid` (`size` threads, the target's group)."""

    name: str
    source: str
    size: int
    args: list[int]             # tensors: the kernel's inputs in parameter order, then its outputs
    ops: list[int]
    grid: Grid
    # a template that calls a folded elementwise kernel as it stores (#define THEN, its function
    # first: compiler/gemm_fold.py) on vectors within rows of this many elements; None: one that cannot
    then_row: int | None = None
    kind: str = ""              # the template (Target.templates), and the #defines it was specialised by
    defines: dict[str, object] = field(default_factory=dict)
    outputs: int = 1            # the last so many args are what it writes (a depthwise kernel running a head: 3)

    @property
    def tensors(self) -> list[int]:
        return self.args

    @property
    def written(self) -> list[int]:
        """The tensors it writes: its last `outputs` args."""
        return self.args[-self.outputs:]


@dataclass
class HostStep:
    op: int
    inputs: list[int]
    outputs: list[int]
    shapes: list[tuple[int, ...] | None]   # what the plan assumed (None: known once it has run)

    @property
    def tensors(self) -> list[int]:
        return []  # it reads and writes host values; Transfers move them


@dataclass
class Transfer:
    tensor: int
    to_device: bool

    @property
    def tensors(self) -> list[int]:
        return [self.tensor]


Step = KernelStep | TemplateStep | GemmStep | HostStep | Transfer


def reads(step: Step) -> list[int]:
    """The tensors a step reads."""
    if isinstance(step, (KernelStep, TemplateStep, GemmStep)):
        return step.args[:-len(step.written)]
    if isinstance(step, Transfer):
        return [] if step.to_device else [step.tensor]
    assert isinstance(step, HostStep)
    return step.inputs


def writes(step: Step) -> list[int]:
    """The tensors a step writes."""
    if isinstance(step, (KernelStep, TemplateStep, GemmStep)):
        return step.written
    if isinstance(step, Transfer):
        return [step.tensor] if step.to_device else []
    assert isinstance(step, HostStep)
    return step.outputs


@dataclass
class TensorInfo:
    shape: tuple[int, ...]
    storage: str
    pinned: bool = False        # never shares its buffer (inputs, outputs, constants, values used later)

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * STORAGE_DTYPE[self.storage].itemsize


@dataclass
class SegmentSpec:
    start: int
    target: Target
    steps: list[Step]
    tensors: dict[int, TensorInfo]               # device tensors this segment allocates
    constants: dict[int, np.ndarray]             # of those, the ones uploaded once at prepare
    aliases: dict[int, int]                      # view → the tensor whose buffer it shares
    slot_of: dict[int, int] = field(default_factory=dict)
    slot_sizes: list[int] = field(default_factory=list)
    stop: Stop | None = None
    known: Known | None = None                   # what the next segment starts from
    device_ops: int = 0
    host_ops: int = 0

    @property
    def kernels(self) -> list[KernelStep]:
        return [s for s in self.steps if isinstance(s, KernelStep)]

    @property
    def kernel_count(self) -> int:
        """Kernels compiled for the segment: generated ones and templates."""
        return sum(isinstance(s, (KernelStep, TemplateStep)) for s in self.steps)

    def units(self, per_unit: int | None = None) -> list[tuple[str, list[str]]]:
        """The segment's kernels as translation units of at most `per_unit` kernels (None: one
        unit): [(source, kernel names)]. Several units let prepare report progress; one unit
        compiles fastest."""
        kernels = self.kernels
        n = per_unit or max(len(kernels), 1)
        chunks = [kernels[k: k + n] for k in range(0, len(kernels), n)]
        return ([(self.target.render_unit([s.kernel for s in c]), [s.name for s in c]) for c in chunks]
                + [(s.source, [s.name]) for s in self.steps if isinstance(s, TemplateStep)])




# ---- the numpy plan's bound operations ---------------------------------------------------------
Shapes = tuple[tuple[int, ...] | None, ...]
Layout = list[tuple[int | None, ...]]  # by step: each output's byte offset (None: no buffer)


@dataclass(frozen=True)
class BoundStep:
    k: int                           # the operation
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    kernel: BoundKernel | None       # None: the reference
    shapes: Shapes                   # static output shapes; None where known once it has run
    dtypes: tuple[np.dtype, ...]
    view: bool = False               # the kernel returns input 0 viewed in the output's shape
    in_place: bool = False           # the kernel may write its output over an input of that shape


@dataclass
class Bound:
    """The bound steps for one set of input shapes, the values known before running, where each
    bound output lives in a buffer set (numpy_bind.layout) and that set's size."""

    steps: list[BoundStep]
    values: list[np.ndarray | None]  # by operand index: constants and folded values
    layout: Layout
    nbytes: int

    def unshared_nbytes(self) -> int:
        """The size a buffer set would have with a buffer per bound output (what sharing saves)."""
        return sum(int(np.prod(s, dtype=np.int64)) * d.itemsize
                   for st in self.steps if st.kernel for s, d in zip(st.shapes, st.dtypes))
