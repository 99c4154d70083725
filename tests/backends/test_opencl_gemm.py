"""kernels/gemm.cl on the OpenCL device here: every schedule (the GPUs' tiles in local memory and
the CPU devices' vectors),
with B as [K, N] and transposed, plain, with the bias-and-clamp epilogue (and a residual) and with
A's columns scaled as they are read, against numpy on
sizes past the last whole block and vector;
and a convolution's or fully connected layer's weights read by the GEMM in place, in the model's
own bytes, on a device that shares host memory."""
from __future__ import annotations

import numpy as np
import pytest

from nngpu.backends import device_backends
from nngpu.backends.base import kernel_template
from nngpu.backends.opencl import CPU_TARGET
from nngpu.backends.opencl_gemm import (CPU_GEMM_GROUP, GEMM_ROWS, GPU_TILE, GPU_TILE_ROWS, NT_BLOCK, cpu_gemm_grid,
                                        cpu_gemm_row_stride, gemm_unit, gemm_vectors, nt_rows)
from nngpu.compiler.steps import GemmStep
from nngpu.driver.device import Device

from ..compiler.test_gemm import CASES
from .test_opencl import plan_of

pytestmark = pytest.mark.skipif("opencl" not in device_backends(), reason="no OpenCL device here")

def _dot_blocks(rows: int):
    def launch(m: int, n: int):
        grid = cpu_gemm_grid(-(-n // NT_BLOCK), -(-m // rows))
        return grid.threads, grid.group
    return launch


def _row_blocks(vw: int, nv: int):
    def launch(m: int, n: int):
        grid = cpu_gemm_grid(-(-m // GEMM_ROWS), -(-n // (vw * nv)))
        return grid.threads, grid.group
    return launch


def _tiles(m: int, n: int):
    return (-(-n // GPU_TILE) * GPU_TILE, -(-m // GPU_TILE) * GPU_TILE_ROWS), (GPU_TILE, GPU_TILE_ROWS)


# name, #defines before the source, B transposed, (global, local) for (m, n). The CPU kernel on
# [K, N] runs with each vector width and count the backend may choose (gemm_vectors).
SCHEDULES = [pytest.param("nn_gemm_tiled", "", False, _tiles, id="tiled"),
             pytest.param("nn_gemm_nt_tiled", "", True, _tiles, id="nt_tiled"),
             *[pytest.param("nn_gemm_vec", f"#define VW {vw}\n#define NV {nv}\n", False, _row_blocks(vw, nv),
                            id=f"vec_{nv}x{vw}") for vw, nv in [(8, 1), (8, 3), (8, 5), (8, 6), (16, 1), (16, 2),
                                                                     (16, 3), (16, 4)]],
             pytest.param("nn_gemm_nt_vec", "#define VW 16\n", True, _dot_blocks(NT_BLOCK), id="nt_vec"),
             pytest.param("nn_gemm_nt_vec", "#define VW 16\n#define NT_ROWS 1\n", True, _dot_blocks(1), id="nt_vec_row")]
SIZES = [(1, 1, 1), (9, 37, 33), (64, 48, 16), (13, 100, 70), (70, 33, 65), (6, 48, 40)]


@pytest.fixture(scope="module")
def backend():
    return Device("opencl").backend


@pytest.mark.parametrize("epilogue", ["plain", "epilogue", "residual", "scaled-a"])
@pytest.mark.parametrize("m, n, k", SIZES)
@pytest.mark.parametrize("name, defines, b_transposed, launch", SCHEDULES)
def test_schedule_matches_numpy(backend, name, defines, b_transposed, launch, m, n, k, epilogue):
    rng = np.random.default_rng(m * 1000 + n + k)
    a, b = rng.standard_normal((m, k), dtype=np.float32), rng.standard_normal((k, n), dtype=np.float32)
    bias, residual = rng.standard_normal(n, dtype=np.float32), rng.standard_normal((m, n), dtype=np.float32)
    scale = rng.standard_normal(k, dtype=np.float32)
    source = defines + {"plain": "", "epilogue": "#define EPILOGUE\n", "residual": "#define EPILOGUE\n#define RESIDUAL\n",
                        "scaled-a": "#define SCALE_A\n"}[epilogue]
    kernel = backend.compile(source + kernel_template("gemm.cl"), [name])[0]
    bufs = [backend.alloc(x.nbytes) for x in (a, b, np.empty((m, n), np.float32), bias, residual, scale)]
    for buf, x in zip(bufs, (a, np.ascontiguousarray(b.T) if b_transposed else b, None, bias, residual, scale)):
        if x is not None:
            backend.upload(buf, x)
    extra = [] if epilogue in ("plain", "scaled-a") else [bufs[3], np.float32(-0.5), np.float32(1.5)]  # a clamp that bites both ways
    if epilogue == "residual":
        extra += [bufs[4], np.float32(-1.0), np.float32(np.inf)]
    if epilogue == "scaled-a":
        extra += [bufs[5]]
    kernel.set_args(*bufs[:3], np.int32(m), np.int32(n), np.int32(k), *extra)
    backend.cl.enqueue_nd_range_kernel(backend.queue, kernel, *launch(m, n))
    c = np.empty((m, n), np.float32)
    backend.download(bufs[2], c)
    want = (a * scale) @ b if epilogue == "scaled-a" else a @ b
    if epilogue in ("epilogue", "residual"):
        want = np.clip(want + bias, -0.5, 1.5)
    if epilogue == "residual":
        want = np.maximum(want + residual, -1.0)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("stride", [lambda n: -(-n // 8) * 8, cpu_gemm_row_stride], ids=["eights", "row-stride"])
@pytest.mark.parametrize("epilogue", ["plain", "epilogue"])
@pytest.mark.parametrize("m, n, k", [(1, 1, 1), (9, 37, 33), (70, 33, 65), (6, 20, 40), (64, 28, 24), (5, 45, 16),
                                     (9, 104, 20)])
@pytest.mark.parametrize("name, defines, b_transposed, launch", [s for s in SCHEDULES if not s.values[2]])
def test_rows_of_b_padded_past_n(backend, name, defines, b_transposed, launch, m, n, k, epilogue, stride):
    """B's rows padded (LDB; the compiler's packed weights on a CPU device) to a multiple of 8 or
    to the backend's stride, NaN in the padding: the columns past N are computed, never stored,
    and change nothing (N = 28 and 45 store the vector across N as 8 + 4 and 8 + 4 + 1 columns;
    N = 104 padded to 128 has a whole vector of 16 past N)."""
    ldb = stride(n)
    rng = np.random.default_rng(m + n + k)
    a, b = rng.standard_normal((m, k), dtype=np.float32), rng.standard_normal((k, n), dtype=np.float32)
    padded = np.full((k, ldb), np.nan, np.float32)
    padded[:, :n] = b
    bias = rng.standard_normal(n, dtype=np.float32)
    source = f"#define LDB {ldb}\n" + defines + ("#define EPILOGUE\n" if epilogue == "epilogue" else "")
    kernel = backend.compile(source + kernel_template("gemm.cl"), [name])[0]
    bufs = [backend.alloc(x.nbytes) for x in (a, padded, np.empty((m, n), np.float32), bias)]
    for buf, x in zip(bufs, (a, padded, None, bias)):
        if x is not None:
            backend.upload(buf, x)
    extra = [] if epilogue == "plain" else [bufs[3], np.float32(-0.5), np.float32(1.5)]
    kernel.set_args(*bufs[:3], np.int32(m), np.int32(n), np.int32(k), *extra)
    backend.cl.enqueue_nd_range_kernel(backend.queue, kernel, *launch(m, ldb))
    c = np.empty((m, n), np.float32)
    backend.download(bufs[2], c)
    want = a @ b if epilogue == "plain" else np.clip(a @ b + bias, -0.5, 1.5)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("x, y", [(1, 1), (13, 40), (3136, 3), (4, 7)])
def test_cpu_gemms_take_small_work_groups(x, y):
    """PoCL's own choice is one work-group of up to 4096 work-items: one thread for a 13 x 40 grid."""
    grid = cpu_gemm_grid(x, y)
    assert grid.group == (CPU_GEMM_GROUP, 1) and grid.threads[1] == y
    assert x <= grid.threads[0] < x + CPU_GEMM_GROUP and grid.threads[0] % CPU_GEMM_GROUP == 0


@pytest.mark.parametrize("n, vw, nv", [(16, 16, 1), (24, 8, 3), (32, 16, 2), (48, 16, 3), (96, 16, 3),
                                       (64, 16, 4), (144, 16, 3), (672, 16, 3), (40, 8, 5), (88, 8, 1),
                                       (160, 16, 2), (80, 8, 5), (1000, 8, 5), (1001, 8, 1)])
def test_the_cpu_kernel_takes_blocks_of_vectors_of_16_else_the_most_whole_columns(n, vw, nv):
    assert gemm_vectors(n) == (vw, nv)


@pytest.mark.parametrize("n, stride", [(8, 8), (12, 16), (16, 16), (24, 32), (28, 32), (40, 48), (56, 64), (72, 96),
                                       (88, 96), (104, 128), (120, 128), (1000, 1008), (1001, 1008)])
def test_packed_rows_are_padded_to_blocks_of_two_or_three_vectors_of_16(n, stride):
    assert cpu_gemm_row_stride(n) == stride
    if n > 16:
        vw, nv = gemm_vectors(stride)
        assert vw == 16 and nv >= 2


@pytest.mark.parametrize("name, k, in_place_on_cpu", [("fully-connected-in-place", 1024, True),
                                                       ("conv3x3-k576", 576, False), ("fully-connected", 512, False),
                                                       ("conv3x3-same", 288, False)])
def test_filter_is_read_in_place_from_k_512_past_the_packing_budget(name, k, in_place_on_cpu):
    """K >= 512: the GEMM reads the weights in the model's bytes, on a CPU device where their
    packed copy would take more than CPU_GEMM_PACK_BYTES; a shorter K, or there a copy within
    the budget, packs a copy."""
    device = Device("opencl")
    if not device.backend.device.host_unified_memory:
        pytest.skip("a device with memory of its own holds its copy there")
    in_place = in_place_on_cpu if device.backend.target.name == CPU_TARGET.name else k >= 512
    model, _ = CASES[name]()
    segment = plan_of(device, model)._last[0]  # compiled at prepare for the declared shapes
    gemm = next(s for s in segment.spec.steps if isinstance(s, GemmStep))
    weights = np.frombuffer(model.operandValues, np.uint8)
    assert gemm.b_transposed == in_place
    assert np.shares_memory(segment.buffers[gemm.args[1]].hostbuf, weights) == in_place


@pytest.mark.parametrize("m, rows", [(1, 1), (2, NT_BLOCK), (49, NT_BLOCK)])
def test_one_row_with_b_transposed_is_computed_once(backend, m, rows):
    """A GEMM of one row with B transposed (a classifier's fully connected layer) launches one
    row of work-items, each computing that row once (NT_ROWS 1), and stores the same bits as
    blocks of 4 rows."""
    assert nt_rows(m) == rows
    n, k = 37, 1030
    source, name, grid = gemm_unit(True, m, n, True, False)
    assert name == "nn_gemm_nt_vec" and ("#define NT_ROWS 1\n" in source) == (rows == 1)
    assert grid.threads[1] == -(-m // rows)
    rng = np.random.default_rng(m)
    a, b = rng.standard_normal((m, k), dtype=np.float32), rng.standard_normal((n, k), dtype=np.float32)
    outs = []
    for text, launch in ((source, grid), ("#define VW 16\n" + kernel_template("gemm.cl"),
                                          cpu_gemm_grid(-(-n // NT_BLOCK), -(-m // NT_BLOCK)))):
        kernel = backend.compile(text, [name])[0]
        bufs = [backend.alloc(x.nbytes) for x in (a, b, np.empty((m, n), np.float32))]
        backend.upload(bufs[0], a)
        backend.upload(bufs[1], b)
        kernel.set_args(*bufs, np.int32(m), np.int32(n), np.int32(k))
        backend.cl.enqueue_nd_range_kernel(backend.queue, kernel, launch.threads, launch.group)
        c = np.empty((m, n), np.float32)
        backend.download(bufs[2], c)
        outs.append(c)
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_allclose(outs[0], a @ b.T, rtol=1e-5, atol=1e-4)
