"""What a backend that compiles kernels tells the compiler about itself: a Target.

A backend module declares its targets beside the backend (backends/opencl.py, backends/cuda.py):
the C dialect its renderer writes, the schedule of its generated kernels (the frame around a
kernel's body and the grid it is launched over, decided together), the hand-written kernels it
has in place of generated ones, and the choices the lowering makes for it. The compiler and the
dumps read only this object, so a new backend adds a target in its own module and touches
nothing here."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from ..ir.kernel import Kernel
from ..ir.schedule import Schedule
from .render import CStyleRenderer


@dataclass(frozen=True, eq=False)
class Target:
    name: str                      # names the target in dumps and messages ("opencl", "cuda")
    renderer: CStyleRenderer       # the C dialect of its generated kernels
    suffix: str                    # a dumped kernel's file extension (".cl", ".cu")
    schedule: Schedule = Schedule()
    # operation kind → a template in kernels/ used in place of the generated kernel
    templates: Mapping[str, str] = field(default_factory=dict)
    # whether its GEMM adds a bias and clamps as it stores (kernels/gemm.cl's EPILOGUE)
    gemm_epilogue: bool = False
    # N -> the row stride of a constant B packed at prepare, N or more (GemmStep.ldb): its rows
    # padded with zeros, the GEMM then computes whole vectors past N and stores N columns;
    # None: rows of N
    gemm_row_stride: Callable[[int], int] | None = None
    # bytes up to which a constant B given transposed with K >= 512 is packed at prepare
    # as a shorter K's is (compiler/lower.py; 0: read where it is, in the model's own layout)
    gemm_pack_bytes: int = 0
    # multiply-adds from which a float convolution is a GEMM rather than a generated kernel
    gemm_min_work: int = 1 << 21
    # whether a relaxed model's float32 temporaries are stored as float16 (compiler/relaxed_storage.py)
    relaxed_storage: bool = False
    # whether its GEMM multiplies float16 matrices into float32 (a float16 temporary read as it is,
    # times its weights stored float16 at prepare); else a float16 A is copied to float32 first
    gemm_half_inputs: bool = False
    # whether its GEMM's epilogue (gemm_epilogue) stores a float16 C: an operation's output that is
    # a float16 temporary written once, not a float32 C and a kernel rounding it
    gemm_half_output: bool = False
    # a GEMM step (steps.GemmStep, which imports this module) -> the source of the unit the backend
    # builds for it, given whether C and the scale are float16 as the segment stores them
    # (GemmStep.half_storages); None for a library's call (cuBLAS). What `nngpu kernels` writes
    gemm_source: Callable[[Any, bool, bool], str | None] | None = None

    def render(self, kernel: Kernel) -> str:
        """The kernel alone as C, framed by this target's schedule."""
        return self.renderer.render_unit([kernel], self.schedule)

    def render_unit(self, kernels: list[Kernel]) -> str:
        """One translation unit of kernels, each framed by this target's schedule."""
        return self.renderer.render_unit(kernels, self.schedule)
