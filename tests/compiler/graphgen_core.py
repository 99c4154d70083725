"""The random-graph generator's core: tensors with their values in every run and error bounds,
parameters, and `Gen`, which builds a graph operation by operation (operations: graphgen_ops.py,
graphgen_windows.py; the hypothesis strategy: graphgen.py)."""
from __future__ import annotations

import hashlib
import itertools
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
from hypothesis import strategies as st

from nngpu.hal.types import (DataLocation, Model_1_3, Operand, OperandExtraParams, OperandLifeTime, Operation,
                             OperationType, SymmPerChannelQuantParams)
from nngpu.ops import load_all
from nngpu.ops.lib.dtypes import dtype_of, quant_range
from nngpu.ops.registry import REGISTRY, HalVersion, OpContext, OpError
from nngpu.validation import ValidationError, validate_model

from .model_builder import ModelBuilder, PATHS, T

load_all()  # the signature tables

# ---- random graphs ----------------------------------------------------------------------------
#
# A graph is built operation by operation. Each operation's operand types come from its
# OpSpec.signatures and its parameters are drawn valid for the shapes at hand, so every
# operation is valid by construction; the generator runs the operation's numpy reference
# while it builds (an OpError there is a generator bug and fails loudly), which gives every
# tensor its values and shapes in each run. A graph has RUNS value sets: a later run may give
# model inputs other shapes (declared 0 in the model) and the int32 inputs shape parameters
# are computed from other values, so the plan must specialise again. Now and then a chain
# starts from a constant instead of an input, for the compiler to fold.
#
# Float tolerances follow each tensor's `err`, a first-order bound on how far a device may
# drift from the reference (a few ulps per rounding operation, propagated through each
# operation's Lipschitz bound); operations that are discontinuous (comparisons, FLOOR, casts
# to integers, QUANTIZE, ARGMAX) only take inputs farther than that from their steps, so their
# exact results are exactly comparable. Quantized, int32 and bool results must be exact.

F32, F16, Q8, S8 = T.TENSOR_FLOAT32, T.TENSOR_FLOAT16, T.TENSOR_QUANT8_ASYMM, T.TENSOR_QUANT8_ASYMM_SIGNED
I32, B8 = T.TENSOR_INT32, T.TENSOR_BOOL8
FLOATS, QUANTS = (F32, F16), (Q8, S8)
SUPPORTED = (F32, F16, Q8, S8, I32, B8)
MAIN_TYPES = (F32,) * 6 + (F16, Q8, Q8, S8, I32)     # the first input: float32 mainly
RUNS = 2
RUN_ORDER = (0, 1, 0)            # executions of one prepared model: specialise, again, reuse
MAX_ELEMENTS = 2048
ROUNDING = {F32: 2.0 ** -21, F16: 2.0 ** -10}     # per rounding operation: 4 ulps (float16: 2)
MANTISSA = {F32: 24, F16: 11}
LIMIT = {F32: 1e4, F16: 500.0, I32: float(1 << 24)}   # magnitudes kept far from overflow
RTOL = {F32: 1e-5, F16: 5e-3}
SCALES = (0.05, 0.1, 0.125, 0.25, 0.3, 0.5, 1.0)
ACT_RANGE = {0: (-np.inf, np.inf), 1: (0.0, np.inf), 2: (-1.0, 1.0), 3: (0.0, 6.0)}
SHORT = {F32: "f32", F16: "f16", Q8: "q8", S8: "s8", I32: "i32", B8: "b8"}

Shape = tuple[int, ...]


def num(shape: Sequence[int]) -> int:
    return int(np.prod(shape, dtype=np.int64))


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def grid_bits(values: Sequence[np.ndarray]) -> int | None:
    """The fewest fractional bits f with every value a multiple of 2**-f, or None."""
    for f in range(25):
        if all(np.all(np.mod(v.astype(np.float64) * 2.0 ** f, 1.0) == 0) for v in values):
            return f
    return None


@dataclass(eq=False)
class Tensor:
    """A tensor of the graph, its value in each run; operand -1: a model input (or, `constant`,
    a constant operand) not added to the model yet."""

    operand: int
    type: int
    values: tuple[np.ndarray, ...]
    scale: float = 0.0
    zero_point: int = 0
    err: float = 0.0           # bound on |device - reference| of its elements; 0: exact
    dims: list[int] = field(default_factory=list)   # as the model declares it
    constant: bool = False

    @property
    def shapes(self) -> tuple[Shape, ...]:
        return tuple(v.shape for v in self.values)

    @property
    def rank(self) -> int:
        return len(self.shapes[0])

    def static(self, axis: int) -> bool:
        return len({s[axis] for s in self.shapes}) == 1

    @property
    def lo(self) -> float:
        return min(float(v.min()) for v in self.values)

    @property
    def hi(self) -> float:
        return max(float(v.max()) for v in self.values)

    @property
    def mag(self) -> float:
        return max(float(np.abs(v.astype(np.float64)).max()) for v in self.values)


@dataclass(eq=False)
class Const:
    type: int
    value: np.ndarray
    scale: float = 0.0
    zero_point: int = 0
    channel_quant: tuple[list[float], int] | None = None


@dataclass(eq=False)
class Param:
    """An int32 input (scalar or tensor) in each run: a constant when every run agrees and
    `encoding` says so, else computed from model inputs: given directly ("input"), by ADD or
    SUB of a constant, or as k·(k−1) + c with k in 0..3 ("quad": k = 0 and k = 1 agree)."""

    values: tuple[np.ndarray, ...]
    encoding: str
    scalar: bool = False

    @property
    def type(self) -> int:
        return T.INT32 if self.scalar else I32


@dataclass(eq=False)
class Omitted:
    type: int


Slot = Tensor | Const | Param | Omitted


def _quad_choices(column: Sequence[int]) -> list[tuple[int, ...]]:
    """The k in 0..3, one per run, with k·(k−1) + c = column[run] for one constant c."""
    options = set()
    for k0 in range(4):
        c = column[0] - k0 * (k0 - 1)
        options.update(itertools.product(*[[k for k in range(4) if k * (k - 1) + c == p] for p in column]))
    return sorted(options)


@dataclass
class Graph:
    model: Model_1_3
    feeds: list[list[np.ndarray]]             # per run: the model inputs
    expected: list[list[np.ndarray]]          # per run: the outputs, as the reference gave them
    tolerances: list[tuple[float, float]]     # per output: (rtol, atol); (0, 0) is exact
    capacities: list[int]
    path: str                                 # how to execute it, and on which device
    fusion: bool
    specialise: bool
    listing: str

    def __repr__(self) -> str:
        return f"Graph(path={self.path}, fusion={self.fusion}, specialise={self.specialise})\n{self.listing}"

    def fingerprint(self) -> str:
        """Equal for equal graphs: the listing and the input values."""
        digest = hashlib.sha1(repr(self).encode())
        for feeds in self.feeds:
            for arr in feeds:
                digest.update(arr.tobytes())
        return digest.hexdigest()

    def _repr_pretty_(self, printer, cycle: bool) -> None:
        """How hypothesis shows a falsifying graph: its listing, not its arrays."""
        printer.text(repr(self))


class Gen:
    """One graph being drawn (hypothesis draws the structure, a seeded numpy generator the data)."""

    def __init__(self, draw) -> None:
        self.draw = draw
        # seeded by several draws: hypothesis repeats single integers (0, boundaries) often
        self.rng = np.random.default_rng(draw(st.lists(st.integers(0, 2 ** 32 - 1), min_size=4, max_size=4)))
        self.b = ModelBuilder()
        self.pool: list[Tensor] = []
        self.feeds: dict[int, tuple[np.ndarray, ...]] = {}
        self.consumed: set[int] = set()
        self.computed: set[int] = set()     # operation outputs
        self.lines: list[str] = []
        self.ops = 0
        self.main = draw(st.sampled_from(MAIN_TYPES))

    # ---- drawing ----------------------------------------------------------------------------
    def between(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))

    def coin(self, p: float = 0.5) -> bool:
        return self.draw(st.integers(0, 99)) < p * 100

    def choice(self, seq: Sequence):
        return self.draw(st.sampled_from(list(seq)))

    def data(self, t: int, shape: Shape, lo: float = -2.0, hi: float = 2.0, nonzero: bool = False) -> np.ndarray:
        """Modest values: floats on a grid of 1/4 in [lo, hi] (sums and products stay exact), small
        integers, any quantized value, random booleans; `nonzero`: |value| in [lo, hi], either sign."""
        if t in QUANTS:
            return self.rng.integers(*quant_range(t), size=shape, endpoint=True).astype(dtype_of(t))
        if t == B8:
            return self.rng.random(shape) < 0.5
        step = 0.25 if t in FLOATS else 1.0
        v = self.rng.integers(round(lo / step), round(hi / step), size=shape, endpoint=True) * step
        if nonzero:
            v = v * self.rng.choice([-1, 1], size=shape)
        return v.astype(dtype_of(t))

    def quant(self, t: int) -> tuple[float, int]:
        if t not in QUANTS:
            return 0.0, 0
        lo, hi = quant_range(t)
        return self.choice(SCALES), self.choice([0, (lo + hi + 1) // 2, self.between(lo, hi)])

    def shapes(self, rank: int | None = None, lo: int = 1, hi: int = 5) -> tuple[Shape, ...]:
        """Per-run shapes of a new input: a later run may change some extents."""
        base = tuple(self.between(lo, hi) for _ in range(rank or self.between(1, 4)))
        out = [base]
        for _ in range(1, RUNS):
            vary = self.coin(0.4)
            out.append(tuple(self.between(lo, hi) if vary and self.coin() else d for d in base))
        return tuple(out)

    def declared(self, shapes: Sequence[Shape]) -> list[int]:
        """The model's dimensions: extents that differ between runs are 0, others sometimes, and
        now and then no dimensions at all."""
        if self.coin(0.05):
            return []
        return [s[0] if len(set(s)) == 1 and self.coin(0.8) else 0 for s in zip(*shapes)]

    def fresh(self, t: int, shapes: Sequence[Shape], lo: float | None = None, hi: float | None = None,
              nonzero: bool = False) -> Tensor:
        """A new model input (added to the model when an operation that reads it is kept); values
        in [lo, hi], by default [-2, 2] (int32: [-8, 8])."""
        scale, zp = self.quant(t)
        wide = 8.0 if t == I32 else 2.0
        lo, hi = -wide if lo is None else lo, wide if hi is None else hi
        values = tuple(self.data(t, s, lo, hi, nonzero) for s in shapes)
        return Tensor(-1, t, values, scale, zp, 0.0, self.declared(shapes))

    def pick(self, types: Sequence[int], ok=lambda t: True) -> Tensor | None:
        """A tensor of the graph (the newest half the time, so chains grow)."""
        cands = [t for t in self.pool if t.type in types and ok(t)]
        if not cands:
            return None
        return cands[-1] if self.coin() else self.choice(cands)

    def source(self, types: Sequence[int], ok=lambda t: True, lo: float | None = None,
               hi: float | None = None) -> Tensor | None:
        """An operation's data input: a tensor of the graph, or sometimes a new input."""
        x = self.pick(types, ok)
        if x is None and types and self.coin(0.6):
            t = self.main if self.main in types else self.choice(types)
            shapes = self.shapes()
            if len(set(shapes)) == 1 and self.coin(0.15):   # the compiler folds what it feeds
                x = self.fresh(t, shapes[:1], lo, hi)
                x.values, x.constant, x.dims = x.values * RUNS, True, list(shapes[0])
            else:
                x = self.fresh(t, shapes, lo, hi)
            return x if ok(x) else None
        return x

    def per_run(self, x: Tensor, fn):
        """fn(shape) drawn for each run; a run with run 0's shape may keep run 0's draw."""
        first = fn(x.shapes[0])
        return (first,) + tuple(first if s == x.shapes[0] and self.coin() else fn(s) for s in x.shapes[1:])

    def param(self, values: Sequence, scalar: bool = False) -> Param:
        values = tuple(np.asarray(v, np.int32) for v in values)
        same = all(np.array_equal(v, values[0]) for v in values)
        options = ["const"] * 3 if same else []
        options.append("input")
        if not scalar:
            options += ["add", "sub"]
            if all(_quad_choices(column) for column in self._columns(values)):
                options += ["quad"] * 2
        return Param(values, self.choice(options), scalar)

    @staticmethod
    def _columns(values: Sequence[np.ndarray]) -> list[list[int]]:
        """Each element's values in the runs."""
        return np.stack([v.reshape(-1) for v in values], axis=1).tolist()

    def axis_param(self, axis: int, rank: int) -> Param:
        """A constant axis, sometimes written negative, sometimes a model input."""
        return self.param([axis - rank if self.coin(0.3) else axis] * RUNS, scalar=True)

    # ---- adding operations ------------------------------------------------------------------
    def _operand(self, slot: Slot) -> Operand:
        if isinstance(slot, Tensor):
            if slot.operand >= 0:
                return self.b.operands[slot.operand]
            life = OperandLifeTime.CONSTANT_COPY if slot.constant else OperandLifeTime.SUBGRAPH_INPUT
            return Operand(T(slot.type), slot.dims, 0, slot.scale, slot.zero_point, life)
        if isinstance(slot, Omitted):
            return Operand(T(slot.type), [], 0, 0.0, 0, OperandLifeTime.NO_VALUE)
        if isinstance(slot, Param):
            life = OperandLifeTime.CONSTANT_COPY if slot.encoding == "const" else OperandLifeTime.TEMPORARY_VARIABLE
            return Operand(T(slot.type), list(slot.values[0].shape), 0, 0.0, 0, life)
        extra = None
        if slot.channel_quant is not None:
            extra = OperandExtraParams(channelQuant=SymmPerChannelQuantParams(*slot.channel_quant))
        return Operand(T(slot.type), list(slot.value.shape), 0, slot.scale, slot.zero_point,
                       OperandLifeTime.CONSTANT_COPY, DataLocation(), extra)

    @staticmethod
    def _value(slot: Slot, run: int) -> np.ndarray | None:
        if isinstance(slot, (Tensor, Param)):
            return slot.values[run]
        if isinstance(slot, Const):
            return np.asarray(slot.value, dtype_of(slot.type))
        return None

    def evaluate(self, op: OperationType, slots: Sequence[Slot],
                 outs: Sequence[tuple[int, float, int]]) -> list[tuple[np.ndarray, ...]]:
        """The reference's outputs in each run."""
        spec = REGISTRY[op]
        in_types, out_types = [s.type for s in slots], [o[0] for o in outs]
        assert spec.match(in_types, out_types) is not None, f"no {op.name} signature {in_types} -> {out_types}"
        operands = [self._operand(s) for s in slots]
        operands += [Operand(T(t), [], 0, scale, zp, OperandLifeTime.TEMPORARY_VARIABLE) for t, scale, zp in outs]
        operation = Operation(op, list(range(len(slots))), list(range(len(slots), len(operands))))
        results: list[list[np.ndarray]] = [[] for _ in outs]
        for run in range(RUNS):
            ctx = OpContext(operation, operands, [self._value(s, run) for s in slots], False, HalVersion.V1_3)
            try:
                with np.errstate(all="ignore"):
                    values = spec.reference(ctx)
            except OpError as e:
                raise AssertionError(f"generated an invalid {op.name} ({e}): "
                                     f"{self.describe(op, slots)}\n{self.listing()}") from e
            for k, v in enumerate(values):
                results[k].append(np.asarray(v).astype(dtype_of(outs[k][0]), copy=False))
        return [tuple(r) for r in results]

    @staticmethod
    def acceptable(t: int, values: Sequence[np.ndarray]) -> bool:
        """Small, non-empty, of one rank, finite and modest."""
        if len({v.ndim for v in values}) != 1 or not 1 <= values[0].ndim <= 4:
            return False
        if any(not 1 <= v.size <= MAX_ELEMENTS for v in values):
            return False
        if t in LIMIT:
            return all(np.all(np.isfinite(v)) and np.abs(v.astype(np.float64)).max() <= LIMIT[t] for v in values)
        return True

    def apply(self, op: OperationType, slots: Sequence[Slot], outs: Sequence[tuple[int, float, int]],
              err=None) -> list[Tensor] | None:
        """Add the operation when its outputs are acceptable; `err(values)` gives the outputs'
        error bounds (default: exact)."""
        values = self.evaluate(op, slots, outs)
        if not all(self.acceptable(o[0], v) for o, v in zip(outs, values)):
            return None
        errs = err(values) if err is not None else [0.0] * len(outs)
        inputs = [self._encode(s) for s in slots]
        specs = [(t, self.declared([v.shape for v in vals]), scale, zp) for (t, scale, zp), vals in zip(outs, values)]
        indexes = self.b.operation(op, inputs, specs)
        tensors = [Tensor(i, t, vals, scale, zp, e, dims)
                   for i, (t, dims, scale, zp), vals, e in zip(indexes, specs, values, errs)]
        self.consumed.update(s.operand for s in slots if isinstance(s, Tensor))
        self.computed.update(indexes)
        self.pool.extend(tensors)
        self.ops += 1
        self.lines.append(f"{', '.join(self.name(t) for t in tensors)} = {self.describe(op, slots)}")
        return tensors

    def adopt(self, x: Tensor) -> int:
        """Add a new input (or constant) to the model, once."""
        if x.operand < 0:
            if x.constant:
                x.operand = self.b.constant(x.type, x.values[0], x.scale, x.zero_point)
            else:
                x.operand = self.b.input(x.type, x.dims, x.scale, x.zero_point)
                self.feeds[x.operand] = x.values
            self.pool.append(x)
            self.lines.append(f"{self.name(x)} = {'constant' if x.constant else 'input'}")
        return x.operand

    def _encode(self, slot: Slot) -> int:
        b = self.b
        if isinstance(slot, Tensor):
            return self.adopt(slot)
        if isinstance(slot, Omitted):
            return b.omitted(slot.type)
        if isinstance(slot, Const):
            return b.constant(slot.type, slot.value, slot.scale, slot.zero_point, slot.channel_quant)
        values, shape = slot.values, list(slot.values[0].shape)
        if slot.encoding == "const":
            return b.constant(slot.type, values[0])
        none = b.constant(T.INT32, 0)
        if slot.encoding == "quad":
            ks = [self.choice(_quad_choices(column)) for column in self._columns(values)]
            k = [np.array([e[run] for e in ks], np.int32).reshape(shape) for run in range(RUNS)]
            c = values[0] - k[0] * (k[0] - 1)
            ki = b.input(I32, shape)
            self.feeds[ki] = tuple(k)
            km1 = b.op(OperationType.SUB, [ki, b.constant(I32, [1]), none], I32, shape)
            q = b.op(OperationType.MUL, [ki, km1, none], I32, shape)
            return b.op(OperationType.ADD, [q, b.constant(I32, c), none], I32, shape)
        if slot.encoding == "input":
            i = b.input(slot.type, shape)
            self.feeds[i] = values
            return i
        c = self.rng.integers(-3, 4, size=shape).astype(np.int32)
        sign = 1 if slot.encoding == "add" else -1
        i = b.input(I32, shape)
        self.feeds[i] = tuple(v - sign * c for v in values)
        return b.op(OperationType.ADD if sign > 0 else OperationType.SUB, [i, b.constant(I32, c), none], I32, shape)

    # ---- listing ----------------------------------------------------------------------------
    def name(self, t: Tensor) -> str:
        quant = f" {t.scale:g}/{t.zero_point}" if t.type in QUANTS else ""
        err = f" err {t.err:.2g}" if t.err else ""
        return f"t{t.operand}:{SHORT[t.type]}{quant} {list(t.shapes)} dims {t.dims}{err}"

    def describe(self, op: OperationType, slots: Sequence[Slot]) -> str:
        def one(s: Slot) -> str:
            if isinstance(s, Tensor):
                return f"t{s.operand}"
            if isinstance(s, Omitted):
                return "omitted"
            if isinstance(s, Param):
                vals = [v.tolist() for v in s.values]
                return f"{s.encoding}{vals if s.encoding != 'const' else vals[0]}"
            v = s.value.tolist() if s.value.size <= 8 else f"{SHORT.get(s.type, s.type)}{list(s.value.shape)}"
            return f"const {v}"
        return f"{op.name}({', '.join(one(s) for s in slots)})"

    def listing(self) -> str:
        return "\n".join(self.lines)

    # ---- error bounds -----------------------------------------------------------------------
    @staticmethod
    def rounding(t: int, values: Sequence[np.ndarray], scale: float | None = None) -> float:
        """A rounding operation's contribution: a few ulps of `scale` (default: the result)."""
        if t not in ROUNDING:
            return 0.0
        mag = scale if scale is not None else max(float(np.abs(v.astype(np.float64)).max()) for v in values)
        return ROUNDING[t] * mag

    def finish(self) -> Graph:
        results = [t for t in self.pool if t.operand in self.computed]
        outs = [t for t in results if t.operand not in self.consumed]
        outs += [t for t in results if t.operand in self.consumed and self.coin(0.15)]
        for t in outs:
            self.b.output(t.operand)
        model = self.b.build()
        try:
            validate_model(model)
        except ValidationError as e:
            raise AssertionError(f"generated an invalid model: {e}\n{self.listing()}") from e
        feeds = [[self.feeds[i][run] for i in self.b.inputs] for run in range(RUNS)]
        expected = [[t.values[run] for t in outs] for run in range(RUNS)]
        tolerances = [(RTOL[t.type], 2 * t.err) if t.type in FLOATS else (0.0, 0.0) for t in outs]
        capacities = [max(v.nbytes for v in t.values) + self.choice([0, 0, 8]) for t in outs]
        listing = self.listing() + "\noutputs: " + ", ".join(f"t{t.operand}" for t in outs)
        fusion, specialise = self.choice([(True, True)] * 4 + [(False, True), (True, False)])
        return Graph(model, feeds, expected, tolerances, capacities, self.choice(PATHS), fusion, specialise, listing)
