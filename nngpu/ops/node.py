"""OpNode: one operation as the compiler sees it, before it runs.

It is an OpContext whose values are only those known at compile time (constants, folded
values, values a plan is specialised on) plus the shapes of every operand. Shape functions,
parameter parsers and device implementations all read it. Asking for a value that is not
known raises NeedsValue: the shape (or kernel) depends on data, so the compiler waits for it.
Device implementations also use it to create derived constants, temporaries and library calls
(`constant`, `temp`, `gemm`, `materialize`), which the compiler's builder provides."""
from __future__ import annotations

from typing import TYPE_CHECKING, Mapping, Sequence

import numpy as np

from ..hal.types import Operand, Operation
from .lib.dtypes import is_tensor
from .registry import HalVersion, OpContext, OpError, OpSpec

if TYPE_CHECKING:
    from ..ir.tensor import BufferTensor, Compute, Stored


class NeedsValue(Exception):
    """A shape function or parser needs the run-time value of operand `operand`."""

    def __init__(self, operand: int):
        super().__init__(f"needs the value of operand {operand}")
        self.operand = operand


class DataDependent(Exception):
    """The output shapes depend on the values computed, known only once the operation has run."""


class OpNode(OpContext):
    def __init__(self, spec: OpSpec, index: int, operation: Operation, operands: Sequence[Operand],
                 values: Sequence[np.ndarray | None], shapes: Mapping[int, tuple[int, ...]],
                 relaxed: bool = False, version: HalVersion = HalVersion.V1_3, builder=None):
        super().__init__(operation, operands, values, relaxed, version)
        self.spec = spec
        self.index = index
        self.shapes = shapes
        self.builder = builder

    # ---- what shape functions read ----------------------------------------------------------
    def in_shape(self, i: int) -> tuple[int, ...]:
        shape = self.shapes.get(self.operation.inputs[i])
        if shape is None:
            raise OpError(f"input {i} has no value")
        return shape

    def given(self, i: int) -> bool:
        """Input i is present: its shape is known (an execution may leave a model input out)."""
        return not self.is_omitted(i) and self.operation.inputs[i] in self.shapes

    def out_shape(self, i: int) -> tuple[int, ...]:
        return self.shapes[self.operation.outputs[i]]

    def input(self, i: int) -> np.ndarray:
        v = self.values[i]
        if v is None:
            if self.is_omitted(i):
                raise OpError(f"input {i} is omitted")
            raise NeedsValue(self.operation.inputs[i])
        return v

    def scalar(self, i: int, default=None):
        if self.has_input(i):
            return self.values[i].reshape(-1)[0].item()
        if i < self.num_inputs and not self.is_omitted(i):
            raise NeedsValue(self.operation.inputs[i])
        return default

    def known(self, i: int) -> bool:
        """Input i is omitted or its value is known now."""
        return self.is_omitted(i) or self.values[i] is not None

    def is_constant(self, i: int) -> bool:
        """Known at compile time (a constant operand or a value the plan is specialised on)."""
        return i < self.num_inputs and self.values[i] is not None

    def output_shapes(self) -> list[tuple[int, ...]]:
        """Shapes of the outputs from the spec's shape function (DataDependent without one)."""
        if self.spec.shape is None:
            raise DataDependent(f"{self.spec.type.name} has no shape function")
        shapes = [tuple(int(d) for d in s) for s in self.spec.shape(self)]
        if len(shapes) != self.num_outputs:
            raise OpError(f"shape function gave {len(shapes)} shapes for {self.num_outputs} outputs")
        for k, s in enumerate(shapes):
            operand = self.out_operand(k)
            dims = operand.dimensions
            if not is_tensor(operand.type):
                shapes[k] = ()
            elif dims and (len(dims) != len(s) or any(d and d != v for d, v in zip(dims, s))):
                raise OpError(f"output {k} has shape {list(s)}, the model says {list(dims)}")
        return shapes

    # ---- what device implementations create (in `build` itself: a Compute's function runs ----
    # ---- later, once per use, when nothing can be created any more) --------------------------
    def _builder(self):
        if self.builder is None:
            raise RuntimeError(f"{self.spec.type.name}: constants and steps are created in build, "
                               "not inside a Compute's function")
        return self.builder

    def constant(self, value: np.ndarray, operand_type: int) -> "BufferTensor":
        """A constant in the layout the kernel reads best, uploaded once at prepare."""
        return self._builder().constant(np.ascontiguousarray(value), operand_type)

    def temp(self, shape: Sequence[int], storage: str = "float") -> "BufferTensor":
        return self._builder().temp(tuple(shape), storage)

    def materialize(self, compute: "Compute", name: str, values: bool = False) -> "BufferTensor":
        """A kernel storing `compute` into a temporary before this operation's kernel. `values`:
        it holds the float32 values of this operation's inputs (a copy, a patch matrix), which a
        relaxed model may store as float16 where the target stores its temporaries so; a
        statistic (a sum of squares may pass float16's range) stays float32."""
        return self._builder().materialize(compute, name, values)

    def out_storage(self, i: int) -> str:
        """How output i is stored on the target: its type's storage, or "half" for a relaxed
        model's float32 temporary where the target stores those as float16."""
        return self._builder().storage_of_output(i)

    def has_library(self, kind: str) -> bool:
        """Whether the target has a hand-written kernel for `kind` (compiler/library.py)."""
        return self._builder().has_library(kind)

    def gemm_min_work(self) -> int:
        """Multiply-adds from which the target runs a float convolution as a GEMM call."""
        return self._builder().gemm_min_work()

    def library(self, kind: str, inputs: list["BufferTensor"], size: int, defines: dict[str, object],
                temp: tuple[int, ...] | None = None, then_row: int | None = None,
                group: int | None = None, values: bool = False) -> "BufferTensor":
        """The hand-written kernel for `kind`, specialised by `defines`, over a 1-D grid of `size`:
        it reads `inputs` and writes the operation's (one) output itself, returned; or, given a
        `temp` shape, a new float temporary of that shape (`values`: as materialize's). `then_row`:
        the template can call a folded elementwise kernel on the vectors it stores, each within a
        row of that many elements. `group`: its work-groups' size, where not the target's."""
        return self._builder().library(kind, inputs, size, defines, temp, then_row, group, values)

    def gemm(self, a: "BufferTensor", b: "BufferTensor", m: int, n: int, k: int, b_transposed: bool = False,
             epilogue: tuple["BufferTensor", tuple[float, float]] | None = None) -> "BufferTensor | Stored":
        """C[m, n] = A[m, k] @ B[k, n] by the backend's float32 GEMM, into a temporary; with
        b_transposed, `b` is B as [n, k] (a weight matrix in its own layout: no packed copy). With
        epilogue (bias [n], (lo, hi)), a target whose GEMM has one writes clamp(C + bias, lo, hi)
        as the operation's output itself and gives Stored; else C comes back for the caller's.
        A relaxed model's GEMM may take float16 inputs (Backend.relaxed_precision)."""
        return self._builder().gemm(a, b, m, n, k, b_transposed, epilogue, self.relaxed)

