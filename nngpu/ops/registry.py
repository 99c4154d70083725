"""The operation table: one OpSpec per OperationType, the single definition of its operation.

Each op family module (nngpu/ops/<family>.py) calls `register(OpSpec(...))` at import time and
registers its device implementations on the spec (`@SPEC.device(...)`). The compiler uses only
the spec's public members; OpNode (node.py) is the operation as the compiler sees it."""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Callable, Sequence

import numpy as np

from ..hal.types import Operand, OperandLifeTime, OperandType, Operation, OperationType

# "OpNode" in the annotations below is node.OpNode, named, not imported: node.py builds on this
# module, and the package has no import circle (tests/test_structure.py).

T = OperandType


class HalVersion(IntEnum):
    """The HAL version a model needs: the HIDL 1.0-1.3 versions (NNAPI feature levels 1-4) and,
    past them, the AIDL HAL versions whose feature levels added operations (value 9 + level).
    No HIDL entry point can name an AIDL version; driver.device documents how the 1.3 ones
    take such models as an nngpu extension."""

    V1_0 = 10
    V1_1 = 11
    V1_2 = 12
    V1_3 = 13
    AIDL_V2 = 15  # feature level 6: BATCH_MATMUL, PACK, RESHAPE of TENSOR_INT32
    AIDL_V3 = 16  # feature level 7: MIRROR_PAD, REVERSE, RSQRT of quantized tensors


class OpError(Exception):
    """An operation rejected at validation or execution; the message names the reason.

    Raised by `validate` (model is INVALID_ARGUMENT) and by `reference` for input values the spec
    forbids (execution fails with `status`)."""

    def __init__(self, reason: str, status: int | None = None):
        super().__init__(reason)
        self.status = status


class RankLimit(OpError):
    """A rank above the most the operation runs (RESHAPE to rank 5). Raised by a shape function
    from what the model fixes before execution, it makes the operation unsupported
    (driver/support.py) rather than a failure at every execution."""


@dataclass(frozen=True)
class Signature:
    """One accepted operand-type list. `min_inputs` < len(inputs) lets trailing optional inputs
    be left out entirely (their count is then absent, not NO_VALUE)."""

    inputs: tuple[OperandType, ...]
    outputs: tuple[OperandType, ...]
    version: HalVersion
    min_inputs: int | None = None

    def matches(self, in_types: Sequence[int], out_types: Sequence[int]) -> bool:
        lo = len(self.inputs) if self.min_inputs is None else self.min_inputs
        if not lo <= len(in_types) <= len(self.inputs) or len(out_types) != len(self.outputs):
            return False
        return tuple(in_types) == self.inputs[: len(in_types)] and tuple(out_types) == self.outputs


def sig(inputs: Sequence[OperandType], outputs: Sequence[OperandType], version: HalVersion,
        min_inputs: int | None = None) -> Signature:
    return Signature(tuple(inputs), tuple(outputs), version, min_inputs)


class OpContext:
    """What an op sees of one operation: its operands, and at execution their values.

    `values[k]` is the numpy value of the k-th input (0-d arrays for scalars) or None when the
    input is omitted (NO_VALUE) or not known yet (validation time, non-constant)."""

    def __init__(self, operation: Operation, operands: Sequence[Operand],
                 values: Sequence[np.ndarray | None], relaxed: bool = False,
                 version: HalVersion = HalVersion.V1_3, subgraphs: Sequence | None = None,
                 executor: Callable | None = None, deadline_ns: int | None = None):
        self.operation = operation
        self.operands = operands
        self.values = values
        self.relaxed = relaxed
        self.version = version
        self.subgraphs = subgraphs      # 1.3 referenced subgraphs, for IF / WHILE
        self.executor = executor        # runs a referenced subgraph, for IF / WHILE
        self.deadline_ns = deadline_ns  # time.monotonic_ns() by which a WHILE loop must end
        self._params: object = None

    @property
    def params(self):
        """The operation's parameters, parsed once by its spec's `params`."""
        if self._params is None:
            parse = REGISTRY[self.operation.type].params
            if parse is None:
                raise AttributeError(f"{OperationType(self.operation.type).name} has no parameter parser")
            self._params = parse(self)
        return self._params

    @property
    def num_inputs(self) -> int:
        return len(self.operation.inputs)

    @property
    def num_outputs(self) -> int:
        return len(self.operation.outputs)

    def in_operand(self, i: int) -> Operand:
        return self.operands[self.operation.inputs[i]]

    def out_operand(self, i: int) -> Operand:
        return self.operands[self.operation.outputs[i]]

    def has_input(self, i: int) -> bool:
        """True when input i exists and has a value (is not omitted)."""
        return (i < self.num_inputs and self.in_operand(i).lifetime != OperandLifeTime.NO_VALUE
                and self.values[i] is not None)

    def given(self, i: int) -> bool:
        """Optional input i is present: not omitted, and not a model input the execution left
        without a value."""
        return self.has_input(i)

    def is_omitted(self, i: int) -> bool:
        return i >= self.num_inputs or self.in_operand(i).lifetime == OperandLifeTime.NO_VALUE

    def in_shape(self, i: int) -> tuple[int, ...]:
        """Input i's shape (so a shape function serves the reference too)."""
        return tuple(np.shape(self.input(i)))

    def input(self, i: int) -> np.ndarray:
        v = self.values[i]
        if v is None:
            raise OpError(f"input {i} has no value")
        return v

    def scalar(self, i: int, default=None):
        """Input i as a Python scalar, or `default` when it is absent or omitted."""
        if not self.has_input(i):
            if default is None and i < self.num_inputs and not self.is_omitted(i):
                raise OpError(f"input {i} has no value")
            return default
        return self.values[i].reshape(-1)[0].item()

    def is_constant(self, i: int) -> bool:
        return self.in_operand(i).lifetime in (OperandLifeTime.CONSTANT_COPY, OperandLifeTime.CONSTANT_REFERENCE)


Reference = Callable[[OpContext], list[np.ndarray]]
# A bound kernel of the numpy plan: (input values, preallocated outputs) -> output values.
Kernel = Callable[[Sequence["np.ndarray | None"], list[np.ndarray]], Sequence[np.ndarray]]
Validate = Callable[[OpContext], None]
ShapeFn = Callable[["OpNode"], list[tuple[int, ...]]]


class Alias(IntEnum):
    """Whether output 0 may live in an input's bytes, which the plans' buffer assignment reads:
    VIEW, it is input 0's bytes under another shape (RESHAPE); IN_PLACE, it may be written over
    an input of its own shape and dtype that dies there, because every implementation reads each
    input element no later than it writes that element's output (ufuncs into out=)."""

    NONE = 0
    VIEW = 1
    IN_PLACE = 2


class Pattern(IntEnum):
    """How an operation's outputs relate to its inputs, which decides what fusion may do:
    ELEMENTWISE and INJECTIVE outputs (each element from one element of each input, or a
    copy of one input element) fold into their consumer's kernel; a REDUCTION (windows,
    reductions) takes elementwise consumers as its epilogue but reads stored inputs; OPAQUE
    operations run on their own."""

    ELEMENTWISE = 0
    INJECTIVE = 1
    REDUCTION = 2
    OPAQUE = 3


@dataclass
class DeviceImpl:
    """One way to compute an operation on a device: `build(node, inputs)` returns the output
    Computes (see nngpu.ir); it is tried when `applies(node)` holds, lower ranks first."""

    name: str
    rank: int
    applies: Callable[["OpNode"], bool]
    build: Callable


def _always(node) -> bool:
    return True


@dataclass
class OpSpec:
    """Everything about one operation: operand-type signatures per HAL version (validation,
    getSupportedOperations), `validate` (its own model rules), `reference` (the numpy kernel
    that defines its semantics), `params` (its parameters parsed into a typed object), `shape`
    (output shapes from input shapes and the values it needs), the fusion `pattern`, and its
    device implementations, registered with `device`."""

    type: OperationType
    signatures: list[Signature]
    reference: Reference
    validate: Validate | None = None      # op-specific model rules; raise OpError
    shape: ShapeFn | None = None          # None: the shapes are known only once it has run
    params: Callable[[OpContext], object] | None = None
    pattern: Pattern = Pattern.OPAQUE
    foldable: bool = True                 # False: never computed ahead of time (random, control flow)
    alias: Alias = Alias.NONE             # output 0 in an input's bytes (above)
    # The numpy plan's fast path (compiler/numpy_plan.py), optional: called once at prepare with
    # an OpNode whose constants and operand shapes are all known, it returns a Kernel computing
    # exactly the reference's values, or None (the operation then runs `reference`). The Kernel
    # gets empty output arrays of the output operands' shapes and storage dtypes, to fill with
    # out= and return; it may return other arrays of exactly those shapes and dtypes (a view of
    # an input). It may raise OpError for values the reference rejects; it must not keep
    # per-execution state (executions of one model run concurrently).
    bind: Callable[["OpNode"], Kernel | None] | None = None
    # For ops whose operand list is variadic in count and type (IF, WHILE): returns the version
    # the operand types need, or None. Replaces the signature table when set.
    matcher: Callable[[Sequence[int], Sequence[int]], HalVersion | None] | None = None
    implementations: list[DeviceImpl] = field(default_factory=list, repr=False)

    def match(self, in_types: Sequence[int], out_types: Sequence[int]) -> Signature | None:
        """The lowest-version signature these operand types match, or None."""
        if self.matcher is not None:
            v = self.matcher(in_types, out_types)
            return None if v is None else Signature(tuple(in_types), tuple(out_types), v)
        best = None
        for s in self.signatures:
            if s.matches(in_types, out_types) and (best is None or s.version < best.version):
                best = s
        return best

    def device(self, applies: Callable[["OpNode"], bool] = _always, rank: int = 0) -> Callable:
        """Decorator registering a device implementation of this operation."""
        def register_impl(build: Callable) -> Callable:
            self.implementations.append(DeviceImpl(build.__name__, rank, applies, build))
            self.implementations.sort(key=lambda d: d.rank)
            return build
        return register_impl

    def candidates(self, node: "OpNode") -> list[DeviceImpl]:
        """The device implementations that apply to `node`, best first."""
        return [d for d in self.implementations if d.applies(node)]


def same_shape(i: int = 0) -> ShapeFn:
    """Shape function: every output has input i's shape."""
    return lambda node: [node.in_shape(i)] * node.num_outputs


def broadcast_shapes(*positions: int) -> ShapeFn:
    """Shape function: one output, the numpy broadcast of the listed inputs' shapes."""
    def shape(node: "OpNode") -> list[tuple[int, ...]]:
        try:
            return [tuple(np.broadcast_shapes(*[node.in_shape(p) for p in positions]))]
        except ValueError as e:
            raise OpError(f"incompatible dimensions: {e}") from None
    return shape


REGISTRY: dict[OperationType, OpSpec] = {}


def register(spec: OpSpec) -> OpSpec:
    if spec.type in REGISTRY:
        raise ValueError(f"{spec.type.name} registered twice")
    REGISTRY[spec.type] = spec
    return spec


def lookup(op_type: int) -> OpSpec | None:
    return REGISTRY.get(op_type)  # type: ignore[arg-type]


def introduced_in(op_type: int) -> HalVersion:
    """The HAL version whose OperationType enum first lists `op_type`."""
    if op_type < 29 or op_type == OperationType.OEM_OPERATION:
        return HalVersion.V1_0
    if op_type < 38:
        return HalVersion.V1_1
    if op_type < 95:
        return HalVersion.V1_2
    if op_type < 102:
        return HalVersion.V1_3
    return HalVersion.AIDL_V2 if op_type < 104 else HalVersion.AIDL_V3
