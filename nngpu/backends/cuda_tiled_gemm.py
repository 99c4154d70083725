"""The CUDA target's GEMM with an epilogue: one kernel of kernels/gemm.cu that stores the
convolution's or fully connected layer's output once (the bias and activation, a residual ADD
or a folded elementwise kernel, a float16 C, A's columns scaled as it reads them). cuBLAS
(cublas_gemm.py) has no such epilogue, so there the same work was a GEMM and then a kernel that
read C again. A bare GEMM stays cuBLAS's.

Shared by the CUDA backend and the host harness (tests/cuda_host), so the harness builds and
runs the very units the GPU gets."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable

from ..compiler.render import CStyleRenderer, float_literal
from ..ir.narrow import INT_MAX
from ..ir.schedule import Grid
from .base import kernel_template

if TYPE_CHECKING:
    from ..compiler.steps import GemmStep

BLOCK = 256   # threads a block of nn_gemm_tiled (kernels/gemm.cu: TS x RTS, its __launch_bounds__)
TILE = 32     # rows and columns of C a block computes (TS there)
KERNEL = "nn_gemm_tiled"


def _matrix_elements(m: int, n: int, k: int, b_transposed: bool, ldb: int | None) -> tuple[int, int, int]:
    """The elements of A, of B as stored ([N, K], or K rows of LDB) and of C."""
    return m * k, (n * k if b_transposed else k * (ldb or n)), m * n


def tiled_gemm_unit(renderer: CStyleRenderer, m: int, n: int, k: int, b_transposed: bool,
                    bounds: tuple[float, ...] | None, then: str | None = None, ldb: int | None = None,
                    scale: bool = False, half: bool = False, half_c: bool = False,
                    half_scale: bool = False) -> tuple[str, Grid]:
    """(source, launch) of kernels/gemm.cu for one GEMM. `bounds`: None (no epilogue), (lo, hi)
    after the bias, or (lo, hi, lo2, hi2) with a residual; `then`: a folded kernel's source
    (compiler/render_epilogue.py); `ldb`: B's row stride; `scale`: A's columns are scaled;
    `half`, `half_c`, `half_scale`: A and B, C, the scale are float16."""
    wide = max(_matrix_elements(m, n, k, b_transposed, ldb)) > INT_MAX
    defines: dict[str, Any] = {"M": m, "N": n, "K": k, "IDX": "long long" if wide else "int"}
    if ldb is not None:
        defines["LDB"] = ldb
    if b_transposed:
        defines["B_T"] = ""
    if bounds is not None:
        defines["EPILOGUE"] = ""
        names = ("LO", "HI", "LO2", "HI2")
        defines.update({name: float_literal(x) for name, x in zip(names, bounds)})
        if len(bounds) > 2:
            defines["RESIDUAL"] = ""
    if scale:
        defines["SCALE_A"] = ""
    defines.update({name: "half" for name, is_half in (("AB_T", half), ("C_T", half_c), ("SCALE_T", half_scale))
                    if is_half})
    lines = renderer.prelude({"half"} if half or half_c or half_scale else set())
    lines += [f"#define {name} {value}".rstrip() for name, value in defines.items()]
    source = "\n".join(lines) + "\n" + (then or "") + kernel_template("gemm.cu")
    blocks = -(-m // TILE) * -(-n // TILE)
    return source, Grid((blocks * BLOCK,), (BLOCK,))


def is_bare(epilogue: bool, then: bool, scale: bool, half_c: bool) -> bool:
    """Whether a GEMM is bare, cuBLAS's call: no bias and clamp, no folded kernel, no scaled A and
    a float32 C. What bind_gemm binds and what step_source writes both follow it."""
    return not (epilogue or then or scale or half_c)


def step_source(renderer: CStyleRenderer, step: GemmStep, half_c: bool, half_scale: bool) -> str | None:
    """The unit of tiled_gemm_unit for a compiler's GEMM step, as bind_gemm builds it; None for a
    bare GEMM, cuBLAS's call (Target.gemm_source)."""
    if is_bare(step.bounds is not None, step.then is not None, step.scale_a, half_c):
        return None
    bounds = None if step.bounds is None else (*step.bounds, *(step.residual or ()))
    return tiled_gemm_unit(renderer, step.m, step.n, step.k, step.b_transposed, bounds, step.then, step.ldb,
                           step.scale_a, step.half, half_c, half_scale)[0]


class TiledGemmBinding:
    """bind_gemm for a backend of the CUDA target (before its Backend base): a GEMM with an
    epilogue or a scaled A is kernels/gemm.cu's, compiled and launched as the backend does any
    unit; a bare one is the base's call of `gemm` (cuBLAS)."""

    target: Any
    compile: Callable[..., list]
    bind: Callable[..., Callable[[], Any]]

    def bind_gemm(self, a: Any, b: Any, c: Any, m: int, n: int, k: int, b_transposed: bool = False,
                  epilogue: tuple | None = None, then: tuple[str, list] | None = None, ldb: int | None = None,
                  scale: Any = None, relaxed: bool = False, half: bool = False, half_c: bool = False,
                  half_scale: bool = False) -> Callable[[], Any]:
        if is_bare(epilogue is not None, then is not None, scale is not None, half_c):
            return super().bind_gemm(a, b, c, m, n, k, b_transposed, epilogue, then, ldb, scale,  # type: ignore[misc]
                                     relaxed, half, half_c, half_scale)
        if then is not None and (epilogue is None or len(epilogue) != 3):
            raise ValueError("a folded kernel follows a GEMM's bias and activation, and no residual")
        # (bias, lo, hi[, residual, lo2, hi2]): the buffers are arguments, the bounds #defines
        bounds = None if epilogue is None else tuple(float(x) for i, x in enumerate(epilogue) if i % 3)
        source, grid = tiled_gemm_unit(self.target.renderer, m, n, k, b_transposed, bounds, then and then[0], ldb,
                                       scale is not None, half, half_c, half_scale)
        buffers = [] if epilogue is None else list(epilogue[::3])
        ab_size = 2 if half else 4
        a_elements, b_elements, c_elements = _matrix_elements(m, n, k, b_transposed, ldb)
        needed = [("A", a, a_elements * ab_size), ("B", b, b_elements * ab_size),
                  ("C", c, c_elements * (2 if half_c else 4)),
                  *zip(("bias", "residual"), buffers, (n * 4, c_elements * 4)),
                  *([] if scale is None else [("scale", scale, k * (2 if half_scale else 4))])]
        for name, buf, nbytes in needed:   # the kernel takes pointers: a plan's mistake stops here
            if buf.nbytes < nbytes:
                raise ValueError(f"{name}: {nbytes} bytes needed for a GEMM of {m} x {n} x {k}, its buffer has "
                                 f"{buf.nbytes}")
        kernel = self.compile(source, [KERNEL])[0]
        args = [a, b, c, *buffers, *(then[1] if then else ()), *([] if scale is None else [scale])]
        return self.bind(kernel, grid, args)
