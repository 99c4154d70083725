"""The OpenCL backend's GEMM schedules (kernels/gemm.cl): on CPU devices explicit-vector
micro-kernels, on GPUs tiles of C in local memory; which schedule, vector widths and launch a
GEMM takes, and how a packed B's rows are padded on a CPU device."""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..ir.schedule import Grid
from .base import kernel_template

if TYPE_CHECKING:
    from ..compiler.steps import GemmStep

GEMM_ROWS = 4  # rows of C per work-item of nn_gemm_vec, as in kernels/gemm.cl (ROWS there)
# at most so many columns of C per work-item of nn_gemm_vec (VW * NV there), by vector width:
# 4 rows by 4 vectors of 16 or 6 of 8, 16 to 24 accumulators in registers
GEMM_COLS = {16: 64, 8: 48}
NT_BLOCK = 4   # rows and columns of C per work-item of nn_gemm_nt_vec (NT_ROWS, NT_COLS there)
GPU_TILE, GPU_TILE_ROWS = 32, 8   # the GPU kernels' tile of C and work-group (TS and RTS there)
# Work-items per work-group of the CPU GEMMs, along the grid's first dimension. Left to itself,
# PoCL makes one work-group of up to 4096 work-items, and one of its threads runs a whole group:
# MobileNet v2's 7x7 layers (13 x 40 work-items) ran on one core, 2x slower. In a run of its 12
# GEMM shapes back to back, groups of 4 took 1.61 ms, 1, 16 and 8192 / 8 groups 1.64-1.71,
# PoCL's choice 2.2.
CPU_GEMM_GROUP = 4
# A constant B given transposed with K >= 512 is packed as [K, N] on a CPU device where the copy
# takes at most so many bytes (MobileNets' and EfficientNet's 1x1 convolutions of 576 to 1152
# channels; larger weights are read where they are). On PoCL, back to back, packed / dot products
# along K: 49 x 96 x 576 with a residual and a scaled A 20.9 / 37.5 us, 196 x 96 x 576 0.86,
# 49 x 160 x 960 0.95, 49 x 192 x 672 0.87, 49 x 192 x 1152 1.03.
CPU_GEMM_PACK_BYTES = 1 << 20


def cpu_gemm_row_stride(n: int) -> int:
    """The row stride of a packed B on a CPU device: N padded with zeros to whole vectors of 8 up
    to 16 columns, else to the fewest columns that make whole blocks of 2 or 3 vectors of 16
    (a multiple of 32 or of 48), which nn_gemm_vec computes 16 lanes wide. On PoCL, in a run of
    each GEMM back to back (M x N x K, us as it was -> padded): 196 x 40 x 240, 21.1 (8 lanes,
    blocks of 5) -> 15.1 (48); 784 x 40 x 144, 43.8 -> 32.8 (48); 196 x 80 x 240, 36.7 -> 29.5
    (96); 196 x 112 x 480, 91.8 (1 vector of 16) -> 68.4 (128); 784 x 24 x 144, 30.0 -> 24.1 (32);
    196 x 72 x 288, 38.9 -> 31.0 (96); 196 x 120 x 40, 14.7 -> 10.1 (128). (N = 28 had taken
    153 us with a scalar tail of 4 columns, 47 padded to 32.)"""
    if n <= 16:
        return -(-n // 8) * 8
    return min(-(-n // 32) * 32, -(-n // 48) * 48)


def gemm_vectors(n: int) -> tuple[int, int]:
    """(VW, NV) of nn_gemm_vec for N columns: blocks of 2 to 4 vectors of 16 where they divide N
    (the most of them), else the most columns a work-item can take, up to GEMM_COLS of its width,
    in whole blocks of NV vectors of VW (16 before 8 on a tie); N that 8 does not divide takes one
    vector of 8 and a scalar tail (the compiler pads a packed B's rows: cpu_gemm_row_stride). On
    PoCL, blocks of 48 and 64 columns rather than 32 or 16: N = 64, 144 and 240 GEMMs 20-35%
    faster (a row's broadcast feeding more multiply-adds); wider blocks of 8-lane vectors (7 of
    them for N = 672, 5 for N = 160) were slower than 2 or 3 of 16."""
    sixteens = [nv for nv in range(2, GEMM_COLS[16] // 16 + 1) if n % (16 * nv) == 0]
    if sixteens:
        return 16, max(sixteens)
    blocks = [(vw * nv, vw, nv) for vw in (16, 8) for nv in range(1, GEMM_COLS[vw] // vw + 1) if n % (vw * nv) == 0]
    return max(blocks, key=lambda b: (b[0], b[1]))[1:] if blocks else (8, 1)


def nt_rows(m: int) -> int:
    """NT_ROWS of nn_gemm_nt_vec for M rows: NT_BLOCK, or 1 for one row (a classifier's fully
    connected layers), which blocks of 4 would compute 4 times over. On PoCL, alone, one row at a
    time takes 0.57-0.74 of the time: 1000 x 1024 and 1024 x 576 weights, with the weights in
    cache and not."""
    return 1 if m == 1 else NT_BLOCK


def cpu_gemm_grid(x: int, y: int) -> Grid:
    """An x by y grid of a CPU GEMM in work-groups of CPU_GEMM_GROUP by 1 (the kernels return
    at once past their last block)."""
    return Grid((-(-x // CPU_GEMM_GROUP) * CPU_GEMM_GROUP, y), (CPU_GEMM_GROUP, 1))


def gemm_unit(cpu: bool, m: int, n: int, b_transposed: bool, epilogue: bool, residual: bool = False,
              then: str | None = None, ldb: int | None = None, scale: bool = False,
              half: bool = False, half_c: bool = False, half_scale: bool = False) -> tuple[str, str, Grid]:
    """(source, kernel name, launch) of the GEMM schedule for a CPU device (`cpu`) or a GPU. On a CPU
    device, explicit-vector micro-kernels: B as [K, N] takes 4 rows by up to 64 columns
    (gemm_vectors); B transposed takes 4 by 4 dot products 16 lanes wide (1 by 4: nt_rows). On a GPU,
    32 x 32 tiles of C in local memory, 4 rows a work-item. With the epilogue, the same
    kernels add the bias and clamp as they store (and add a residual and clamp again, or
    pass the value to `then`, a folded kernel's function). With `ldb`, B's rows are padded to
    so many columns: the CPU kernel computes whole vectors of them and stores N. With `half`,
    A and B are float16, with `half_c` C, with `half_scale` the scale (the GPU kernels only)."""
    defines = "" if not epilogue else "#define EPILOGUE\n" + ("#define RESIDUAL\n" if residual else "")
    if ldb is not None:
        defines += f"#define LDB {ldb}\n"
    if scale:
        defines += "#define SCALE_A\n"
    text = defines + (then or "") + kernel_template("gemm.cl")
    if not cpu:
        types = {"AB_T": half, "C_T": half_c, "SCALE_T": half_scale}
        text = "".join(f"#define {name} half\n" for name, is_half in types.items() if is_half) + text
        tiles = Grid((-(-n // GPU_TILE) * GPU_TILE, -(-m // GPU_TILE) * GPU_TILE_ROWS), (GPU_TILE, GPU_TILE_ROWS))
        return text, "nn_gemm_nt_tiled" if b_transposed else "nn_gemm_tiled", tiles
    if half or half_c or half_scale:
        raise NotImplementedError("a CPU device's GEMM (kernels/gemm.cl nn_gemm_vec) takes float32 matrices")
    if b_transposed:
        rows = nt_rows(m)
        text = "#define VW 16\n" + ("" if rows == NT_BLOCK else f"#define NT_ROWS {rows}\n") + text
        return text, "nn_gemm_nt_vec", cpu_gemm_grid(-(-n // NT_BLOCK), -(-m // rows))
    vw, nv = gemm_vectors(ldb or n)
    text = f"#define VW {vw}\n#define NV {nv}\n" + text
    return text, "nn_gemm_vec", cpu_gemm_grid(-(-m // GEMM_ROWS), -(-n // (vw * nv)))


def step_source(cpu: bool, step: GemmStep, half_c: bool, half_scale: bool) -> str:
    """The source of gemm_unit for a compiler's GEMM step, as bind_gemm builds it (Target.gemm_source)."""
    return gemm_unit(cpu, step.m, step.n, step.b_transposed, step.bounds is not None, step.residual is not None,
                     step.then, step.ldb, step.scale_a, step.half, half_c, half_scale)[0]
